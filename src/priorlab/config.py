"""Typed, validated parameters: the one place where ``params.yaml`` is read.

Every stage calls :func:`load_params` before doing any work.  A bad value
raises :class:`ParamsError` with a one-line message naming the key and the
allowed values, so a typo never reaches a training loop and nothing is
written.

``params.yaml`` is a copy of one profile in ``profiles/`` (``tiny``, ``cpu``,
``paper``); switch with ``make profile PROFILE=tiny`` (i.e.
``python -m priorlab.config use tiny``).
"""

from __future__ import annotations

import dataclasses
import shutil
import sys
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from priorlab.errors import UserError
from priorlab.metric_registry import DEFAULT_METRICS, METRICS

PROFILES = ("tiny", "cpu", "paper")


class ParamsError(UserError, ValueError):
    """An invalid parameter; the message names the key and what is allowed."""


# --------------------------------------------------------------------------- schema


@dataclass(frozen=True)
class DatasetParams:
    """One data set built by the ``data`` stage (a ``datasets:`` entry).

    Data set kinds subclass this with their own settings and register in ``DATASET_PARAMS``; an
    entry is parsed into the class of its ``kind``.  How each kind is built:
    :mod:`priorlab.data.registry`.
    """

    kind: str
    n_train: int
    n_test: int
    seed: int = 0
    normalise: Literal["none", "l2"] = "none"  # "l2": unit L2 norm per observation (VSC authors' Smiley)

    def check(self, key: str) -> None:
        _one_of(f"{key}.kind", self.kind, tuple(DATASET_PARAMS))
        _positive(f"{key}.n_train", self.n_train)
        _positive(f"{key}.n_test", self.n_test)
        _non_negative(f"{key}.seed", self.seed)


@dataclass(frozen=True)
class SmileyParams(DatasetParams):
    """Smiley faces (VSC paper, supplement E)."""

    presence_prob: float = 0.5  # probability of each of the 4 attributes

    def check(self, key: str) -> None:
        super().check(key)
        if not 0.0 < self.presence_prob < 1.0:
            raise ParamsError(f"{key}.presence_prob must be in (0, 1), got {self.presence_prob}")


@dataclass(frozen=True)
class DSpritesParams(DatasetParams):
    """Procedural dSprites: points of the full factor grid."""

    resolution: int = 32  # 64 (original) or 32 (cpu variant)

    def check(self, key: str) -> None:
        super().check(key)
        _one_of(f"{key}.resolution", self.resolution, (32, 64))


@dataclass(frozen=True)
class MNISTParams(DatasetParams):
    """MNIST-format images with class labels: kinds ``mnist`` and ``fashion_mnist``."""

    binarise: Literal["none", "threshold", "stochastic"] = "none"  # keep grey levels, or binarise once


@dataclass(frozen=True)
class SparseSyntheticParams(DatasetParams):
    """The sparse VAE's synthetic benchmark (paper 003, §2.2): 7 features of 2 correlated factors."""

    rho: float = 0.0  # correlation of the two factors
    noise_std: float = 0.5  # the released code's level (the text's σ² = 0.5 is std 0.707)

    def check(self, key: str) -> None:
        super().check(key)
        if not -1.0 < self.rho < 1.0:
            raise ParamsError(f"{key}.rho must be in (-1, 1), got {self.rho}")
        _non_negative(f"{key}.noise_std", self.noise_std)


DATASET_PARAMS: dict[str, type[DatasetParams]] = {
    "smiley": SmileyParams,
    "dsprites": DSpritesParams,
    "mnist": MNISTParams,
    "fashion_mnist": MNISTParams,
    "sparse_synthetic": SparseSyntheticParams,
}
"""``kind`` → its parameter class (a kind's own settings are typed fields of a subclass)."""


@dataclass(frozen=True)
class BarsParams(DatasetParams):
    """The bars test (paper 000): H = 2R bars on an R x R grid, vectors [R²] (:mod:`priorlab.data.bars`)."""

    R: int = 5
    variant: Literal["occlusion", "linear"] = "occlusion"  # bars combine by max, or add up
    intensity: Literal["slab", "fixed"] = "slab"  # a present bar's value: N(slab_mu, slab_std²), or 1
    slab_mu: float = 1.0
    slab_std: float = 0.25
    noise_std: float = 0.05
    bar_prob: float = 0.0  # probability of each bar (0: 2/H)

    def check(self, key: str) -> None:
        super().check(key)
        if self.R < 2:
            raise ParamsError(f"{key}.R must be >= 2, got {self.R}")
        _non_negative(f"{key}.slab_std", self.slab_std)
        _non_negative(f"{key}.noise_std", self.noise_std)
        if not 0.0 <= self.bar_prob <= 1.0:
            raise ParamsError(f"{key}.bar_prob must be in [0, 1], got {self.bar_prob}")


@dataclass(frozen=True)
class ImagePatchesParams(DatasetParams):
    """Patches of scikit-learn's two sample photographs (paper 000's natural-image experiment),
    vectors [2·patch_size²] (ON/OFF channels) or [patch_size²] (:mod:`priorlab.data.patches`)."""

    patch_size: int = 8
    preprocess: Literal["dog_on_off", "centre"] = "dog_on_off"
    dog_sigmas: list[float] = field(default_factory=lambda: [1.0, 3.0])  # centre, surround (pixels)

    def check(self, key: str) -> None:
        super().check(key)
        if self.patch_size < 2:
            raise ParamsError(f"{key}.patch_size must be >= 2, got {self.patch_size}")
        if len(self.dog_sigmas) != 2 or not 0 < self.dog_sigmas[0] < self.dog_sigmas[1]:
            raise ParamsError(f"{key}.dog_sigmas must be [centre, surround] with 0 < centre < surround, "
                              f"got {self.dog_sigmas}")


DATASET_PARAMS["bars"] = BarsParams
DATASET_PARAMS["image_patches"] = ImagePatchesParams


@dataclass(frozen=True)
class MovieLensParams(DatasetParams):
    """Binarised MovieLens (paper 003, App. C.1): ratings ≥ 4 are 1, users with more than
    ``min_user_positives`` positives, the ``n_movies`` most-rated movies (G); rows are users, split
    by users (``n_train`` + ``n_test`` of them, seeded permutation)."""

    n_movies: int = 300
    min_user_positives: int = 20

    def check(self, key: str) -> None:
        super().check(key)
        _positive(f"{key}.n_movies", self.n_movies)
        _non_negative(f"{key}.min_user_positives", self.min_user_positives)


@dataclass(frozen=True)
class PBMCParams(DatasetParams):
    """10x PBMC 68k reduced (scanpy; 700 cells × 765 genes): integer counts rebuilt from ``.raw``
    (kind ``pbmc``) or their quantile normalisation (kind ``pbmc_quantile``, App. C.1, reference =
    the training cells); cell types (``bulk_labels``) as class labels, never used in training."""


DATASET_PARAMS["movielens"] = MovieLensParams
DATASET_PARAMS["pbmc"] = PBMCParams
DATASET_PARAMS["pbmc_quantile"] = PBMCParams


@dataclass(frozen=True)
class SetupParams:
    """A data set with its networks and latent size: one pretraining is shared per setup."""

    dataset: str
    latent_dim: int
    encoder: Literal["mlp", "conv"] = "mlp"
    decoder: Literal["mlp", "conv"] = "mlp"
    hidden: list[int] = field(default_factory=lambda: [256, 256])
    channels: list[int] = field(default_factory=lambda: [32, 32, 64, 64])
    likelihood: str = "bernoulli"  # a name in priorlab.likelihoods.LIKELIHOODS
    # Gaussian likelihood: fixed observation std, or "learned" per feature
    obs_std: float = 0.1
    learn_obs_std: bool = False
    # the `models:` entry pretrained for this setup: by convention "pretrain", the N(0, I) VAE with
    # beta = 1 (paper 001, sec. 2.4); kinds with their own pretraining phase (VSC's spike warm-up) differ
    pretrain_model: str = "pretrain"
    # false: the setup is not pretrained (its pretrain stage only records that; every run of the setup
    # starts from scratch, e.g. a model fitted by EM)
    pretraining: bool = True

    def check(self, key: str) -> None:
        from priorlab.likelihoods import LIKELIHOODS  # the registry (imports torch: only when checking)

        _one_of(f"{key}.likelihood", self.likelihood, tuple(LIKELIHOODS))
        _positive(f"{key}.latent_dim", self.latent_dim)
        for i, h in enumerate(self.hidden):
            _positive(f"{key}.hidden[{i}]", h)
        for i, c in enumerate(self.channels):
            _positive(f"{key}.channels[{i}]", c)
        _positive(f"{key}.obs_std", self.obs_std)


@dataclass(frozen=True)
class PriorParams:
    """The prior p(z) of the ``vae`` and ``beta_tcvae`` kinds: a tagged union on ``kind``.

    Prior kinds with settings subclass this and register in ``PRIOR_PARAMS`` (their builder in
    ``priorlab.priors.PRIOR_BUILDERS``).  ``lr`` > 0 trains the prior's parameters in their own
    optimiser group at that learning rate (0: the phase's lr).
    """

    kind: str = "standard_normal"
    lr: float = 0.0

    def check(self, key: str) -> None:
        _one_of(f"{key}.kind", self.kind, tuple(PRIOR_PARAMS))
        _non_negative(f"{key}.lr", self.lr)


@dataclass(frozen=True)
class LpNestedPriorParams(PriorParams):
    """The Lp-nested (ISA) prior of paper 004: root exponent ``p0`` over subspaces ``[p_l, n_l]``
    (n_l latents each, summing to the setup's latent_dim), exponents learned (kept > 1) in their
    own optimiser group at ``lr`` (the released code: 5e-4 against 1e-3 for the nets)."""

    kind: str = "lp_nested"
    p0: float = 2.1
    subspaces: list[list[float]] = field(default_factory=lambda: [[2.2, 5]] * 5)
    learn_exponents: bool = True
    # s of exp(-f(z)^p0 / s): the paper does not give it; s = 2 makes the prior N(0, I) (the baselines'
    # prior) when every exponent is 2, so the near-Gaussian start p = 2.1 / 2.2 is close to it
    scale: float = 2.0

    def check(self, key: str) -> None:
        super().check(key)
        from priorlab.priors.lp_nested import LpNestedLayout  # its validation, one place

        for i, sub in enumerate(self.subspaces):
            if len(sub) != 2 or not float(sub[1]).is_integer():
                raise ParamsError(f"{key}.subspaces[{i}] must be [p_l, n_l] with an integer n_l, got {sub!r}")
        try:
            LpNestedLayout.from_params(self.layout())
        except ValueError as exc:
            raise ParamsError(f"{key}: {exc}") from None
        _positive(f"{key}.scale", self.scale)

    def layout(self) -> dict:
        return {"p0": self.p0, "subspaces": [[p, int(n)] for p, n in self.subspaces]}


PRIOR_PARAMS: dict[str, type[PriorParams]] = {"standard_normal": PriorParams, "lp_nested": LpNestedPriorParams}
"""``kind`` → its parameter class."""


@dataclass(frozen=True)
class ModelParams:
    """A model: prior + encoder family + objective weights.

    Model kinds with their own settings subclass this and register in
    ``MODEL_PARAMS``; a ``models:`` entry is parsed into the class of its ``kind``.  ``prior``
    is used by the kinds whose prior is configurable (``vae``, ``beta_tcvae``); kinds with their
    own prior (``own_prior``) reject a non-default one.
    """

    kind: str
    beta: float = 1.0  # weight of the KL term (β-VAE; 1 = the ELBO; 0 = an autoencoder with noise)
    warm_start: Literal["pretrain", "scratch"] = "pretrain"
    train_steps: int = 0  # joint-training steps of this model (0: train.steps)
    pretrain_steps: int = 0  # pretraining steps when a setup's pretrain_model is this entry (0: pretrain.steps)
    prior: PriorParams = field(default_factory=PriorParams)

    own_prior: typing.ClassVar[bool] = False
    fitted_by_em: typing.ClassVar[bool] = False  # no pretraining, no optimiser: warm_start must be scratch

    def check(self, key: str) -> None:
        _one_of(f"{key}.kind", self.kind, tuple(MODEL_PARAMS))
        if self.fitted_by_em and self.warm_start != "scratch":
            raise ParamsError(f"{key}.warm_start must be scratch for kind {self.kind} (it is fitted by EM from scratch)")
        _non_negative(f"{key}.beta", self.beta)
        _non_negative(f"{key}.train_steps", self.train_steps)
        _non_negative(f"{key}.pretrain_steps", self.pretrain_steps)
        self.prior.check(f"{key}.prior")
        if self.own_prior and self.prior != PriorParams():
            raise ParamsError(f"{key}.prior: kind {self.kind} has its own prior; remove the prior key")

    def record(self) -> dict:
        """The settings as recorded with the results (``prior`` only for kinds whose prior it sets)."""
        out = dataclasses.asdict(self)
        if self.own_prior:
            del out["prior"]
        return out


MODEL_PARAMS: dict[str, type[ModelParams]] = {"vae": ModelParams}
"""``kind`` → its parameter class (the kind's own settings are typed fields of a subclass)."""


@dataclass(frozen=True)
class VSCParams(ModelParams):
    """Variational Sparse Coding (paper 002): spike-and-slab posterior, pseudo-input prior, sparsity.

    The spike pre-training (λ = 0, eq. 7) is the pipeline's pretrain stage: point
    ``setups.<name>.pretrain_model`` at a ``vsc`` entry.  Ramps count train steps.

    The paper's objective is the default.  The authors' released code differs in ways that decide
    whether the spikes become input-dependent (``models/vae_ss_ss_vamp_ept_sp.py``): sharpened
    pseudo-input spikes, a KL on the unwarmed slabs, its Bernoulli KL, Xavier pseudo-inputs, its
    selector and warm-up, c = 100 fixed.  Each is an option; ``preset: released_code`` sets every
    option left at its paper default to the code's value (:meth:`resolved`; a value other than the
    paper default is kept).
    """

    own_prior: typing.ClassVar[bool] = True
    RELEASED_CODE: typing.ClassVar[dict] = {
        "selector": "code", "warmup_variant": "code", "prior_spike_sharpening": 10.0, "kl_slabs": "unwarmed",
        "bernoulli_kl": "code", "pseudo_input_init": "xavier", "sharpness_start": 100.0, "sharpness_end": 100.0,
    }

    alpha: float = 0.01  # prior spike probability α of the sparsity term (eq. 4)
    n_pseudo_inputs: int = 20  # paper D.1 (the released code's examples use 10)
    selector: Literal["paper", "code"] = "paper"  # A.3: S(a(u - b)) of unit-sum outputs | code: unit-sum weights
    selector_scale: float = 60.0  # a of A.3
    selector_shift: float = 0.5  # b of A.3
    warmup_variant: Literal["paper", "code"] = "paper"  # eq. 7 slab variance λσ² + 1 - λ | code: σ^(2λ)
    warmup_ramp_steps: int = 0  # train steps over which λ goes 0 → 1 (Alg. 1); 0: λ = 1 from the start
    sharpness_start: float = 50.0  # c of T(y) = S(c y) (B.2): 50 → 200 in the paper, fixed 100 in the code
    sharpness_end: float = 200.0
    sharpness_ramp_steps: int = 0  # train steps over which c goes start → end; the pretrain uses c_start
    # the released code's choices (off = the paper)
    prior_spike_sharpening: float = 0.0  # ν of γ_u ← σ(ν(γ_u − ½)) in the spike KL and sparsity term; code: 10
    kl_slabs: Literal["warmed", "unwarmed"] = "warmed"  # code: the KL on the unwarmed slabs (Alg. 1 line 7)
    bernoulli_kl: Literal["clamped", "code"] = "clamped"  # code: log γ as is, ε only inside log(1 − γ + ε)
    pseudo_input_init: Literal["uniform", "xavier"] = "uniform"  # code: Xavier (≈ ±0.08)
    preset: Literal["paper", "released_code"] = "paper"

    def resolved(self) -> "VSCParams":
        """The settings the model is built with: ``preset: released_code`` fills the code's values into
        every option left at its paper default."""
        if self.preset != "released_code":
            return self
        defaults = {f.name: f.default for f in dataclasses.fields(VSCParams)}
        return dataclasses.replace(self, **{k: v for k, v in self.RELEASED_CODE.items()
                                            if getattr(self, k) == defaults[k]})

    def record(self) -> dict:
        return ModelParams.record(self.resolved())

    def check(self, key: str) -> None:
        super().check(key)
        _non_negative(f"{key}.prior_spike_sharpening", self.prior_spike_sharpening)
        if not 0.0 < self.alpha < 1.0:
            raise ParamsError(f"{key}.alpha must be in (0, 1), got {self.alpha}")
        _positive(f"{key}.n_pseudo_inputs", self.n_pseudo_inputs)
        _positive(f"{key}.selector_scale", self.selector_scale)
        _positive(f"{key}.sharpness_start", self.sharpness_start)
        _positive(f"{key}.sharpness_end", self.sharpness_end)
        _non_negative(f"{key}.warmup_ramp_steps", self.warmup_ramp_steps)
        _non_negative(f"{key}.sharpness_ramp_steps", self.sharpness_ramp_steps)


@dataclass(frozen=True)
class BetaTCVAEParams(ModelParams):
    """β-TCVAE (Chen et al. 2018): weights of index-code MI, total correlation, dimension-wise KL."""

    tc_weight: float = 6.0  # β of Chen et al. (the KL weight ``beta`` stays 1)
    mi_weight: float = 1.0  # α
    dimwise_weight: float = 1.0  # γ
    estimator: Literal["mws", "mss"] = "mws"  # minibatch-weighted (the paper's) | minibatch-stratified sampling

    def check(self, key: str) -> None:
        super().check(key)
        if self.beta != 1.0:
            raise ParamsError(f"{key}.beta must be 1 for kind beta_tcvae (weight the TC with tc_weight), got {self.beta}")
        _non_negative(f"{key}.tc_weight", self.tc_weight)
        _non_negative(f"{key}.mi_weight", self.mi_weight)
        _non_negative(f"{key}.dimwise_weight", self.dimwise_weight)


@dataclass(frozen=True)
class FactorialMixtureParams(ModelParams):
    """Factorial mixture prior VAE (paper 001): I factors of D = latent_dim / I dims, K_i components.

    ``num_components`` has one entry per factor (or one shared by all).  Semi-supervision (sec. 2.5):
    factor 0 is clamped to the data factor ``supervised_factor`` (a dSprites factor name, or
    ``label`` for MNIST) on a seeded ``labelled_fraction`` of the training points, with the
    cross-entropy weight ``delta`` for the first ``delta_steps`` train steps (0: all steps).
    """

    own_prior: typing.ClassVar[bool] = True

    num_factors: int = 1
    num_components: list[int] = field(default_factory=lambda: [16])
    m0: float = 0.0  # Normal-Gamma / Dirichlet hyperprior (paper: 0, 1, 0.01, 0.01, 1)
    s0: float = 1.0
    a0: float = 0.01
    b0: float = 0.01
    c0: float = 1.0
    tau0: float = 2000.0  # rho = (tau0 + tau)^-kappa, kappa in (0.5, 1] (App. E.3: 2000, 0.7)
    kappa: float = 0.7
    init_method: Literal["kmeans", "random"] = "kmeans"
    prior_init_steps: int = 2000  # E-step + SVI iterations of prior_init (paper: 2e4)
    prior_init_batch: int = 64
    kl_z_weight: float = 1.0  # up-weight KL[z] by this factor ... (sec. 4.2: 20)
    kl_z_weight_steps: int = 0  # ... for the first train steps (0: off)
    supervised_factor: str = ""  # "" = unsupervised
    labelled_fraction: float = 0.0
    label_seed: int = 0
    delta: float = 0.0  # Delta of eq. 8
    delta_steps: int = 0
    prior_lr: float = 0.01  # Adam step of the first-order prior updates while Delta > 0

    def check(self, key: str) -> None:
        super().check(key)
        _positive(f"{key}.num_factors", self.num_factors)
        if len(self.num_components) not in (1, self.num_factors):
            raise ParamsError(f"{key}.num_components needs 1 or num_factors = {self.num_factors} entries, "
                              f"got {len(self.num_components)}")
        for i, k in enumerate(self.num_components):
            _positive(f"{key}.num_components[{i}]", k)
        for name in ("s0", "a0", "b0", "c0", "prior_init_batch", "kl_z_weight", "prior_lr"):
            _positive(f"{key}.{name}", getattr(self, name))
        if not 0.5 < self.kappa <= 1.0:
            raise ParamsError(f"{key}.kappa must be in (0.5, 1], got {self.kappa}")
        for name in ("tau0", "prior_init_steps", "kl_z_weight_steps", "label_seed", "delta", "delta_steps"):
            _non_negative(f"{key}.{name}", getattr(self, name))
        if not 0.0 <= self.labelled_fraction <= 1.0:
            raise ParamsError(f"{key}.labelled_fraction must be in [0, 1], got {self.labelled_fraction}")
        if (self.labelled_fraction > 0 or self.delta > 0) and not self.supervised_factor:
            raise ParamsError(f"{key}.supervised_factor must name a data factor when labelled_fraction or delta > 0")

    def components(self) -> list[int]:
        """K_i of every factor."""
        return list(self.num_components) * (self.num_factors if len(self.num_components) == 1 else 1)


@dataclass(frozen=True)
class PPCAParams(ModelParams):
    """Probabilistic PCA fitted by online EM (no pretraining, no optimiser): ``latent_dim`` of the
    setup components; step ρ_t = (τ0 + t)^−κ rescaled to ρ_1 = 1."""

    own_prior: typing.ClassVar[bool] = True
    fitted_by_em: typing.ClassVar[bool] = True

    warm_start: Literal["pretrain", "scratch"] = "scratch"
    tau0: float = 10.0
    kappa: float = 0.7
    init_scale: float = 0.1

    def check(self, key: str) -> None:
        super().check(key)
        _non_negative(f"{key}.tau0", self.tau0)
        if not 0.5 < self.kappa <= 1.0:
            raise ParamsError(f"{key}.kappa must be in (0.5, 1], got {self.kappa}")
        _positive(f"{key}.init_scale", self.init_scale)


MODEL_PARAMS["ppca"] = PPCAParams
MODEL_PARAMS["vsc"] = VSCParams
MODEL_PARAMS["beta_tcvae"] = BetaTCVAEParams
MODEL_PARAMS["fmvae"] = FactorialMixtureParams


@dataclass(frozen=True)
class FactorVAEParams(ModelParams):
    """FactorVAE (Kim & Mnih 2018): γ on the discriminator's TC estimate; Adam settings as
    disentanglement_lib (VAE at ``train.lr`` with ``vae_betas``; discriminator at its own)."""

    gamma: float = 40.0
    discriminator_hidden: list[int] = field(default_factory=lambda: [1000] * 6)
    discriminator_lr: float = 1e-4
    discriminator_betas: list[float] = field(default_factory=lambda: [0.5, 0.9])
    vae_betas: list[float] = field(default_factory=lambda: [0.9, 0.999])

    def check(self, key: str) -> None:
        super().check(key)
        _non_negative(f"{key}.gamma", self.gamma)
        _positive(f"{key}.discriminator_lr", self.discriminator_lr)
        for i, h in enumerate(self.discriminator_hidden):
            _positive(f"{key}.discriminator_hidden[{i}]", h)
        for name in ("discriminator_betas", "vae_betas"):
            betas = getattr(self, name)
            if len(betas) != 2 or not all(0.0 <= b < 1.0 for b in betas):
                raise ParamsError(f"{key}.{name} must be two numbers in [0, 1), got {betas}")


MODEL_PARAMS["factor_vae"] = FactorVAEParams


@dataclass(frozen=True)
class SparseCodingModelParams(ModelParams):
    """Spike-and-slab sparse coding by sampling-based EM (paper 000): kind ``mssc`` (max rule, eq. 10)
    or ``linear_ssc`` (sum rule, the baseline); H = the setup's ``latent_dim``.  One training step
    is one EM iteration on the minibatch (:mod:`priorlab.models.mssc`); its W initialisation and
    sampler seed come from the run's seed like a net's weights."""

    own_prior: typing.ClassVar[bool] = True
    fitted_by_em: typing.ClassVar[bool] = True

    warm_start: Literal["pretrain", "scratch"] = "scratch"
    n_candidates: int = 0  # H': latents preselected per data point (0: all H, no preselection)
    n_chains: int = 2  # Gibbs chains per data point
    samples_per_chain: int = 5  # kept sweeps per chain (K = n_chains * samples_per_chain)
    burn_in: int = 10  # discarded Gibbs sweeps
    thin: int = 1
    gibbs_init: Literal["prior", "zeros"] = "prior"
    anneal_start: float = 4.0  # likelihood temperature T at iteration 0, annealed linearly to 1
    anneal_iters: int = 25  # ... over this many EM iterations (0: no annealing)
    safeguard: bool = True  # eq. 11 step shortened per pixel row when it raises the exact objective
    nonnegative: bool = False  # W >= 0 (kind mssc only)
    init_noise: float = 0.25  # W init: data mean + init_noise * data std * |N(0, 1)|
    init_mu_pr: float = 1.0  # initial slab mean and variance
    init_var_pr: float = 1.0

    def check(self, key: str) -> None:
        super().check(key)
        _non_negative(f"{key}.n_candidates", self.n_candidates)
        for name in ("n_chains", "samples_per_chain", "thin", "init_var_pr"):
            _positive(f"{key}.{name}", getattr(self, name))
        for name in ("burn_in", "anneal_iters", "init_noise"):
            _non_negative(f"{key}.{name}", getattr(self, name))
        if not self.anneal_start >= 1.0:
            raise ParamsError(f"{key}.anneal_start must be >= 1, got {self.anneal_start}")
        if self.nonnegative and self.kind != "mssc":
            raise ParamsError(f"{key}.nonnegative: W >= 0 is implemented for kind mssc only")

    @property
    def rule(self) -> str:
        return {"mssc": "max", "linear_ssc": "linear"}[self.kind]


MODEL_PARAMS["mssc"] = SparseCodingModelParams
MODEL_PARAMS["linear_ssc"] = SparseCodingModelParams


@dataclass(frozen=True)
class SparseVAEParams(ModelParams):
    """The sparse VAE (paper 003): masked decoder (eq. 1) with the Spike-and-Slab-Lasso prior on W
    (eq. 2–4, Algorithm 1; a = 1, b = G). ``density_constants``: p* with the Laplace normalisers of
    eq. 57 (false: the released code's form). ``encoder_input``: ``row_normalised`` for counts
    (App. C.1). ``prior_cov``: [] = Σ_z = I (B.1), else a K × K matrix (KL of B.2, eq. 59)."""

    own_prior: typing.ClassVar[bool] = True
    lambda0: float = 10.0
    lambda1: float = 1.0
    density_constants: bool = False
    encoder_input: Literal["raw", "row_normalised"] = "raw"
    prior_cov: list[list[float]] = field(default_factory=list)

    def check(self, key: str) -> None:
        super().check(key)
        _positive(f"{key}.lambda1", self.lambda1)
        if not self.lambda0 > self.lambda1:
            raise ParamsError(f"{key}.lambda0 must exceed lambda1 (spike ≫ slab), got {self.lambda0} <= {self.lambda1}")
        _one_of(f"{key}.encoder_input", self.encoder_input, ("raw", "row_normalised"))
        if self.prior_cov:
            k = len(self.prior_cov)
            if any(len(row) != k for row in self.prior_cov):
                raise ParamsError(f"{key}.prior_cov must be a square K x K matrix")
            import numpy as np

            cov = np.asarray(self.prior_cov, dtype=float)
            if not np.allclose(cov, cov.T) or np.linalg.eigvalsh(cov).min() <= 0:
                raise ParamsError(f"{key}.prior_cov must be symmetric positive definite")


MODEL_PARAMS["sparse_vae"] = SparseVAEParams


@dataclass(frozen=True)
class OptimParams:
    """A training phase (pretraining or joint training)."""

    steps: int
    batch_size: int
    lr: float
    checkpoint_every: int = 500
    log_every: int = 50
    kl_warmup_steps: int = 0  # linear KL annealing from 0 to 1 over these steps
    lr_milestones: list[int] = field(default_factory=list)  # steps at which lr is multiplied by lr_gamma
    lr_gamma: float = 0.1
    seed: int = 0

    def check(self, key: str) -> None:
        _non_negative(f"{key}.steps", self.steps)
        _positive(f"{key}.batch_size", self.batch_size)
        _positive(f"{key}.lr", self.lr)
        _positive(f"{key}.checkpoint_every", self.checkpoint_every)
        _positive(f"{key}.log_every", self.log_every)
        _non_negative(f"{key}.kl_warmup_steps", self.kl_warmup_steps)
        _positive(f"{key}.lr_gamma", self.lr_gamma)
        for i, m in enumerate(self.lr_milestones):
            _positive(f"{key}.lr_milestones[{i}]", m)


@dataclass(frozen=True)
class RunParams:
    """One trained model: a setup, a model and a seed (a ``runs:`` entry; its key names the run)."""

    setup: str
    model: str
    seed: int = 0
    group: str = "baselines"  # the experiment it belongs to (report sections)

    def check(self, key: str) -> None:
        _non_negative(f"{key}.seed", self.seed)


@dataclass(frozen=True)
class EvaluateParams:
    n_eval: int = 2000  # test points for ELBO / importance-weighted bound
    iw_samples: int = 100  # k of the importance-weighted log-likelihood estimate
    batch_size: int = 250
    active_threshold: float = 0.01  # Burda et al.: Var_x E_q[z_d] above this counts as active
    # disentanglement metrics (disentanglement_lib's sizes: 10,000 train / 5,000 test points)
    metric_num_train: int = 10000
    metric_num_test: int = 5000
    metric_batch_size: int = 64  # beta-VAE / FactorVAE score batches
    n_bins: int = 20  # MIG / modularity discretisation
    metrics: list[str] = field(default_factory=lambda: list(DEFAULT_METRICS))
    # per experiment group (``runs.*.group``), a metric list replacing ``metrics`` for its runs
    group_metrics: dict[str, list[str]] = field(default_factory=dict)
    representation: Literal["mean", "sample"] = "mean"  # encoder mean (reference) or one posterior sample
    n_jobs: int = 1  # per-factor classifiers (DCI) in parallel processes
    # "gbt": the reference gradient-boosted trees (slow); "hist": the fast histogram-GBT backend
    dci_backend: Literal["gbt", "hist"] = "gbt"
    seed: int = 0

    def metrics_for(self, group: str) -> list[str]:
        """The disentanglement metrics computed for the runs of experiment ``group``."""
        return list(self.group_metrics.get(group, self.metrics))

    def check(self, key: str) -> None:
        _positive(f"{key}.n_eval", self.n_eval)
        _positive(f"{key}.metric_num_train", self.metric_num_train)
        _positive(f"{key}.metric_num_test", self.metric_num_test)
        _positive(f"{key}.metric_batch_size", self.metric_batch_size)
        _positive(f"{key}.n_bins", self.n_bins)
        _positive(f"{key}.n_jobs", self.n_jobs)
        for i, m in enumerate(self.metrics):
            _one_of(f"{key}.metrics[{i}]", m, tuple(METRICS))
        for group, names in self.group_metrics.items():
            for i, m in enumerate(names):
                _one_of(f"{key}.group_metrics.{group}[{i}]", m, tuple(METRICS))
        _positive(f"{key}.iw_samples", self.iw_samples)
        _positive(f"{key}.batch_size", self.batch_size)
        _positive(f"{key}.active_threshold", self.active_threshold)


@dataclass(frozen=True)
class FigureParams:
    n_reconstructions: int = 8
    traversal_steps: int = 9
    traversal_range: float = 2.5
    max_traversal_dims: int = 10

    def check(self, key: str) -> None:
        _positive(f"{key}.n_reconstructions", self.n_reconstructions)
        _positive(f"{key}.traversal_steps", self.traversal_steps)
        _positive(f"{key}.traversal_range", self.traversal_range)
        _positive(f"{key}.max_traversal_dims", self.max_traversal_dims)


@dataclass(frozen=True)
class IsaStudyParams:
    """Paper 004's dSprites study (the ``isa_experiments`` stage trains it in-process): every
    ``models`` entry over the β grid (``beta`` of kind vae, ``tc_weight`` of kind beta_tcvae: the
    paper's β weights the TC term of (ISA-)β-TCVAE) or, for kind factor_vae, the γ grid, × seeds;
    from scratch on ``setup`` with ``train``; metrics with ``evaluate``.  ``setup: ""`` = off."""

    setup: str = ""
    models: list[str] = field(default_factory=list)
    betas: list[float] = field(default_factory=lambda: [1.0, 2.0, 4.0])
    gammas: list[float] = field(default_factory=lambda: [1.0, 5.0, 10.0])
    seeds: list[int] = field(default_factory=lambda: [0, 1])
    train: OptimParams = field(default_factory=lambda: OptimParams(steps=1000, batch_size=64, lr=1e-3))
    evaluate: EvaluateParams = field(default_factory=EvaluateParams)

    GRID: typing.ClassVar[dict[str, str]] = {"vae": "beta", "beta_tcvae": "tc_weight", "factor_vae": "gamma"}

    def check(self, key: str, params: "Params") -> None:
        if not self.setup:
            return
        _one_of(f"{key}.setup", self.setup, tuple(params.setups))
        if not self.models:
            raise ParamsError(f"{key}.models must name at least one models entry")
        for i, m in enumerate(self.models):
            _one_of(f"{key}.models[{i}]", m, tuple(params.models))
            _one_of(f"{key}.models[{i}] (its kind)", params.models[m].kind, tuple(self.GRID))
        for name in ("betas", "gammas", "seeds"):
            if not getattr(self, name):
                raise ParamsError(f"{key}.{name} must not be empty")
            for i, v in enumerate(getattr(self, name)):
                _non_negative(f"{key}.{name}[{i}]", v)
        self.train.check(f"{key}.train")
        self.evaluate.check(f"{key}.evaluate")


@dataclass(frozen=True)
class SupervisedCeilingParams:
    """The supervised ceiling of a semi-supervised factor (issue 10, paper 001 sec. 4.2), the
    ``supervised_ceiling`` stage: per ``targets`` entry (setup -> its data factor, ``label`` = class
    labels) the setup's encoder with a linear softmax head on all training labels but ``n_val``
    held out (Adam, ``lr``, ``batch_size``); their accuracy every ``eval_every`` steps; stops after ``patience`` evaluations without a gain or at
    ``max_steps``.  dSprites setups are also measured at the procedural ``resolutions``."""

    targets: dict[str, str] = field(default_factory=dict)
    resolutions: list[int] = field(default_factory=list)
    batch_size: int = 64
    lr: float = 1e-3
    eval_every: int = 200
    patience: int = 3
    max_steps: int = 3000
    n_val: int = 1000
    seed: int = 0

    def check(self, key: str, params: "Params") -> None:
        for setup in self.targets:
            _one_of(f"{key}.targets", setup, tuple(params.setups))
        for i, r in enumerate(self.resolutions):
            _positive(f"{key}.resolutions[{i}]", r)
        for name in ("batch_size", "lr", "eval_every", "patience", "max_steps", "n_val"):
            _positive(f"{key}.{name}", getattr(self, name))
        _non_negative(f"{key}.seed", self.seed)


@dataclass(frozen=True)
class MsscStudyParams:
    """Paper 000's study (the ``mssc_experiments`` stage trains it in-process): every ``models``
    entry (kinds mssc / linear_ssc, H = 2R) on every ``bars`` data set entry (each ``seeds`` value
    shifts the entry's data seed and the model seed) for ``iterations`` full-batch EM iterations,
    recovery at correlation ``threshold``; dictionaries of the ``models`` on the ``patches`` entry
    with ``patch_latents`` latents for ``patch_iterations``.  ``bars: []`` = off."""

    bars: list[str] = field(default_factory=list)
    models: list[str] = field(default_factory=list)
    seeds: list[int] = field(default_factory=lambda: list(range(20)))
    iterations: int = 40
    threshold: float = 0.9
    patches: str = ""
    patch_latents: int = 32
    patch_iterations: int = 40
    n_jobs: int = 2

    def check(self, key: str, params: "Params") -> None:
        if not self.bars:
            return
        for i, d in enumerate(self.bars):
            _one_of(f"{key}.bars[{i}]", d, tuple(params.datasets))
            _one_of(f"{key}.bars[{i}] (its kind)", params.datasets[d].kind, ("bars",))
        if not self.models:
            raise ParamsError(f"{key}.models must name at least one models entry")
        for i, m in enumerate(self.models):
            _one_of(f"{key}.models[{i}]", m, tuple(params.models))
            _one_of(f"{key}.models[{i}] (its kind)", params.models[m].kind, ("mssc", "linear_ssc"))
        if not self.seeds:
            raise ParamsError(f"{key}.seeds must not be empty")
        for i, v in enumerate(self.seeds):
            _non_negative(f"{key}.seeds[{i}]", v)
        for name in ("iterations", "patch_latents", "patch_iterations", "n_jobs"):
            _positive(f"{key}.{name}", getattr(self, name))
        if not 0.0 < self.threshold <= 1.0:
            raise ParamsError(f"{key}.threshold must be in (0, 1], got {self.threshold}")
        if self.patches:
            _one_of(f"{key}.patches", self.patches, tuple(params.datasets))
            _one_of(f"{key}.patches (its kind)", params.datasets[self.patches].kind, ("image_patches",))


SPARSE_VAE_STUDY_KINDS = ("vae", "sparse_vae", "vsc")  # model kinds paper 003's studies train


@dataclass(frozen=True)
class SparseVaeRealParams:
    """A real-data study of paper 003 (``sparse_vae_study.movielens`` / ``.single_cell``): every
    ``models`` entry (kinds vae / sparse_vae / vsc) with ``latent_dim`` latents and MLP ``hidden``
    widths trained with ``train`` on each of ``splits`` random splits (split s = seed s,
    ``test_fraction`` of the rows held out), plus scikit-learn NMF (``nmf_alpha`` = C.3's alpha on
    W and H). ``models: []`` = off. MovieLens: the ``n_items`` most-rated movies, users with more
    than ``min_user_positives`` positives, fold-in of ``foldin_fraction`` of each held-out user's
    items (Liang et al. 2018), Recall@``recall_k`` and NDCG@``ndcg_k``; likelihood multinomial.
    Single cell: the ``n_items`` most variable genes; ``preprocess`` quantile (C.1, Gaussian
    likelihood as table 6) or counts (multinomial likelihood); also PCA."""

    models: list[str] = field(default_factory=list)
    splits: int = 5
    test_fraction: float = 0.2
    n_items: int = 300
    latent_dim: int = 30
    hidden: list[int] = field(default_factory=lambda: [300, 300, 300])
    nmf_alpha: float = 1.0
    min_user_positives: int = 20
    foldin_fraction: float = 0.8
    recall_k: int = 5
    ndcg_k: int = 10
    preprocess: Literal["quantile", "counts"] = "quantile"
    train: OptimParams = field(default_factory=lambda: OptimParams(steps=5000, batch_size=100, lr=1e-4))

    def check(self, key: str, params: "Params") -> None:
        if not self.models:
            return
        for i, m in enumerate(self.models):
            _one_of(f"{key}.models[{i}]", m, tuple(params.models))
            _one_of(f"{key}.models[{i}] (its kind)", params.models[m].kind, SPARSE_VAE_STUDY_KINDS)
        for name in ("splits", "n_items", "latent_dim", "recall_k", "ndcg_k"):
            _positive(f"{key}.{name}", getattr(self, name))
        for name in ("nmf_alpha", "min_user_positives"):
            _non_negative(f"{key}.{name}", getattr(self, name))
        for name in ("test_fraction", "foldin_fraction"):
            if not 0.0 < getattr(self, name) < 1.0:
                raise ParamsError(f"{key}.{name} must be in (0, 1), got {getattr(self, name)}")
        if max(self.recall_k, self.ndcg_k) > self.n_items:
            raise ParamsError(f"{key}.recall_k and ndcg_k must be <= n_items ({self.n_items})")
        _one_of(f"{key}.preprocess", self.preprocess, ("quantile", "counts"))
        for i, h in enumerate(self.hidden):
            _positive(f"{key}.hidden[{i}]", h)
        self.train.check(f"{key}.train")


@dataclass(frozen=True)
class SparseVaeStudyParams:
    """Paper 003's synthetic study (the ``sparse_vae_experiments`` stage trains it in-process): for
    every ρ in ``rhos``, ``datasets_per_rho`` data sets of ``n`` points (seeds 0, 1, …; 50/50 split;
    noise std ``noise_std``), every ``models`` entry (kinds vae / sparse_vae) with ``latent_dim``
    latents and an MLP of ``hidden`` widths, trained with ``train``; PCA and FactorAnalysis with
    ``latent_dim`` components. DCI on the true z binned into ``dci_bins`` quantile bins.
    ``models: []`` = off."""

    models: list[str] = field(default_factory=list)
    rhos: list[float] = field(default_factory=lambda: [0.0, 0.2, 0.4, 0.6, 0.8])
    datasets_per_rho: int = 25
    n: int = 1000
    noise_std: float = 0.5
    latent_dim: int = 5
    hidden: list[int] = field(default_factory=lambda: [50])
    dci_bins: int = 10
    dci_backend: Literal["gbt", "hist"] = "gbt"  # the DCI classifiers (priorlab.metrics.dci); hist: ~6x faster
    train: OptimParams = field(default_factory=lambda: OptimParams(steps=2000, batch_size=100, lr=1e-2))
    movielens: SparseVaeRealParams = field(default_factory=SparseVaeRealParams)  # table 1a, 3a
    single_cell: SparseVaeRealParams = field(default_factory=lambda: SparseVaeRealParams(
        n_items=558, latent_dim=15, hidden=[100, 100, 100], train=OptimParams(steps=500, batch_size=512, lr=1e-2)))

    def check(self, key: str, params: "Params") -> None:
        self.movielens.check(f"{key}.movielens", params)
        self.single_cell.check(f"{key}.single_cell", params)
        if not self.models:
            return
        for i, m in enumerate(self.models):
            _one_of(f"{key}.models[{i}]", m, tuple(params.models))
            _one_of(f"{key}.models[{i}] (its kind)", params.models[m].kind, SPARSE_VAE_STUDY_KINDS)
        if not self.rhos:
            raise ParamsError(f"{key}.rhos must not be empty")
        for i, r in enumerate(self.rhos):
            if not -1.0 < r < 1.0:
                raise ParamsError(f"{key}.rhos[{i}] must be in (-1, 1), got {r}")
        for name in ("datasets_per_rho", "n", "latent_dim", "dci_bins"):
            _positive(f"{key}.{name}", getattr(self, name))
        if self.latent_dim < 2:
            raise ParamsError(f"{key}.latent_dim must be >= 2 (DCI), got {self.latent_dim}")
        _non_negative(f"{key}.noise_std", self.noise_std)
        _one_of(f"{key}.dci_backend", self.dci_backend, ("gbt", "hist"))
        for i, h in enumerate(self.hidden):
            _positive(f"{key}.hidden[{i}]", h)
        self.train.check(f"{key}.train")


@dataclass(frozen=True)
class Params:
    profile: Literal["tiny", "cpu", "paper"]
    device: Literal["cpu", "cuda", "auto"]
    datasets: dict[str, DatasetParams]
    setups: dict[str, SetupParams]
    models: dict[str, ModelParams]
    pretrain: OptimParams
    train: OptimParams
    runs: dict[str, RunParams]
    evaluate: EvaluateParams = field(default_factory=EvaluateParams)
    figures: FigureParams = field(default_factory=FigureParams)
    isa_study: IsaStudyParams = field(default_factory=IsaStudyParams)
    supervised_ceiling: SupervisedCeilingParams = field(default_factory=SupervisedCeilingParams)
    mssc_study: MsscStudyParams = field(default_factory=MsscStudyParams)
    sparse_vae_study: SparseVaeStudyParams = field(default_factory=SparseVaeStudyParams)

    def check(self) -> None:
        for group in ("datasets", "setups", "models"):
            entries = getattr(self, group)
            if not entries:
                raise ParamsError(f"{group} must define at least one entry")
            for name, entry in entries.items():
                entry.check(f"{group}.{name}")
        for name, setup in self.setups.items():
            _one_of(f"setups.{name}.dataset", setup.dataset, tuple(self.datasets))
            _one_of(f"setups.{name}.pretrain_model", setup.pretrain_model, tuple(self.models))
        self.pretrain.check("pretrain")
        self.train.check("train")
        if not self.runs:
            raise ParamsError("runs must define at least one entry")
        for name, run in self.runs.items():
            run.check(f"runs.{name}")
            _one_of(f"runs.{name}.setup", run.setup, tuple(self.setups))
            _one_of(f"runs.{name}.model", run.model, tuple(self.models))
            if not self.setups[run.setup].pretraining and self.models[run.model].warm_start != "scratch":
                raise ParamsError(f"runs.{name}: setup {run.setup!r} has pretraining: false, so model "
                                  f"{run.model!r} needs warm_start: scratch")
        self.evaluate.check("evaluate")
        groups = sorted({run.group for run in self.runs.values()})
        for group in self.evaluate.group_metrics:
            _one_of("evaluate.group_metrics", group, tuple(groups))
        self.figures.check("figures")
        self.isa_study.check("isa_study", self)
        self.supervised_ceiling.check("supervised_ceiling", self)
        self.mssc_study.check("mssc_study", self)
        self.sparse_vae_study.check("sparse_vae_study", self)

    # convenience lookups used by stages
    def setup(self, name: str) -> SetupParams:
        _one_of("setup", name, tuple(self.setups))
        return self.setups[name]

    def model(self, name: str) -> ModelParams:
        _one_of("model", name, tuple(self.models))
        return self.models[name]

    def run(self, name: str) -> RunParams:
        _one_of("run", name, tuple(self.runs))
        return self.runs[name]

    def dataset_of(self, setup: str) -> DatasetParams:
        return self.datasets[self.setup(setup).dataset]


# --------------------------------------------------------------------------- checks


def _positive(key: str, value) -> None:
    if not value > 0:
        raise ParamsError(f"{key} must be > 0, got {value!r}")


def _non_negative(key: str, value) -> None:
    if not value >= 0:
        raise ParamsError(f"{key} must be >= 0, got {value!r}")


def _one_of(key: str, value, allowed) -> None:
    if value not in allowed:
        raise ParamsError(f"{key}: unknown value {value!r}; allowed: {', '.join(map(str, allowed))}")


# --------------------------------------------------------------------------- parsing


def _parse(tp, value, key: str):
    """Convert ``value`` to type ``tp`` or raise :class:`ParamsError` naming ``key``."""
    origin = typing.get_origin(tp)
    if dataclasses.is_dataclass(tp):
        return _parse_dataclass(tp, value, key)
    if origin is Literal:
        allowed = typing.get_args(tp)
        _one_of(key, value, allowed)
        return value
    if origin is dict:
        _, vtp = typing.get_args(tp)
        if not isinstance(value, dict):
            raise ParamsError(f"{key} must be a mapping, got {type(value).__name__}")
        return {str(k): _parse(vtp, v, f"{key}.{k}") for k, v in value.items()}
    if origin is list:
        (etp,) = typing.get_args(tp)
        if not isinstance(value, list):
            raise ParamsError(f"{key} must be a list, got {type(value).__name__}")
        return [_parse(etp, v, f"{key}[{i}]") for i, v in enumerate(value)]
    if tp is bool:
        if not isinstance(value, bool):
            raise ParamsError(f"{key} must be true or false, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ParamsError(f"{key} must be an integer, got {value!r}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ParamsError(f"{key} must be a number, got {value!r}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ParamsError(f"{key} must be a string, got {value!r}")
        return value
    raise TypeError(f"unsupported parameter type {tp!r} at {key}")  # programming error


TAGGED_UNIONS: dict[type, dict[str, type]] = {
    ModelParams: MODEL_PARAMS, DatasetParams: DATASET_PARAMS, PriorParams: PRIOR_PARAMS,
}
"""Tagged unions on ``kind``: a value typed as a base class here is parsed into the class its
registry names for the value's ``kind``."""


def _parse_dataclass(cls, value, key: str):
    prefix = f"{key}." if key else ""
    if not isinstance(value, dict):
        raise ParamsError(f"{key or 'params'} must be a mapping, got {type(value).__name__}")
    if cls in TAGGED_UNIONS:
        kinds, kind = TAGGED_UNIONS[cls], value.get("kind")
        if not isinstance(kind, str) or kind not in kinds:
            raise ParamsError(f"{prefix}kind: unknown value {kind!r}; allowed: {', '.join(kinds)}")
        cls = kinds[kind]
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(value) - set(fields))
    if unknown:
        raise ParamsError(
            f"{prefix}{unknown[0]}: unknown key; allowed: {', '.join(fields)}"
        )
    kwargs: dict[str, Any] = {}
    for name, f in fields.items():
        if name in value:
            kwargs[name] = _parse(hints[name], value[name], f"{prefix}{name}")
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ParamsError(f"{prefix}{name}: missing required key")
    return cls(**kwargs)


def parse_params(raw: dict) -> Params:
    """Validate a raw mapping (as read from YAML) into :class:`Params`."""
    params = _parse_dataclass(Params, raw, "")
    params.check()
    return params


def load_params(path: str | Path = "params.yaml") -> Params:
    """Read and validate ``params.yaml``; raises :class:`ParamsError` on any problem."""
    path = Path(path)
    if not path.is_file():
        raise ParamsError(f"{path}: parameter file not found (run `make profile PROFILE=cpu`)")
    try:
        raw = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ParamsError(f"{path}: not valid YAML ({exc.__class__.__name__})") from exc
    params = parse_params(raw or {})
    _check_dvc_keys(raw)
    return params


def _check_dvc_keys(raw: dict) -> None:
    """Keys ``dvc.yaml`` interpolates from the raw file must be spelled out there (a default is not
    seen by DVC): the pretrain stage tracks ``models.${item.pretrain_model}``, every per-run stage
    writes under ``${item.group}``."""
    for name, setup in raw.get("setups", {}).items():
        if "pretrain_model" not in setup:
            raise ParamsError(f"setups.{name}.pretrain_model: missing; dvc.yaml's pretrain stage needs it spelled out "
                              "(name it even with pretraining: false)")
    for name, run in raw.get("runs", {}).items():
        if "group" not in run:
            raise ParamsError(f"runs.{name}.group: missing; dvc.yaml's per-run stages need it spelled out")


def profile_path(name: str, root: str | Path = ".") -> Path:
    _one_of("profile", name, PROFILES)
    return Path(root) / "profiles" / f"{name}.yaml"


def use_profile(name: str, root: str | Path = ".") -> Path:
    """Validate ``profiles/<name>.yaml`` and copy it to ``params.yaml``."""
    src = profile_path(name, root)
    params = load_params(src)
    if params.profile != name:
        raise ParamsError(f"{src}: profile key is {params.profile!r}, expected {name!r}")
    dst = Path(root) / "params.yaml"
    tmp = dst.with_suffix(".yaml.tmp")
    shutil.copyfile(src, tmp)
    tmp.replace(dst)
    return dst


def main(argv: list[str] | None = None) -> int:
    """``python -m priorlab.config use PROFILE`` | ``check [PATH]``."""
    argv = sys.argv[1:] if argv is None else argv
    try:
        if len(argv) == 2 and argv[0] == "use":
            dst = use_profile(argv[1])
            print(f"params.yaml <- profiles/{argv[1]}.yaml")
            return 0 if dst.exists() else 1
        if argv and argv[0] == "check" and len(argv) <= 2:
            p = load_params(argv[1] if len(argv) == 2 else "params.yaml")
            print(f"ok: profile {p.profile}")
            return 0
    except ParamsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print("usage: python -m priorlab.config use {tiny,cpu,paper} | check [PATH]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
