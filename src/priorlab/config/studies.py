"""Settings of the experiment stages that train their models in-process (papers 000, 003, 004; the
supervised ceiling of paper 001)."""

from __future__ import annotations

import typing
from dataclasses import dataclass, field
from typing import Literal

from priorlab.config.checks import ParamsError, _non_negative, _one_of, _positive
from priorlab.config.models import encoder_input_of
from priorlab.config.training import EvaluateParams, OptimParams


@dataclass(frozen=True)
class MigChenParams:
    """Paper 004's claim metric: Chen et al.'s MIG (:mod:`priorlab.metrics.mig_chen`) on ``n_points``
    ground-truth samples (the paper: the whole data set), each entropy estimated at ``n_samples`` draws
    (Chen et al.: 10,000), and its noise floor: the same estimate with the factors permuted against the
    code, ``permutations`` times (:func:`~priorlab.metrics.mig_chen.permutation_floor`)."""

    n_points: int = 10000
    n_samples: int = 10000
    permutations: int = 1
    seed: int = 0

    def check(self, key: str) -> None:
        _positive(f"{key}.n_points", self.n_points)
        _positive(f"{key}.n_samples", self.n_samples)
        _positive(f"{key}.permutations", self.permutations)
        _non_negative(f"{key}.seed", self.seed)


@dataclass(frozen=True)
class IsaStudyParams:
    """Paper 004's dSprites study (an ``isa_fit`` cell per model and seed, aggregated by ``isa_experiments``):
    every ``models`` entry over the β grid (``beta`` of kind vae, ``tc_weight`` of kind beta_tcvae: the
    paper's β weights the TC term of (ISA-)β-TCVAE) or, for kind factor_vae, the γ grid, × seeds (a grid
    no entry reads is empty);
    from scratch on ``setup`` with ``train``; metrics with ``evaluate``.  ``setup: ""`` = off.  The
    setup must be on the ``dsprites`` data set: the cells' DVC dependencies are ``data/dsprites`` and
    ``datasets.dsprites``, so that other setups and data sets never rerun them."""

    setup: str = ""
    models: list[str] = field(default_factory=list)
    betas: list[float] = field(default_factory=lambda: [1.0, 2.0, 4.0])
    gammas: list[float] = field(default_factory=lambda: [1.0, 5.0, 10.0])
    seeds: list[int] = field(default_factory=lambda: [0, 1])
    train: OptimParams = field(default_factory=lambda: OptimParams(steps=1000, batch_size=64, lr=1e-3))
    evaluate: EvaluateParams = field(default_factory=EvaluateParams)
    mig_chen: MigChenParams = field(default_factory=MigChenParams)

    GRID: typing.ClassVar[dict[str, str]] = {"vae": "beta", "beta_tcvae": "tc_weight", "factor_vae": "gamma"}

    def check(self, key: str, params: "Params") -> None:
        if not self.setup:
            return
        _one_of(f"{key}.setup", self.setup, tuple(params.setups))
        if params.setups[self.setup].dataset != "dsprites":
            raise ParamsError(f"{key}.setup: {self.setup} is on data set {params.setups[self.setup].dataset!r}; the "
                              "isa_fit stages depend on data/dsprites (dvc.yaml), so it must be on 'dsprites'")
        if not self.models:
            raise ParamsError(f"{key}.models must name at least one models entry")
        for i, m in enumerate(self.models):
            _one_of(f"{key}.models[{i}]", m, tuple(params.models))
            _one_of(f"{key}.models[{i}] (its kind)", params.models[m].kind, tuple(self.GRID))
        grid_of = {kind: "gammas" if field == "gamma" else "betas" for kind, field in self.GRID.items()}
        read = {grid_of[params.models[m].kind] for m in self.models}
        for name in ("betas", "gammas", "seeds"):
            values = getattr(self, name)
            if name != "seeds" and name not in read:  # a grid no cell trains: empty, so the settings table shows what runs
                if values:
                    raise ParamsError(f"{key}.{name} is read by no models entry of {key}.models "
                                      f"(kinds {', '.join(k for k, g in grid_of.items() if g == name)}): set it to []")
                continue
            if not values:
                raise ParamsError(f"{key}.{name} must not be empty")
            for i, v in enumerate(values):
                _non_negative(f"{key}.{name}[{i}]", v)
        self.train.check(f"{key}.train")
        self.evaluate.check(f"{key}.evaluate")
        self.mig_chen.check(f"{key}.mig_chen")


@dataclass(frozen=True)
class SupervisedCeilingParams:
    """The supervised ceiling of a semi-supervised factor (issue 10, paper 001 sec. 4.2), the
    ``supervised_ceiling`` stage: per ``targets`` entry (setup -> its data factor, ``label`` = class
    labels) the setup's encoder with a linear softmax head on all training labels but ``n_val``
    held out (Adam, ``lr``, ``batch_size``); their accuracy every ``eval_every`` steps; stops at the
    plateau (after ``min_steps``, no gain over the last ``plateau_fraction`` of the evaluations) or at
    ``max_steps`` (not plateaued).  ``replicates`` classifiers per target at its native resolution,
    replicate k seeded ``seed + k`` (validation split, initialisation, batches): the ceiling's own seed
    spread enters the relative claim's interval.  dSprites setups are also measured at the procedural
    ``resolutions`` (one classifier each: informative, no claim reads them)."""

    targets: dict[str, str] = field(default_factory=dict)
    resolutions: list[int] = field(default_factory=list)
    batch_size: int = 64
    lr: float = 1e-3
    eval_every: int = 200
    min_steps: int = 3000
    plateau_fraction: float = 0.2
    max_steps: int = 6000
    n_val: int = 1000
    seed: int = 0
    replicates: int = 1

    def check(self, key: str, params: "Params") -> None:
        for setup in self.targets:
            _one_of(f"{key}.targets", setup, tuple(params.setups))
        for i, r in enumerate(self.resolutions):
            _positive(f"{key}.resolutions[{i}]", r)
        for name in ("batch_size", "lr", "eval_every", "min_steps", "plateau_fraction", "max_steps", "n_val",
                     "replicates"):
            _positive(f"{key}.{name}", getattr(self, name))
        if self.plateau_fraction >= 1:
            raise ParamsError(f"{key}.plateau_fraction must be < 1, got {self.plateau_fraction}")
        if self.min_steps > self.max_steps:
            raise ParamsError(f"{key}.min_steps {self.min_steps} exceeds max_steps {self.max_steps}")
        _non_negative(f"{key}.seed", self.seed)


@dataclass(frozen=True)
class MsscAblationParams:
    """One diagnosis arm of paper 000's study (issue 43; an ``mssc_ablation`` stage): ``model`` on the bars
    entry ``bars`` for ``iterations`` full-batch EM iterations at every seed of ``seeds`` (empty: the
    study's), each started at random (``start: random``, as the study's cells; the model seeded with the
    data seed + ``model_seed_offset``: a non-zero offset restarts EM on the same data) or at the data's
    generating parameters (``start: truth``: the true bars, noise, prior).  ``varies`` names the study cell
    it is read against, ``[model, bars]``: paired by seed where both use the same data (the same ``bars``)."""

    model: str
    bars: str
    varies: list[str]
    seeds: list[int] = field(default_factory=list)
    iterations: int = 40
    start: Literal["random", "truth"] = "random"
    model_seed_offset: int = 0

    def check(self, key: str, params: "Params") -> None:
        _one_of(f"{key}.model", self.model, tuple(params.models))
        _non_negative(f"{key}.model_seed_offset", self.model_seed_offset)
        _one_of(f"{key}.model (its kind)", params.models[self.model].kind, ("mssc", "linear_ssc"))
        _one_of(f"{key}.bars", self.bars, tuple(params.datasets))
        _one_of(f"{key}.bars (its kind)", params.datasets[self.bars].kind, ("bars",))
        study = params.mssc_study
        if len(self.varies) != 2 or self.varies[0] not in study.models or self.varies[1] not in study.bars:
            raise ParamsError(f"{key}.varies must name a study cell [model, bars] of mssc_study.models x "
                              f"mssc_study.bars, got {self.varies}")
        for i, v in enumerate(self.seeds):
            _non_negative(f"{key}.seeds[{i}]", v)
        _positive(f"{key}.iterations", self.iterations)


@dataclass(frozen=True)
class MsscStudyParams:
    """Paper 000's study (an ``mssc_fit`` stage per model and bars entry, an ``mssc_patches`` stage per
    model, aggregated by ``mssc_experiments``): every ``models``
    entry (kinds mssc / linear_ssc, H = 2R) on every ``bars`` data set entry (each ``seeds`` value
    shifts the entry's data seed and the model seed) for ``iterations`` full-batch EM iterations,
    recovery at correlation ``threshold``; dictionaries of the ``models`` on the ``patches`` entry
    with ``patch_latents`` latents for ``patch_iterations``; the diagnosis arms ``ablations``
    (:class:`MsscAblationParams`).  ``bars: []`` = off."""

    bars: list[str] = field(default_factory=list)
    models: list[str] = field(default_factory=list)
    seeds: list[int] = field(default_factory=lambda: list(range(20)))
    iterations: int = 40
    threshold: float = 0.9
    patches: str = ""
    patch_latents: int = 32
    patch_iterations: int = 40
    ablations: dict[str, MsscAblationParams] = field(default_factory=dict)

    def check(self, key: str, params: "Params") -> None:
        if not self.bars:
            if self.ablations:
                raise ParamsError(f"{key}.ablations need the study: {key}.bars is empty")
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
        for name in ("iterations", "patch_latents", "patch_iterations"):
            _positive(f"{key}.{name}", getattr(self, name))
        if not 0.0 < self.threshold <= 1.0:
            raise ParamsError(f"{key}.threshold must be in (0, 1], got {self.threshold}")
        if self.patches:
            _one_of(f"{key}.patches", self.patches, tuple(params.datasets))
            _one_of(f"{key}.patches (its kind)", params.datasets[self.patches].kind, ("image_patches",))
        for name, ablation in self.ablations.items():
            ablation.check(f"{key}.ablations.{name}", params)

    def ablation_seeds(self, name: str) -> list[int]:
        """The seeds of ablation ``name``: its own, or the study's."""
        return self.ablations[name].seeds or self.seeds


SPARSE_VAE_STUDY_KINDS = ("vae", "sparse_vae", "vsc")  # model kinds paper 003's studies train


def check_study_models(key: str, names: list[str], params: "Params") -> None:
    """Every name a ``models`` entry of a paper-003 kind, all with the same ``encoder_input`` (every
    model of a comparison sees the same input)."""
    for i, m in enumerate(names):
        _one_of(f"{key}[{i}]", m, tuple(params.models))
        _one_of(f"{key}[{i}] (its kind)", params.models[m].kind, SPARSE_VAE_STUDY_KINDS)
    inputs = {m: encoder_input_of(params.models[m]) for m in names}
    if len(set(inputs.values())) > 1:
        raise ParamsError(f"{key}: every model of a comparison must see the same encoder input, got "
                          + ", ".join(f"{m}: {v}" for m, v in inputs.items()))


def check_beta_grid(key: str, grid: dict[str, list[float]], validation_fraction: float, models: list[str],
                    params: "Params") -> None:
    """A study's ``beta_grid`` (models entry → its β values, each a kind vae entry of ``models``) and the
    share of the training rows its selection holds out."""
    for name, betas in grid.items():
        if name not in models:
            raise ParamsError(f"{key}.beta_grid: {name!r} is not in {key}.models {models}")
        if params.models[name].kind != "vae":
            raise ParamsError(f"{key}.beta_grid.{name}: a β grid is for kind vae, not {params.models[name].kind}")
        if not betas:
            raise ParamsError(f"{key}.beta_grid.{name} must not be empty (leave the model out of beta_grid)")
        for i, b in enumerate(betas):
            _positive(f"{key}.beta_grid.{name}[{i}]", b)
    if grid and not 0.0 < validation_fraction < 1.0:
        raise ParamsError(f"{key}.validation_fraction must be in (0, 1), got {validation_fraction}")


@dataclass(frozen=True)
class SparseVaeRealParams:
    """A real-data study of paper 003 (``sparse_vae_study.movielens`` / ``.single_cell``): every
    ``models`` entry (kinds vae / sparse_vae / vsc) with ``latent_dim`` latents and MLP ``hidden``
    widths trained with ``train`` on each of ``splits`` disjoint held-out folds (split s = fold s of
    round(1 / ``test_fraction``), models seeded with s), plus scikit-learn NMF (``nmf_alpha`` = C.3's alpha on
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
    hidden: list[int] = field(default_factory=lambda: [300, 300])
    nmf_alpha: float = 1.0
    min_user_positives: int = 20
    foldin_fraction: float = 0.8
    recall_k: int = 5
    ndcg_k: int = 10
    preprocess: Literal["quantile", "counts"] = "quantile"
    train: OptimParams = field(default_factory=lambda: OptimParams(steps=5000, batch_size=100, lr=1e-4))
    # table 1: "for the β-VAE, we show the result with best performing β" (table 6's grid 2, 4, 6, 8, 16):
    # models entry -> its β grid, each member fitted on the training rows less a seeded
    # validation_fraction of them, the β of the lowest validation NLL refitted on all training rows
    beta_grid: dict[str, list[float]] = field(default_factory=dict)
    validation_fraction: float = 0.2

    def check(self, key: str, params: "Params") -> None:
        if not self.models:
            return
        check_study_models(f"{key}.models", self.models, params)
        check_beta_grid(key, self.beta_grid, self.validation_fraction, self.models, params)
        for name in ("splits", "n_items", "latent_dim", "recall_k", "ndcg_k"):
            _positive(f"{key}.{name}", getattr(self, name))
        for name in ("nmf_alpha", "min_user_positives"):
            _non_negative(f"{key}.{name}", getattr(self, name))
        for name in ("test_fraction", "foldin_fraction"):
            if not 0.0 < getattr(self, name) < 1.0:
                raise ParamsError(f"{key}.{name} must be in (0, 1), got {getattr(self, name)}")
        if max(self.recall_k, self.ndcg_k) > self.n_items:
            raise ParamsError(f"{key}.recall_k and ndcg_k must be <= n_items ({self.n_items})")
        if self.splits > round(1 / self.test_fraction):
            raise ParamsError(f"{key}.splits {self.splits}: the held-out folds are disjoint, so at most "
                              f"round(1 / test_fraction) = {round(1 / self.test_fraction)} of them")
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
    ``latent_dim`` components; ``variant_models`` (shown beside the claims, not deciding them: the
    released code's loss scaling, VSC) on the first ``variant_datasets_per_rho`` data sets. DCI by
    ``dci_mode``: ``regression`` on the continuous true z (the released code's), or ``classification``
    of z binned into ``dci_bins`` quantile bins (``dci_backend``). ``beta_grid``: a kind vae entry of
    ``models`` fitted at its best β per data set (fig. 3's β-VAE, table 6's grid): every member on the
    training half less a seeded ``validation_fraction`` of it, the β of the lowest validation MSE then
    refitted on the whole training half. ``models: []`` = off."""

    models: list[str] = field(default_factory=list)
    variant_models: list[str] = field(default_factory=list)
    rhos: list[float] = field(default_factory=lambda: [0.0, 0.2, 0.4, 0.6, 0.8])
    datasets_per_rho: int = 25
    variant_datasets_per_rho: int = 25
    n: int = 1000
    noise_std: float = 0.5
    latent_dim: int = 5
    hidden: list[int] = field(default_factory=lambda: [50, 50])
    dci_mode: Literal["regression", "classification"] = "regression"
    dci_bins: int = 10
    dci_backend: Literal["gbt", "hist"] = "gbt"  # the DCI classifiers (priorlab.metrics.dci); hist: ~6x faster
    train: OptimParams = field(default_factory=lambda: OptimParams(steps=2000, batch_size=100, lr=1e-2))
    beta_grid: dict[str, list[float]] = field(default_factory=dict)
    validation_fraction: float = 0.2
    movielens: SparseVaeRealParams = field(default_factory=SparseVaeRealParams)  # table 1a, 3a
    # issue 43: diagnosis arms of the MovieLens claims, each a MovieLens study on the same folds with one
    # setting changed (a sparse_vae_ablation stage each; shown in the diagnosis, never deciding a claim)
    movielens_ablations: dict[str, SparseVaeRealParams] = field(default_factory=dict)
    single_cell: SparseVaeRealParams = field(default_factory=lambda: SparseVaeRealParams(
        n_items=558, latent_dim=15, hidden=[100, 100], train=OptimParams(steps=500, batch_size=512, lr=1e-2)))

    def check(self, key: str, params: "Params") -> None:
        self.movielens.check(f"{key}.movielens", params)
        self.single_cell.check(f"{key}.single_cell", params)
        for name, arm in self.movielens_ablations.items():
            if not self.movielens.models:
                raise ParamsError(f"{key}.movielens_ablations need the MovieLens study: {key}.movielens.models is empty")
            if not arm.models:
                raise ParamsError(f"{key}.movielens_ablations.{name}.models must name at least one models entry")
            if (arm.splits, arm.test_fraction, arm.n_items, arm.min_user_positives) != (
                    self.movielens.splits, self.movielens.test_fraction, self.movielens.n_items,
                    self.movielens.min_user_positives):
                raise ParamsError(f"{key}.movielens_ablations.{name}: an arm is read against the study's folds, so its "
                                  "splits, test_fraction, n_items and min_user_positives must be the study's")
            arm.check(f"{key}.movielens_ablations.{name}", params)
        if self.single_cell.beta_grid:
            raise ParamsError(f"{key}.single_cell.beta_grid: β is selected on held-out NLL in the MovieLens "
                              "study only (table 1); table 4 shows β = 2")
        if not self.models:
            return
        check_study_models(f"{key}.models", self.models + self.variant_models, params)
        check_beta_grid(key, self.beta_grid, self.validation_fraction, self.models, params)
        _non_negative(f"{key}.variant_datasets_per_rho", self.variant_datasets_per_rho)
        _one_of(f"{key}.dci_mode", self.dci_mode, ("regression", "classification"))
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
class BenchmarkPriorParams:
    """One row of the cross-prior benchmark (issue 45): a ``models`` entry, trained from scratch
    (``warm_start`` is set to scratch: no prior gets steps the others do not), with ``strength`` setting
    its grid's field where given (β of kind vae, the TC weight of beta_tcvae, γ of factor_vae;
    :data:`IsaStudyParams.GRID`).  ``label``: the row's name in the tables (default: the entry's name).
    ``setup_models``: another ``models`` entry of the same kind and prior kind for a setup (or ``synthetic``,
    paper 003's table) whose latent size the default's layout does not fit, e.g. the ISA-VAE's subspaces
    tiling 18 latents instead of 10."""

    model: str
    strength: float | None = None
    label: str = ""
    setup_models: dict[str, str] = field(default_factory=dict)

    SYNTHETIC: typing.ClassVar[str] = "synthetic"
    """The ``setup_models`` key of paper 003's synthetic table."""

    def model_for(self, setup: str) -> str:
        """The ``models`` entry this row trains on ``setup`` (a setup's name or :data:`SYNTHETIC`)."""
        return self.setup_models.get(setup, self.model)

    def check(self, key: str, params: "Params") -> None:
        _one_of(f"{key}.model", self.model, tuple(params.models))
        spec = params.models[self.model]
        if spec.fitted_by_em:
            raise ParamsError(f"{key}.model: {self.model} (kind {spec.kind}) is fitted by EM, not by the shared "
                              "trainer; the sparse coding models have a table of their own (mssc_study)")
        if self.strength is not None:
            _one_of(f"{key}.strength (the kind of {self.model})", spec.kind, tuple(IsaStudyParams.GRID))
            _non_negative(f"{key}.strength", self.strength)
        for setup, model in self.setup_models.items():
            _one_of(f"{key}.setup_models", setup, (*params.benchmark.setups, self.SYNTHETIC))
            _one_of(f"{key}.setup_models.{setup}", model, tuple(params.models))
            other = params.models[model]
            if (other.kind, other.prior.kind) != (spec.kind, spec.prior.kind):
                raise ParamsError(f"{key}.setup_models.{setup}: {model} is kind {other.kind} with prior "
                                  f"{other.prior.kind}, the row's {self.model} is {spec.kind} with {spec.prior.kind}: "
                                  "one row, one prior")


@dataclass(frozen=True)
class BenchmarkSyntheticParams:
    """The cross-prior benchmark's table on paper 003's synthetic data (true factors and a true support):
    every ``benchmark.priors`` entry on the first ``datasets_per_rho`` data sets of each ρ of ``rhos``,
    drawn and trained as ``sparse_vae_study`` draws and trains its own (its ``n``, ``noise_std``,
    ``latent_dim``, ``hidden``, ``train``; data set ``i`` from seed ``i``), so a prior that study already
    fits is read from its ``sparse_vae_fit`` cell.  ``rhos: []`` = off."""

    rhos: list[float] = field(default_factory=list)
    datasets_per_rho: int = 10

    def check(self, key: str) -> None:
        if len(set(self.rhos)) != len(self.rhos):
            raise ParamsError(f"{key}.rhos names a correlation twice")
        for i, rho in enumerate(self.rhos):
            if not -1.0 < float(rho) < 1.0:
                raise ParamsError(f"{key}.rhos[{i}] must be in (-1, 1), got {rho}")
        if self.rhos and self.datasets_per_rho < 2:
            raise ParamsError(f"{key}.datasets_per_rho: {self.datasets_per_rho}; at least 2 (an interval needs them)")


@dataclass(frozen=True)
class BenchmarkParams:
    """The cross-prior benchmark (issue 45; a ``benchmark_fit`` stage per ``priors`` entry, aggregated by
    the ``benchmark`` stage): every prior on every setup of ``setups`` (its data set, nets and latent
    size; a table each), from scratch at every seed of ``seeds`` with the same ``train`` settings, scored
    with ``evaluate``.  A (prior, setup, seed) that paper 004's study already trains the same way
    (``isa_study``: the same setup, model settings, ``train`` and seed) is read from its ``isa_fit`` cell,
    not retrained.  ``priors: {}`` = off.  ``sparsity_threshold``: a code coordinate with
    ``|E_q[z_d | x]|`` at most this counts as zero in the per-observation sparsity.  ``synthetic``: the
    table on paper 003's synthetic data (:class:`BenchmarkSyntheticParams`; a ``benchmark_synthetic``
    stage per prior).  ``max_train_s``: the most seconds a ``benchmark_fit`` cell may train, all its seeds
    together, priced from the measured step (``reports/benchmark_speed/<profile>.json``, ``make
    benchmark-speed``); a cell above it is not run and its row says what it would cost (None: every cell
    runs; :func:`priorlab.studies.benchmark.speed.cap_reason`)."""

    setups: list[str] = field(default_factory=list)
    priors: dict[str, BenchmarkPriorParams] = field(default_factory=dict)
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2])
    train: OptimParams = field(default_factory=lambda: OptimParams(steps=1000, batch_size=64, lr=1e-3))
    evaluate: EvaluateParams = field(default_factory=EvaluateParams)
    sparsity_threshold: float = 0.1
    synthetic: BenchmarkSyntheticParams = field(default_factory=BenchmarkSyntheticParams)
    max_train_s: float | None = None

    def check(self, key: str, params: "Params") -> None:
        if not self.priors:
            return
        if self.max_train_s is not None and not self.max_train_s > 0:
            raise ParamsError(f"{key}.max_train_s: {self.max_train_s} is not positive; a number of seconds, or null")
        self.synthetic.check(f"{key}.synthetic")
        if not self.setups:
            raise ParamsError(f"{key}.setups must name at least one setups entry when {key}.priors is set")
        for i, s in enumerate(self.setups):
            _one_of(f"{key}.setups[{i}]", s, tuple(params.setups))
            n = params.datasets[params.setups[s].dataset].n_train
            if self.train.batch_size > n:
                raise ParamsError(f"{key}.train.batch_size: {self.train.batch_size} is more than the {n} training "
                                  f"points of setup {s!r}'s data set; at most {n}")
        if len(set(self.setups)) != len(self.setups):
            raise ParamsError(f"{key}.setups names a setup twice")
        for name, prior in self.priors.items():
            prior.check(f"{key}.priors.{name}", params)
        if len(self.seeds) < 2:
            raise ParamsError(f"{key}.seeds: at least 2 seeds (an interval needs them; the issue asks for 3)")
        if len(set(self.seeds)) != len(self.seeds):
            raise ParamsError(f"{key}.seeds names a seed twice")
        for i, s in enumerate(self.seeds):
            _non_negative(f"{key}.seeds[{i}]", s)
        self.train.check(f"{key}.train")
        self.evaluate.check(f"{key}.evaluate")
        _non_negative(f"{key}.sparsity_threshold", self.sparsity_threshold)

    def label(self, prior: str) -> str:
        return self.priors[prior].label or prior
