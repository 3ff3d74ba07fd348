"""The training loop shared by every phase and model: checkpoints, resume, dvclive curves.

The loop draws a minibatch, calls the model's ``before_step`` and ``train_step``
(:mod:`priorlab.models.protocol`) and steps the lr schedule; the model decides
what a step is (Adam on a loss, or an EM iteration).  The trainer builds one
Adam optimiser over the groups the model declares (``param_groups``), or none,
in the implementation the phase's ``adam_impl`` names (:func:`adam`).

Determinism: minibatches come from epoch permutations of a seeded CPU
``torch.Generator``; the reparameterisation noise from torch's global RNG,
seeded at the start.  Both states (and the CUDA generators' on a GPU), the
optimiser and the position in the epoch are checkpointed, so a run killed at
any point and resumed from its last checkpoint ends bit-identical to an
uninterrupted run (on the CPU; on CUDA where the kernels are deterministic).

No host waits between log steps: the training rows are placed on the device
once when they fit (:meth:`TrainingSet.to`) and each epoch's permutation is
copied there once, so a batch is gathered on the device; a step's logged
values stay 0-d device tensors, read in one transfer at ``log_every`` steps and
at the end; the model's data-dependent argument checks are deferred
(:func:`priorlab.device.deferred_value_checks`).  Non-finite losses are caught
without a per-step read by :class:`FiniteRecord`: the values of the model's
``finite_keys`` are copied into a device buffer each step, which is read at log
steps, before every checkpoint and at the end; the first non-finite one stops
the run (:class:`TrainingDiverged`, naming its step) before anything else is
written, so a checkpoint never holds weights trained on a non-finite loss.

With ``compile`` set in the phase's params, a gradient model's forward pass (its loss terms and,
through AOTAutograd, their backward) runs compiled (:func:`compile_forward`), with whatever else
the model's ``compile`` adds (the factorial mixture VAE: its prior's SVI and first-order updates and
the caches refreshed after them); the rest of the step (optimiser, schedules) stays eager.
"""

from __future__ import annotations

import abc
import math
import os
import signal
from dataclasses import dataclass
from pathlib import Path

import torch
from tqdm.auto import tqdm

from priorlab.config import OptimParams
from priorlab.device import deferred_value_checks
from priorlab.errors import UserError
from priorlab.io import load_torch, remove_temporaries, save_torch
from priorlab.models.protocol import LogValue, Model, NonFiniteLoss, StepContext, TrainingSet, logs_to_floats
from priorlab.train.live import restore as restore_live, snapshot as snapshot_live

RECOMPILE_LIMIT = 64
"""Compiled versions dynamo keeps per code object when a model is compiled (:func:`compile_forward`)."""

KILL_ENV = "PRIORLAB_KILL_AT_STEP"
"""Fault injection for the resume test: SIGKILL the process after this step."""


class TrainingDiverged(UserError, RuntimeError):
    """The loss became NaN or infinite; the last good checkpoint is kept."""


@dataclass
class TrainResult:
    steps: int
    resumed_from: int
    final_logs: dict[str, float]


def kl_weight(step: int, warmup_steps: int) -> float:
    """Linear KL annealing weight: 0 → 1 over ``warmup_steps`` (1 when disabled)."""
    return 1.0 if warmup_steps <= 0 else min(1.0, step / warmup_steps)


class BatchSampler:
    """Minibatch indices from successive seeded permutations (sampling without replacement).

    The permutations are drawn on the CPU from a seeded CPU generator (the same sequence on every
    device); with ``device`` set, each permutation is copied there once per epoch (pinned memory,
    no wait on CUDA) and :meth:`next` returns slices of that copy.
    """

    def __init__(self, n: int, batch_size: int, seed: int, device: torch.device | str = "cpu"):
        if n < 1:
            raise ValueError("cannot train on an empty data set")
        self.n, self.batch_size = n, min(batch_size, n)
        self.device = torch.device(device)
        self.generator = torch.Generator().manual_seed(seed)
        self._set_perm(torch.randperm(n, generator=self.generator))
        self.pos = 0

    def _set_perm(self, perm: torch.Tensor) -> None:
        self.perm = perm
        if self.device.type == "cpu":
            self._perm_on_device = perm
        elif self.device.type == "cuda":
            self._perm_on_device = perm.pin_memory().to(self.device, non_blocking=True)
        else:
            self._perm_on_device = perm.to(self.device)

    def next(self) -> torch.Tensor:
        if self.pos + self.batch_size > self.n:
            self._set_perm(torch.randperm(self.n, generator=self.generator))
            self.pos = 0
        idx = self._perm_on_device[self.pos : self.pos + self.batch_size]
        self.pos += self.batch_size
        return idx

    def state_dict(self) -> dict:
        return {"generator": self.generator.get_state(), "perm": self.perm, "pos": self.pos}

    def load_state_dict(self, state: dict) -> None:
        self.generator.set_state(state["generator"])
        self._set_perm(state["perm"])
        self.pos = state["pos"]


class ReplacementSampler:
    """Minibatch indices drawn uniformly with replacement, ``torch.randint`` from a seeded CPU
    generator (the sampling of a plain supervised loop); the interface of :class:`BatchSampler`."""

    def __init__(self, n: int, batch_size: int, seed: int, device: torch.device | str = "cpu"):
        if n < 1:
            raise ValueError("cannot train on an empty data set")
        self.n, self.batch_size, self.device = n, batch_size, torch.device(device)
        self.generator = torch.Generator().manual_seed(seed)

    def next(self) -> torch.Tensor:
        return torch.randint(self.n, (self.batch_size,), generator=self.generator).to(self.device)

    def state_dict(self) -> dict:
        return {"generator": self.generator.get_state()}

    def load_state_dict(self, state: dict) -> None:
        self.generator.set_state(state["generator"])


class Monitor(abc.ABC):
    """A look at the model every :attr:`every` steps and at the last one that may end training early
    (a validation score and its stopping rule).  Its state is checkpointed with the run, so a resumed
    run stops where an uninterrupted one does."""

    every: int

    @abc.abstractmethod
    def observe(self, model: Model, step: int) -> bool:
        """Look at ``model`` after ``step``; True: stop training now."""

    @abc.abstractmethod
    def state_dict(self) -> dict: ...

    @abc.abstractmethod
    def load_state_dict(self, state: dict) -> None: ...


class FiniteRecord:
    """The values of a model's ``finite_keys``, step by step, in a buffer on their device.

    :meth:`record` copies a step's values into the next row (no host read); :meth:`check` reads the
    rows recorded since the last check (one transfer, shared with the logs of a log step by
    :meth:`read`) and returns ``(step, value)`` of the first non-finite one, or None.  Values a
    model returns as numbers are checked at once (they are on the host already).
    """

    def __init__(self, keys: tuple[str, ...], capacity: int):
        self.keys, self.capacity = tuple(keys), max(1, int(capacity))
        self.buffer: torch.Tensor | None = None
        self.steps: list[int] = []
        self.columns: list[list[str]] = []
        self.host_bad: tuple[int, float] | None = None

    def record(self, step: int, logs: dict[str, LogValue]) -> tuple[int, float] | None:
        """Note this step's values; a non-finite number is returned at once as ``(step, value)``."""
        tensors = []
        for k in self.keys:
            v = logs.get(k)
            if isinstance(v, torch.Tensor):
                tensors.append((k, v))
            elif v is not None and not math.isfinite(v):
                return step, float(v)
        if not tensors:
            return None
        if self.buffer is None or self.buffer.device != tensors[0][1].device:
            self.buffer = torch.empty(self.capacity, len(self.keys), dtype=torch.float64,
                                      device=tensors[0][1].device)
        row = len(self.steps)
        for j, (_, v) in enumerate(tensors):
            self.buffer[row, j].copy_(v.detach().reshape(()))
        self.steps.append(step)
        self.columns.append([k for k, _ in tensors])
        return None

    @property
    def full(self) -> bool:
        return len(self.steps) >= self.capacity

    def read(self, logs: dict[str, LogValue] | None = None) -> tuple[tuple[int, float] | None, dict[str, float]]:
        """``(first non-finite (step, value) since the last read or None, logs as numbers)`` with one
        host read for the recorded rows and the logged tensors together; the record is emptied."""
        names = [k for k, v in (logs or {}).items() if isinstance(v, torch.Tensor)]
        n = len(self.steps)
        parts = []
        if n:
            parts.append(self.buffer[:n].flatten())
        if names:
            parts.append(torch.stack([logs[k].detach().reshape(()).to(torch.float64)
                                      for k in names]).to(parts[0].device if parts else logs[names[0]].device))
        values = torch.cat(parts).tolist() if parts else []
        width = len(self.keys)
        bad = None
        for i in range(n):
            row = values[i * width : i * width + len(self.columns[i])]
            for v in row:
                if not math.isfinite(v):
                    bad = (self.steps[i], v)
                    break
            if bad is not None:
                break
        self.steps.clear()
        self.columns.clear()
        out: dict[str, float] = {}
        if logs:
            read = dict(zip(names, values[n * width :]))
            for k, v in logs.items():
                if k in read:
                    out[k] = read[k] if v.is_floating_point() else int(read[k])
                else:
                    out[k] = v
        return bad, out


def compile_forward(model: Model, mode: str) -> None:
    """``model.compile``: ``nn.Module.compile`` of its forward pass with the inductor options of
    torch.compile's ``mode`` (AOTAutograd compiles its backward too), and whatever a model's override
    adds (:meth:`FactorialMixtureVAE.compile`: the prior's first-order update); the weights, the
    state dict and the Python side of a step (optimiser, schedules) are untouched.

    Random draws inside the compiled code come from torch's generators as in eager mode (inductor's
    ``fallback_random``; its own generator would draw other numbers), so a compiled run sees the same
    noise as an eager one with the same seed and differs from it only by float rounding.  Argument
    validation of ``torch.distributions`` is off by default while the model trains (dynamo turns it
    off for the whole process at its first use; :func:`fit` restores the previous default when it
    returns): the trainer's deferred value checks and its non-finite record stand in for it, as on
    the eager path.

    Dynamo keeps at most ``recompile_limit`` compiled versions of a code object, and every module's
    compiled forward shares ``nn.Module._call_impl``'s: a process that compiles several models (the
    in-process studies, the benchmark, the tests) needs more than the default 8, so the limit is
    raised to :data:`RECOMPILE_LIMIT`, and reaching it is an error instead of a silent fall back to
    eager (a compiled run is compiled, or says why not)."""
    torch.distributions.Distribution.set_default_validate_args(False)
    model.compile(options=compile_options(mode))


def compile_options(mode: str) -> dict:
    """Inductor's options for torch.compile's ``mode``, with torch's generators for random draws
    (``fallback_random``), after raising dynamo's recompile limit (:func:`compile_forward`)."""
    from torch._dynamo import config as dynamo_config
    from torch._inductor import list_mode_options

    dynamo_config.recompile_limit = max(dynamo_config.recompile_limit, RECOMPILE_LIMIT)
    dynamo_config.fail_on_recompile_limit_hit = True
    return {**list_mode_options(mode), "fallback_random": True}


ADAM_IMPLS = {"auto": {}, "for-loop": {"foreach": False}, "foreach": {"foreach": True}, "fused": {"fused": True}}
"""``OptimParams.adam_impl`` -> the keyword arguments of ``torch.optim.Adam`` that pick it."""


def adam(groups: list[dict], opt: OptimParams) -> torch.optim.Adam | None:
    """Adam (lr ``opt.lr``) over the model's parameter ``groups`` in the implementation ``opt.adam_impl``
    names, or None for a model without any (EM)."""
    return torch.optim.Adam(groups, lr=opt.lr, **ADAM_IMPLS[opt.adam_impl]) if groups else None


def fit(
    model: Model,
    data: TrainingSet,
    opt: OptimParams,
    *,
    checkpoint: str | Path,
    live_dir: str | Path | None,
    fingerprint: str,
    device: torch.device | str = "cpu",
    desc: str = "train",
    progress: bool = True,
    curves: str | None = None,
    monitor: Monitor | None = None,
    replacement: bool = False,
) -> TrainResult:
    """Train ``model`` on the rows of ``data`` for ``opt.steps`` steps, or until ``monitor`` stops it
    (:class:`Monitor`; the result's ``steps`` are those run).  Minibatches come from seeded epoch
    permutations (:class:`BatchSampler`), or with ``replacement`` from uniform draws
    (:class:`ReplacementSampler`).

    ``checkpoint`` is written every ``opt.checkpoint_every`` steps and resumed
    from when its ``fingerprint`` (a hash of everything that defines the run)
    matches; it is removed when the run completes.  Curves go to ``live_dir``
    with dvclive (imported only then), named ``<curves>/<term>`` (default ``curves``: ``desc``);
    ``None`` logs nothing.  ``progress``: show a progress bar labelled ``desc`` (which also names the run
    in a divergence's error).
    """
    checkpoint = Path(checkpoint)
    remove_temporaries(checkpoint)  # a half-written checkpoint of a run killed mid-save (never resumed from)
    device = torch.device(device)
    model.to(device)
    data = data.to(device)
    optimizer = adam(model.param_groups(opt.lr), opt)
    scheduler = (torch.optim.lr_scheduler.MultiStepLR(optimizer, sorted(opt.lr_milestones), gamma=opt.lr_gamma)
                 if optimizer is not None else None)
    sampler = (ReplacementSampler if replacement else BatchSampler)(len(data), opt.batch_size, opt.seed,
                                                                    device=data.device)
    torch.manual_seed(opt.seed)
    start = 0

    if checkpoint.is_file():
        state = load_torch(checkpoint)
        # a checkpoint without the curves (written before they were kept in it) cannot resume them exactly
        if state.get("fingerprint") == fingerprint and (live_dir is None or state.get("live") is not None) \
                and (monitor is None or state.get("monitor") is not None):
            model.load_state_dict(state["model"])
            if optimizer is not None:
                optimizer.load_state_dict(state["optimizer"])
                scheduler.load_state_dict(state["scheduler"])
            sampler.load_state_dict(state["sampler"])
            if monitor is not None:
                monitor.load_state_dict(state["monitor"])
            torch.set_rng_state(state["torch_rng"])
            if state.get("cuda_rng") is not None and device.type == "cuda":
                torch.cuda.set_rng_state_all(state["cuda_rng"])
            start = state["step"]
        else:  # a checkpoint of another configuration: start over
            checkpoint.unlink()

    live = None
    if live_dir is not None:
        from dvclive import Live

        live_dir = Path(live_dir)
        if start:  # the curves as they were at the checkpoint (DVC removed the stage's outputs before rerunning it)
            restore_live(live_dir, state["live"])
        live = Live(str(live_dir), dvcyaml=False, save_dvc_exp=False, resume=bool(start), report=None)

    def save(step: int) -> None:
        save_torch(
            checkpoint,
            {
                "fingerprint": fingerprint,
                "step": step,
                "model": model.state_dict(),
                "optimizer": optimizer.state_dict() if optimizer is not None else None,
                "scheduler": scheduler.state_dict() if scheduler is not None else None,
                "sampler": sampler.state_dict(),
                "monitor": monitor.state_dict() if monitor is not None else None,
                "torch_rng": torch.get_rng_state(),
                "live": snapshot_live(live_dir) if live_dir is not None else None,
                "cuda_rng": torch.cuda.get_rng_state_all() if device.type == "cuda" else None,
            },
        )

    def diverged(bad: tuple[int, float]) -> TrainingDiverged:
        value, at = bad[1], bad[0]
        return TrainingDiverged(
            f"{desc}: loss is {value} at step {at}; last good checkpoint "
            f"{'kept at ' + str(checkpoint) if checkpoint.is_file() else 'none (before the first)'}"
        )

    kill_at = int(os.environ.get(KILL_ENV, "-1"))
    record = FiniteRecord(model.finite_keys, min(opt.log_every, opt.steps))
    logs: dict[str, LogValue] = {}
    final: dict[str, float] = {}
    last = start
    model.train()
    validate_default = torch.distributions.Distribution._validate_args
    compiled = opt.compile != "eager" and model.compilable
    if compiled:
        compile_forward(model, opt.compile)
    bar = tqdm(total=opt.steps, initial=start, desc=desc, mininterval=2.0, dynamic_ncols=True, disable=not progress)
    try:
        with deferred_value_checks():
            for step in range(start + 1, opt.steps + 1):
                log_step = step % opt.log_every == 0 or step == opt.steps
                read_logs = step == opt.steps or (log_step and live is not None)
                batch = data.batch(sampler.next(), device)
                model.before_step(step)
                if compiled:  # CUDA graphs ("reduce-overhead"): a new iteration may reuse the last one's memory
                    torch.compiler.cudagraph_mark_step_begin()
                ctx = StepContext(optimizer, kl_weight(step, opt.kl_warmup_steps), wants_logs=read_logs)
                try:
                    logs = model.train_step(batch, step, ctx)
                except NonFiniteLoss as exc:
                    bad = record.read()[0]  # an earlier step's loss may have gone first
                    raise diverged(bad or (step, exc.value)) from None
                except Exception:
                    bad = record.read()[0]  # a failure caused by an earlier non-finite loss
                    if bad is not None:
                        raise diverged(bad) from None
                    raise
                bad = record.record(step, logs)
                if bad is not None:
                    raise diverged(bad)
                if scheduler is not None:
                    scheduler.step()
                bar.update(1)
                last = step
                stop = monitor is not None and (step % monitor.every == 0 or step == opt.steps) \
                    and monitor.observe(model, step)
                save_now = step % opt.checkpoint_every == 0 and step < opt.steps and not stop
                if log_step or save_now or record.full or stop:
                    bad, values = record.read(logs if read_logs else None)
                    if bad is not None:
                        raise diverged(bad)
                    if values:
                        final = values
                    if live is not None and log_step:
                        live.step = step
                        for k, v in values.items():
                            live.log_metric(f"{curves or desc}/{k}", v)
                        live.make_summary()
                if save_now:
                    save(step)
                if step == kill_at:
                    os.kill(os.getpid(), signal.SIGKILL)
                if stop:
                    break
    finally:
        bar.close()
        if live is not None:
            live.end()
        torch.distributions.Distribution.set_default_validate_args(validate_default)
    if checkpoint.is_file():
        checkpoint.unlink()
    model.eval()
    return TrainResult(steps=last, resumed_from=start, final_logs=final if final else logs_to_floats(logs))


def fit_prior(model: Model, data: TrainingSet, *, device: torch.device | str = "cpu", seed: int = 0) -> dict:
    """The prior_init phase: ``model.init_prior`` with the nets frozen by the caller.

    A model with a prior to fit (one that overrides :meth:`Model.init_prior`) is moved to ``device``
    with its training rows (:meth:`TrainingSet.to`) and given a generator of that device seeded with
    ``seed``; other models stay where they are (nothing to fit, nothing to copy).  The model is left
    on the device it ran on.  On the CPU this is ``model.init_prior(data, Generator().manual_seed(seed))``.
    """
    device = torch.device(device)
    if type(model).init_prior is Model.init_prior:
        device = torch.device("cpu")
    else:
        model.to(device)
    generator = torch.Generator(device=device).manual_seed(seed)
    return model.init_prior(data.to(device), generator)

