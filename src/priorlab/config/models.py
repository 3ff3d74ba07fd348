"""``models:`` entries and their priors: tagged unions on ``kind`` (``MODEL_PARAMS``, ``PRIOR_PARAMS``)."""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field
from typing import Literal

from priorlab.config.checks import ParamsError, _non_negative, _one_of, _positive
from priorlab.config.lp_nested_layout import LpNestedLayout


@dataclass(frozen=True)
class PriorParams:
    """The prior p(z) of the ``vae`` and ``beta_tcvae`` kinds: a tagged union on ``kind``.

    Prior kinds with settings subclass this and register their name in ``PRIOR_PARAMS``, the one registry
    of priors; each class names its builder in ``BUILDER`` (a function of :mod:`priorlab.priors`).  ``lr`` > 0
    trains the prior's parameters in their own optimiser group at that learning rate (0: the phase's lr).
    """
    BUILDER: typing.ClassVar[str] = "priorlab.priors:build_standard_normal"

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
    BUILDER: typing.ClassVar[str] = "priorlab.priors:build_lp_nested"

    kind: str = "lp_nested"
    p0: float = 2.1
    subspaces: list[list[float]] = field(default_factory=lambda: [[2.2, 5]] * 5)
    learn_exponents: bool = True
    # s of exp(-f(z)^p0 / s): the paper does not give it; s = 2 makes the prior N(0, I) (the baselines'
    # prior) when every exponent is 2, so the near-Gaussian start p = 2.1 / 2.2 is close to it
    scale: float = 2.0

    def check(self, key: str) -> None:
        super().check(key)
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
class PhaseOverrides:
    """A model's own optimiser settings for one training phase, over those of the phase's section
    (``pretrain:`` / ``train:``); unset (null) keeps the section's.  Paper 002 trains each model with its
    own batch size and a step decay of the learning rate (App. D.1, D.2)."""

    batch_size: int | None = None
    lr: float | None = None
    lr_milestones: list[int] | None = None  # the phase's steps at which lr is multiplied by lr_gamma
    lr_gamma: float | None = None

    def check(self, key: str) -> None:
        for name in ("batch_size", "lr", "lr_gamma"):
            if getattr(self, name) is not None:
                _positive(f"{key}.{name}", getattr(self, name))
        for i, m in enumerate(self.lr_milestones or []):
            _positive(f"{key}.lr_milestones[{i}]", m)

    def over(self, opt):
        """``opt`` (an ``OptimParams``) with the settings this sets."""
        return dataclasses.replace(opt, **{k: v for k, v in dataclasses.asdict(self).items() if v is not None})

    def describe(self) -> str:
        return ", ".join(f"{k} {v}" for k, v in dataclasses.asdict(self).items() if v is not None)


@dataclass(frozen=True)
class ModelParams:
    """A model: prior + encoder family + objective weights.

    Model kinds with their own settings subclass this and register their name in ``MODEL_PARAMS``, the
    one registry of models; each class names its builder in ``BUILDER`` (``"module:function"`` of
    :mod:`priorlab.models`, ``(setup, model, obs_shape) -> Model``, imported when first built); a ``models:``
    entry is parsed into the class of its ``kind``.  ``prior``
    is used by the kinds whose prior is configurable (``vae``, ``beta_tcvae``); kinds with their
    own prior (``own_prior``) reject a non-default one.
    """

    kind: str
    beta: float = 1.0  # weight of the KL term (β-VAE; 1 = the ELBO; 0 = an autoencoder with noise)
    warm_start: Literal["pretrain", "scratch"] = "pretrain"
    train_steps: int = 0  # joint-training steps of this model (0: train.steps)
    pretrain_steps: int = 0  # pretraining steps when a setup's pretrain_model is this entry (0: pretrain.steps)
    prior: PriorParams = field(default_factory=PriorParams)
    # this model's own batch size / learning rate / lr decay in joint training, and in pretraining when
    # a setup's pretrain_model is this entry (None: the train: / pretrain: section's)
    train_phase: PhaseOverrides | None = None
    pretrain_phase: PhaseOverrides | None = None

    OPTIONAL: typing.ClassVar[tuple[str, ...]] = ("train_phase", "pretrain_phase")
    """Fields left out of the record (and of fingerprints) while unset, so that the records of models
    without them are those written before they existed."""

    own_prior: typing.ClassVar[bool] = False
    fitted_by_em: typing.ClassVar[bool] = False  # no pretraining, no optimiser: warm_start must be scratch
    step_cost: typing.ClassVar[float] = 1.0
    """The cost of one training step of the kind relative to a VAE's on the same nets (only the balance of
    the machines a pipeline is spread over depends on it): from the H200 timings of the paper nets in
    issue 15 (VAE MLP 3.4 ms, beta-TCVAE 5.7, VSC 6-8.5, fmvae 17-27)."""

    def check(self, key: str) -> None:
        _one_of(f"{key}.kind", self.kind, tuple(MODEL_PARAMS))
        if self.fitted_by_em and self.warm_start != "scratch":
            raise ParamsError(f"{key}.warm_start must be scratch for kind {self.kind} (it is fitted by EM from scratch)")
        _non_negative(f"{key}.beta", self.beta)
        _non_negative(f"{key}.train_steps", self.train_steps)
        _non_negative(f"{key}.pretrain_steps", self.pretrain_steps)
        self.prior.check(f"{key}.prior")
        for name in self.OPTIONAL:
            if getattr(self, name) is not None:
                getattr(self, name).check(f"{key}.{name}")
        if self.own_prior and self.prior != PriorParams():
            raise ParamsError(f"{key}.prior: kind {self.kind} has its own prior; remove the prior key")

    def record(self) -> dict:
        """The settings as recorded with the results (``prior`` only for kinds whose prior it sets)."""
        out = self.fields()
        if self.own_prior:
            del out["prior"]
        return out

    def __str__(self) -> str:
        """The dataclass repr less the unset :attr:`OPTIONAL` fields: what reports print (``f"{spec}"``) stays
        as it was written before those fields existed."""
        shown = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in dataclasses.fields(self)
                          if f.repr and not (f.name in self.OPTIONAL and getattr(self, f.name) is None))
        return f"{type(self).__qualname__}({shown})"

    def fields(self) -> dict:
        """``dataclasses.asdict``, less the :attr:`OPTIONAL` fields that are unset."""
        return {k: v for k, v in dataclasses.asdict(self).items() if not (k in self.OPTIONAL and v is None)}

    def phase(self, name: str, opt):
        """The ``pretrain`` or ``train`` phase ``opt`` (an ``OptimParams``) as this model runs it: its
        own length (``pretrain_steps`` / ``train_steps``) and settings (``pretrain_phase`` / ``train_phase``)."""
        steps = {"pretrain": self.pretrain_steps, "train": self.train_steps}[name]
        if steps:
            opt = dataclasses.replace(opt, steps=steps)
        overrides = getattr(self, f"{name}_phase")
        return overrides.over(opt) if overrides is not None else opt


ENCODER_INPUTS = ("raw", "row_normalised")
LOSS_SCALINGS = ("paper", "released_code")


@dataclass(frozen=True)
class VAEParams(ModelParams):
    """The ``vae`` kind (VAE; β-VAE with ``beta`` ≠ 1).

    ``encoder_input``: ``raw``, or ``row_normalised`` — the encoder sees x / Σ_j x_j, the likelihood
    scores x (counts: paper 003's released code feeds every model of a comparison these rows; the
    paper does not say). ``loss_scaling``: ``paper`` — the negative ELBO per observation, β·KL;
    ``released_code`` — paper 003's authors' scaling (``model/models.py``): a Gaussian reconstruction as an MSE mean
    over the features, the KL as a mean over the batch and the K latents, σ_j of a ``gaussian_ig``
    likelihood by the code's per-batch objective (see :class:`priorlab.models.elbo.LossScaling`)."""
    BUILDER: typing.ClassVar[str] = "priorlab.models:build_vae"

    encoder_input: Literal["raw", "row_normalised"] = "raw"
    loss_scaling: Literal["paper", "released_code"] = "paper"

    def check(self, key: str) -> None:
        super().check(key)
        _one_of(f"{key}.encoder_input", self.encoder_input, ENCODER_INPUTS)
        _one_of(f"{key}.loss_scaling", self.loss_scaling, LOSS_SCALINGS)


def encoder_input_of(spec: ModelParams) -> str:
    """What the encoder of a ``models:`` entry sees: its ``encoder_input`` (kinds vae, sparse_vae,
    vsc), ``raw`` for every other kind."""
    return spec.encoder_input if isinstance(spec, (VAEParams, VSCParams)) else "raw"


def loss_scaling_of(spec: ModelParams) -> str:
    """An entry's ``loss_scaling`` (kinds vae, sparse_vae), ``paper`` for every other kind."""
    return spec.loss_scaling if isinstance(spec, VAEParams) else "paper"


MODEL_PARAMS: dict[str, type[ModelParams]] = {"vae": VAEParams}
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
    BUILDER: typing.ClassVar[str] = "priorlab.models:build_vsc"

    step_cost: typing.ClassVar[float] = 2.1  # issue 15's timings (ModelParams.step_cost)

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
    encoder_input: Literal["raw", "row_normalised"] = "raw"  # as the vae kind's (paper 003's comparisons)

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
        _one_of(f"{key}.encoder_input", self.encoder_input, ENCODER_INPUTS)


@dataclass(frozen=True)
class BetaTCVAEParams(ModelParams):
    """β-TCVAE (Chen et al. 2018): weights of index-code MI, total correlation, dimension-wise KL."""
    BUILDER: typing.ClassVar[str] = "priorlab.models:build_beta_tcvae"

    step_cost: typing.ClassVar[float] = 1.7  # issue 15's timings (ModelParams.step_cost)

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
    BUILDER: typing.ClassVar[str] = "priorlab.models.fmvae:build_fmvae"

    step_cost: typing.ClassVar[float] = 6.5  # issue 15's timings (ModelParams.step_cost)

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
    BUILDER: typing.ClassVar[str] = "priorlab.models:build_ppca"

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
    BUILDER: typing.ClassVar[str] = "priorlab.models:build_factor_vae"

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
    BUILDER: typing.ClassVar[str] = "priorlab.models:build_sparse_coding"

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
class SparseVAEParams(VAEParams):
    """The sparse VAE (paper 003): masked decoder (eq. 1) with the Spike-and-Slab-Lasso prior on W
    (eq. 2–4, Algorithm 1; a = 1, b = G). ``density_constants``: p* with the Laplace normalisers of
    eq. 57 (false: the released code's form). ``encoder_input``, ``loss_scaling``: as the ``vae``
    kind (``released_code`` also divides the SSL penalty by the batch size instead of N).
    ``prior_cov``: [] = Σ_z = I (B.1), else a K × K matrix (KL of B.2, eq. 59)."""
    BUILDER: typing.ClassVar[str] = "priorlab.models:build_sparse_vae"

    own_prior: typing.ClassVar[bool] = True
    lambda0: float = 10.0
    lambda1: float = 1.0
    density_constants: bool = False
    prior_cov: list[list[float]] = field(default_factory=list)

    def check(self, key: str) -> None:
        super().check(key)
        _positive(f"{key}.lambda1", self.lambda1)
        if not self.lambda0 > self.lambda1:
            raise ParamsError(f"{key}.lambda0 must exceed lambda1 (spike ≫ slab), got {self.lambda0} <= {self.lambda1}")
        if self.prior_cov:
            k = len(self.prior_cov)
            if any(len(row) != k for row in self.prior_cov):
                raise ParamsError(f"{key}.prior_cov must be a square K x K matrix")
            import numpy as np

            cov = np.asarray(self.prior_cov, dtype=float)
            if not np.allclose(cov, cov.T) or np.linalg.eigvalsh(cov).min() <= 0:
                raise ParamsError(f"{key}.prior_cov must be symmetric positive definite")


MODEL_PARAMS["sparse_vae"] = SparseVAEParams
