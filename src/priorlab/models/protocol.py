"""The model protocol: everything the trainer, the pipeline, evaluation and figures may call.

Hooks are declared here, not discovered.  A model subclasses :class:`Model` and
implements :meth:`Model.train_step` and :meth:`Model.represent`; the other hooks
have defaults that do nothing.  Optional capabilities are mixins queried with
``isinstance``:

* :class:`ElboModel` — q(z|x), p(z), a decoder and a likelihood: the evaluate
  stage computes the test ELBO, its terms and the importance-weighted bound;
* :class:`Generative` — ``decode`` / ``reconstruct``: figures draw
  reconstructions and latent traversals.

A gradient model's step is loss → backward → optimiser step (the VAE family's
default :meth:`~priorlab.models.vae.VAE.train_step`); a model fitted by EM
implements its E- and M-step in ``train_step`` and declares no parameter
groups, so the trainer builds no optimiser.  Either way the trainer gives it
checkpoints, exact resume, curves and the NaN check.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

import torch
from torch import Tensor, nn
from torch.distributions import Distribution

if TYPE_CHECKING:
    from priorlab.data.store import Dataset
    from priorlab.likelihoods import Likelihood
    from priorlab.models.elbo import ElboTerms

PHASES = ("pretrain", "prior_init", "train")


@dataclass(frozen=True)
class Batch:
    """A minibatch: model inputs and, where the model trains on them, their labels (-1 = unlabelled)."""

    x: Tensor
    labels: Tensor | None = None


@dataclass(frozen=True)
class TrainingSet:
    """The rows the trainer draws minibatches from: stored observations, how to turn them into
    model input, and optional per-row labels kept aligned with the rows."""

    x: Tensor
    prepare: Callable[[Tensor], Tensor]
    labels: Tensor | None = None

    def __post_init__(self) -> None:
        if self.labels is not None and self.labels.shape[0] != self.x.shape[0]:
            raise ValueError(f"{self.labels.shape[0]} labels for {self.x.shape[0]} training rows")

    def __len__(self) -> int:
        return int(self.x.shape[0])

    def batch(self, idx: Tensor, device: torch.device | str = "cpu") -> Batch:
        labels = None if self.labels is None else self.labels[idx].to(device)
        return Batch(self.prepare(self.x[idx]).to(device), labels)

    def batches(self, size: int = 500):
        """The rows in order, prepared, ``size`` at a time (prior initialisation)."""
        for start in range(0, len(self), size):
            yield self.prepare(self.x[start : start + size])


@dataclass
class StepContext:
    """What the trainer hands a training step: its optimiser (None without parameter groups)
    and the KL annealing weight of this step."""

    optimizer: torch.optim.Optimizer | None
    kl_weight: float = 1.0


class NonFiniteLoss(FloatingPointError):
    """Raised by a training step whose loss is NaN or infinite, before it changes any weight."""

    def __init__(self, value: float):
        super().__init__(f"loss is {value}")
        self.value = value


class Model(nn.Module, abc.ABC):
    """Base of every model the pipeline trains."""

    evaluation_notes: str = ""
    """Caveats on what the evaluation numbers mean for this model kind (copied into its metrics)."""

    # -- data and phases -------------------------------------------------------------------
    def bind_data(self, data: Dataset) -> None:
        """Called with the training data set before every phase: the one way the size N of the data
        and data-dependent hyperparameters reach a model."""

    def training_set(self, data: Dataset) -> TrainingSet:
        """The rows (and labels, for models that train on some) the trainer samples."""
        return TrainingSet(data.x("train"), data.prepare)

    def set_phase(self, phase: str) -> None:
        """Called with "pretrain", "prior_init" or "train" before each phase."""

    def load_pretrained(self, state: dict[str, Tensor]) -> None:
        """Take the weights of the setup's pretrained model (the prior_init stage)."""
        raise ValueError(f"{type(self).__name__} does not start from a pretrained model (use warm_start: scratch)")

    def init_prior(self, data: TrainingSet, generator: torch.Generator) -> dict[str, float]:
        """Prior initialisation with everything else frozen (nothing to do by default)."""
        return {}

    # -- optimisation ------------------------------------------------------------------------
    def param_groups(self, lr: float) -> list[dict]:
        """Optimiser parameter groups (``{"params": [...], "lr": ...}``); empty: no optimiser."""
        params = [p for p in self.parameters() if p.requires_grad]
        return [{"params": params, "lr": lr}] if params else []

    def before_step(self, step: int) -> None:
        """Schedules that depend on the step number, called before every training step."""

    @abc.abstractmethod
    def train_step(self, batch: Batch, step: int, ctx: StepContext) -> dict[str, float]:
        """One training step on ``batch``; returns the logged values (floats).  Raise
        :class:`NonFiniteLoss` before changing the model when the loss is not finite."""

    # -- what evaluation and figures use -------------------------------------------------------
    @abc.abstractmethod
    def represent(self, x: Tensor) -> Tensor:
        """The representation the metrics score, ``[B, D]``."""

    def evaluation_extras(self, dataset: Dataset, x_test: Tensor, batch_size: int) -> dict:
        """Model-kind specific measurements added to the metrics file (none by default)."""
        return {}


class ElboModel(abc.ABC):
    """Capability: a latent-variable model with q(z|x), p(z), a decoder and a likelihood."""

    likelihood: Likelihood

    @abc.abstractmethod
    def posterior(self, x: Tensor) -> Distribution: ...

    @abc.abstractmethod
    def prior_distribution(self, x: Tensor | None = None, labels: Tensor | None = None) -> Distribution: ...

    @abc.abstractmethod
    def decode(self, z: Tensor) -> Tensor: ...

    @abc.abstractmethod
    def terms(self, x: Tensor, labels: Tensor | None = None) -> ElboTerms: ...


class Generative(abc.ABC):
    """Capability: observations can be drawn from codes (figures: reconstructions, traversals)."""

    @abc.abstractmethod
    def decode_mean(self, z: Tensor) -> Tensor:
        """The mean observation for codes ``z``."""

    @abc.abstractmethod
    def reconstruct(self, x: Tensor) -> Tensor: ...
