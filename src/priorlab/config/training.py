"""Setups, training phases, runs, evaluation and figure settings."""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field
from typing import Literal

from priorlab.config.checks import ParamsError, _non_negative, _one_of, _positive
from priorlab.metric_registry import DEFAULT_METRICS, METRICS
from priorlab.paths import DIAGNOSIS, is_diagnosis


@dataclass(frozen=True)
class SetupParams:
    """A data set with its networks and latent size: one pretraining is shared per setup."""

    dataset: str
    latent_dim: int
    # mlp; conv (4x4 stride-2 layers, 32 / 64 px); conv3 (3x3 layers, strides 1 and 2 alternating: paper 001)
    encoder: Literal["mlp", "conv", "conv3"] = "mlp"
    decoder: Literal["mlp", "conv", "conv3"] = "mlp"  # conv3: the mirror of the conv3 encoder
    hidden: list[int] = field(default_factory=lambda: [256, 256])  # the MLP encoder's layers (conv: its dense layer)
    channels: list[int] = field(default_factory=lambda: [32, 32, 64, 64])
    # the MLP decoder's layers: None = ``hidden`` reversed (a mirrored net); its activation between them
    # (paper 004 A.4: three tanh layers of 1200 after Chen et al.'s ReLU encoder)
    decoder_hidden: list[int] | None = None
    decoder_activation: Literal["relu", "tanh"] = "relu"
    # the conv3 encoder's channels, one per layer (the conv3 decoder: in reverse): None = paper 001's
    # (32, 32, 32, 64, 64, 64, 64, 64)
    encoder_channels: list[int] | None = None
    # the conv3 decoder's channels, listed as the encoder layers it undoes (first = nearest the image): None =
    # the encoder's (a mirror); paper 001 App. E.1 states the total size only (issue 43)
    decoder_channels: list[int] | None = None
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
    # an independent pretraining replicate (issue 26): added to the pretraining phase's seed (the nets'
    # initialisation and batch order). Setups that differ only in ``seed`` pretrain the same nets on the
    # same data from independent draws, so runs on them replicate a model's whole chain
    seed: int = 0

    @property
    def step_cost(self) -> float:
        """A training step on these nets relative to one on MLPs: conv nets 1.8 (issue 15: a VAE step
        5.9-6.4 ms on conv nets vs 3.4 ms on MLPs)."""
        return 1.8 if self.encoder in ("conv", "conv3") else 1.0

    def check(self, key: str) -> None:
        from priorlab.likelihoods import LIKELIHOODS  # lazy: torch, ~1.7 s at import priorlab.config

        _one_of(f"{key}.likelihood", self.likelihood, tuple(LIKELIHOODS))
        _positive(f"{key}.latent_dim", self.latent_dim)
        _non_negative(f"{key}.seed", self.seed)
        for i, h in enumerate(self.hidden):
            _positive(f"{key}.hidden[{i}]", h)
        for i, c in enumerate(self.channels):
            _positive(f"{key}.channels[{i}]", c)
        _positive(f"{key}.obs_std", self.obs_std)
        for i, h in enumerate(self.decoder_hidden or []):
            _positive(f"{key}.decoder_hidden[{i}]", h)
        _one_of(f"{key}.decoder_activation", self.decoder_activation, ("relu", "tanh"))
        for i, c in enumerate(self.encoder_channels or []):
            _positive(f"{key}.encoder_channels[{i}]", c)
        if self.encoder_channels is not None and "conv3" not in (self.encoder, self.decoder):
            raise ParamsError(f"{key}.encoder_channels is an option of the conv3 encoder / decoder, not of "
                              f"{self.encoder!r} / {self.decoder!r}")
        for i, c in enumerate(self.decoder_channels or []):
            _positive(f"{key}.decoder_channels[{i}]", c)
        if self.decoder_channels is not None and self.decoder != "conv3":
            raise ParamsError(f"{key}.decoder_channels is an option of the conv3 decoder, not of {self.decoder!r}")
        if self.decoder != "mlp" and (self.decoder_hidden is not None or self.decoder_activation != "relu"):
            raise ParamsError(f"{key}.decoder_hidden / decoder_activation are options of the mlp decoder, "
                              f"not of {self.decoder!r}")

    def record(self) -> dict:
        """The settings as recorded with results; the decoder options only where set (so that records of
        setups without them are those written before the options existed)."""
        out = dataclasses.asdict(self)
        for name in self.OPTIONAL:
            if out[name] == getattr(SetupParams, name, None):
                del out[name]
        return out

    OPTIONAL: typing.ClassVar[tuple[str, ...]] = ("decoder_hidden", "decoder_activation", "encoder_channels",
                                                  "decoder_channels", "seed")


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
    # torch.compile of the model's forward pass (its loss terms; AOTAutograd compiles the backward too)
    # for the gradient-trained kinds: "eager" (not compiled) or torch.compile's ``mode`` ("default",
    # "reduce-overhead": + CUDA graphs, "max-autotune").  Compiled kernels round differently, so the
    # numbers differ from eager ones in the last digits.  EM models have nothing to compile.
    compile: Literal["eager", "default", "reduce-overhead", "max-autotune"] = "eager"
    # torch.optim.Adam's implementation (same update rule): "auto" (torch's choice: foreach on CUDA, a
    # loop over the parameters on the CPU), "for-loop", "foreach" (about ten multi-tensor ops per
    # parameter group) or "fused" (one kernel per parameter group: fewest launches on a GPU).  They
    # round differently, so the numbers differ in the last digits.
    adam_impl: Literal["auto", "for-loop", "foreach", "fused"] = "auto"

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


REPORTED_GROUP_ROOTS = ("baselines", "fmvae_experiments", "vsc_experiments")
"""The first folder of every run group the ``figures`` and ``report`` stages read: dvc.yaml lists these
folders (not all of ``models/train``) as their inputs, so a diagnosis arm (``diagnosis/...``) is never
upstream of them; ``tests/test_stage_deps.py`` checks the two lists agree."""


@dataclass(frozen=True)
class RunParams:
    """One trained model: a setup, a model and a seed (a ``runs:`` entry; its key names the run)."""

    setup: str
    model: str
    seed: int = 0
    group: str = "baselines"  # the experiment it belongs to (report sections); diagnosis/<study>/...: an arm

    def check(self, key: str) -> None:
        _non_negative(f"{key}.seed", self.seed)
        root = self.group.split("/")[0]
        if root not in (*REPORTED_GROUP_ROOTS, DIAGNOSIS):
            raise ParamsError(f"{key}.group: {self.group!r} starts with no folder the figures and report stages "
                              f"read; start it with one of {', '.join(REPORTED_GROUP_ROOTS)} (e.g. "
                              f"'baselines/{self.group}'), or {DIAGNOSIS}/<study>/... for a diagnosis arm")

    @property
    def diagnosis(self) -> bool:
        """Whether the run is a diagnosis arm: trained and evaluated, read by the ``diagnosis`` stage only."""
        return is_diagnosis(self.group)


PRESENCE_METRICS = ("mig", "dci")  # the metrics with a presence-aware variant (priorlab.metrics.presence)


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
    # the presence-aware scores the vsc_experiments stage gives the Smiley runs, of "mig" and "dci" (DCI:
    # 22 classifiers per model, on the first seed's runs); None: those of ``metrics``
    presence_metrics: list[str] | None = None
    representation: Literal["mean", "sample"] = "mean"  # encoder mean (reference) or one posterior sample
    n_jobs: int = 1  # per-factor classifiers (DCI) in parallel processes
    # "gbt": the reference gradient-boosted trees (slow); "hist": the fast histogram-GBT backend
    dci_backend: Literal["gbt", "hist"] = "gbt"
    seed: int = 0

    def metrics_for(self, group: str) -> list[str]:
        """The disentanglement metrics computed for the runs of experiment ``group``."""
        return list(self.group_metrics.get(group, self.metrics))

    def presence_aware(self) -> list[str]:
        """The presence-aware scores of the Smiley runs (:attr:`presence_metrics`, else those of ``metrics``)."""
        chosen = self.metrics if self.presence_metrics is None else self.presence_metrics
        return [m for m in chosen if m in PRESENCE_METRICS]

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
        for i, m in enumerate(self.presence_metrics or []):
            _one_of(f"{key}.presence_metrics[{i}]", m, PRESENCE_METRICS)
        _positive(f"{key}.iw_samples", self.iw_samples)
        _positive(f"{key}.batch_size", self.batch_size)
        _positive(f"{key}.active_threshold", self.active_threshold)


@dataclass(frozen=True)
class ReplicatesParams:
    """How the seeds of one arm train (issue 47): ``separate``, a process per ``train@`` stage (what
    plain ``dvc repro`` does); ``vectorised``, the runner (``python -m stagerun.repro``) trains the
    ready seeds of an arm — runs of one model whose setups differ at most in their seed — in one process,
    one vectorised model (:func:`priorlab.pipeline.run_train_arm`), each written where its stage writes
    it and recorded as its stage; ``auto``, vectorised where ``device`` resolves to CUDA, else separate.
    ``separate``: models entries whose arms always train a seed per process.  A schedule, not a result:
    a member equals its separate run up to float rounding (``tests/test_replicates.py``), so the stages
    do not track it."""

    mode: Literal["separate", "vectorised", "auto"] = "separate"
    separate: list[str] = field(default_factory=list)

    def check(self, key: str, models: typing.Iterable[str]) -> None:
        _one_of(f"{key}.mode", self.mode, ("separate", "vectorised", "auto"))
        for i, name in enumerate(self.separate):
            _one_of(f"{key}.separate[{i}]", name, tuple(models))


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
