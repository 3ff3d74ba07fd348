"""The model protocol: everything the trainer, the pipeline, evaluation and figures may call.

Hooks are declared here, not discovered.  A model subclasses :class:`Model` and
implements :meth:`Model.train_step` and :meth:`Model.represent`; the other hooks
have defaults that do nothing.  Optional capabilities are mixins queried with
``isinstance``:

* :class:`ElboModel` — q(z|x), p(z), a decoder and a likelihood: the evaluate
  stage computes the test ELBO, its terms and the importance-weighted bound;
* :class:`Generative` — ``decode`` / ``reconstruct``: figures draw
  reconstructions and latent traversals;
* :class:`LossStep` — a step that is Adam on one differentiable loss (then, at most, a no-grad update
  from values the loss computed): replicates of the model can be trained as one vectorised model
  (:mod:`priorlab.train.replicates`).

A gradient model's step is loss → backward → optimiser step (the VAE family's
default :meth:`~priorlab.models.vae.VAE.train_step`); a model fitted by EM
implements its E- and M-step in ``train_step`` and declares no parameter
groups, so the trainer builds no optimiser.  Either way the trainer gives it
checkpoints, exact resume, curves and the NaN check.
"""

from __future__ import annotations

import abc
import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Union

import torch
from torch import Tensor, nn
from torch.distributions import Distribution

from priorlab.device import fits_on, same_device

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
    model input, and optional per-row labels kept aligned with the rows.

    :meth:`to` places the stored rows on a device once (when they fit); :meth:`batch` then gathers
    and prepares a minibatch where the rows are, so a training step copies nothing from the host."""

    x: Tensor
    prepare: Callable[[Tensor], Tensor]
    labels: Tensor | None = None

    def __post_init__(self) -> None:
        if self.labels is not None and self.labels.shape[0] != self.x.shape[0]:
            raise ValueError(f"{self.labels.shape[0]} labels for {self.x.shape[0]} training rows")

    def __len__(self) -> int:
        return int(self.x.shape[0])

    @property
    def device(self) -> torch.device:
        """Where the stored rows are."""
        return self.x.device

    def to(self, device: torch.device | str, fraction: float = 0.5) -> TrainingSet:
        """The same rows with ``x`` and the labels on ``device`` when they take at most ``fraction`` of
        its free memory (:func:`priorlab.device.fits_on`); else (and on the CPU) ``self`` unchanged."""
        device = torch.device(device)
        if same_device(self.x.device, device):
            return self
        nbytes = self.x.nelement() * self.x.element_size()
        if self.labels is not None:
            nbytes += self.labels.nelement() * self.labels.element_size()
        if not fits_on(device, nbytes, fraction):
            return self
        labels = None if self.labels is None else self.labels.to(device)
        return TrainingSet(self.x.to(device), self.prepare, labels)

    def batch(self, idx: Tensor, device: torch.device | str = "cpu") -> Batch:
        """Rows ``idx`` (a long tensor on the rows' device), prepared, on ``device``.  Rows kept on the
        CPU for a GPU run are gathered there and copied through pinned memory without a wait."""
        x = torch.index_select(self.x, 0, idx)
        labels = None if self.labels is None else torch.index_select(self.labels, 0, idx)
        device = torch.device(device)
        if x.device != device and x.device.type == "cpu" and device.type == "cuda":
            x = self.prepare(x).pin_memory().to(device, non_blocking=True)
            labels = None if labels is None else labels.pin_memory().to(device, non_blocking=True)
            return Batch(x, labels)
        return Batch(self.prepare(x).to(device), None if labels is None else labels.to(device))

    def batches(self, size: int = 500):
        """The rows in order, prepared, ``size`` at a time (prior initialisation)."""
        for start in range(0, len(self), size):
            yield self.prepare(self.x[start : start + size])


@dataclass
class StepContext:
    """What the trainer hands a training step: its optimiser (None without parameter groups), the KL
    annealing weight of this step, and whether the step's logged values will be read (``wants_logs``:
    a step whose logs nobody reads may return only the values of :attr:`Model.finite_keys`)."""

    optimizer: torch.optim.Optimizer | None
    kl_weight: float = 1.0
    wants_logs: bool = True


LogValue = Union[float, Tensor]
"""A logged value: a number, or a 0-d tensor (on the model's device) read when the logs are read."""


def logs_to_floats(logs: dict[str, LogValue]) -> dict[str, float]:
    """Logged values as numbers, with one host read for all the tensors among them.

    Tensors are converted to float64 on their device before the read (exact for float16/32), so each
    number equals the tensor's ``.item()``; integer tensors come back as ``int``."""
    names = [k for k, v in logs.items() if isinstance(v, Tensor)]
    out: dict[str, float] = {k: v for k, v in logs.items() if not isinstance(v, Tensor)}
    if names:
        values = torch.stack([logs[k].detach().reshape(()).to(torch.float64) for k in names]).tolist()
        for k, v in zip(names, values):
            out[k] = v if logs[k].is_floating_point() else int(v)
    return {k: out[k] for k in logs}


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

    compilable: bool = False
    """True when :meth:`train_step` runs the differentiable part of a step as the model's forward pass,
    ``self(...)``: the trainer then calls the model's ``compile`` (``nn.Module.compile``, which a
    model may extend to more of its step) when the phase's ``compile`` asks for it.  Models fitted by
    EM have nothing to compile."""

    finite_keys: tuple[str, ...] = ("loss",)
    """Logged values the trainer checks for NaN / inf after every step (those a step returns)."""

    @abc.abstractmethod
    def train_step(self, batch: Batch, step: int, ctx: StepContext) -> dict[str, LogValue]:
        """One training step on ``batch``; returns the logged values: numbers, or 0-d tensors left on
        the device (the trainer reads them only when it logs).  The trainer records the values of
        :attr:`finite_keys` on the device and stops at the first non-finite one it finds (at the next
        log step or checkpoint, before anything is written).  A step that computes its values on the
        host anyway may instead raise :class:`NonFiniteLoss` before changing the model."""

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


class LossStep(abc.ABC):
    """Capability: a training step that is one differentiable loss of the weights and the batch, then
    Adam, then at most a no-grad update of the model's own state from values the loss computed (SVI on
    a prior's q, a closed-form M-step, a likelihood's σ² update: :meth:`update_after_step`).
    :func:`priorlab.train.replicates.fit_replicates` then trains N seeds of the model as one: the loss
    mapped over the members' stacked weights (``torch.func.vmap``), each member with its own batches,
    noise and Adam state, then each member's update on its own slice.

    :meth:`step_loss` must be a function of the weights, buffers and batch only (the Python state it
    branches on, e.g. a schedule's copy, the same for every member at a step) and draw its noise from
    torch's global generator with ``torch.rand`` / ``torch.randn`` / ``Tensor.normal_`` /
    ``Tensor.uniform_`` (and their ``_like`` forms), which the vectorised trainer replaces with each
    member's own draws.  :meth:`update_after_step` draws no noise."""

    @abc.abstractmethod
    def step_loss(self, batch: Batch, ctx: StepContext) -> tuple[Tensor, dict[str, LogValue], dict[str, Tensor]]:
        """The loss a training step minimises on ``batch``, its logged values (0-d tensors; only the
        loss when ``ctx.wants_logs`` is false) and its *carry*: the detached tensors of this forward pass
        that :meth:`update_after_step` reads (empty when there is no update)."""

    def update_after_step(self, batch: Batch, carry: dict[str, Tensor], step: int) -> None:
        """The update after the optimiser step, from the model's state (the new weights) and the step's
        ``carry``; nothing by default.  A standalone step calls it after ``optimizer.step()``; the
        vectorised trainer calls it on each member with its slice of the carry (the member's weights
        and buffers are views of the stacked ones, so an in-place update is what the next mapped step
        reads)."""

    def mapped(self) -> contextlib.AbstractContextManager:
        """The context the vectorised trainer runs :meth:`step_loss` in, mapped over the members: a
        model whose loss reads caches of its state keyed on tensor identity (which a batched tensor
        inside ``vmap`` does not have) computes them afresh there.  Nothing by default."""
        return contextlib.nullcontext()

    def not_vectorised(self) -> str | None:
        """Why this model's replicates must train in separate processes (None: they can be vectorised)."""
        return None


class Generative(abc.ABC):
    """Capability: observations can be drawn from codes (figures: reconstructions, traversals)."""

    @abc.abstractmethod
    def decode_mean(self, z: Tensor) -> Tensor:
        """The mean observation for codes ``z``."""

    @abc.abstractmethod
    def reconstruct(self, x: Tensor) -> Tensor: ...
