"""The training loop shared by every phase and model: checkpoints, resume, dvclive curves.

The loop draws a minibatch, calls the model's ``before_step`` and ``train_step``
(:mod:`priorlab.models.protocol`) and steps the lr schedule; the model decides
what a step is (Adam on a loss, or an EM iteration).  The trainer builds one
Adam optimiser over the groups the model declares (``param_groups``), or none.

Determinism: minibatches come from epoch permutations of a seeded
``torch.Generator``; the reparameterisation noise from torch's global RNG,
seeded at the start.  Both states, the optimiser and the position in the
epoch are checkpointed, so a run killed at any point and resumed from its
last checkpoint ends bit-identical to an uninterrupted run on the CPU.
"""

from __future__ import annotations

import csv
import os
import signal
from dataclasses import dataclass
from pathlib import Path

import torch
from tqdm.auto import tqdm

from priorlab.config import OptimParams
from priorlab.errors import UserError
from priorlab.io import load_torch, save_torch
from priorlab.models.protocol import Model, NonFiniteLoss, StepContext, TrainingSet

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
    """Minibatch indices from successive seeded permutations (sampling without replacement)."""

    def __init__(self, n: int, batch_size: int, seed: int):
        if n < 1:
            raise ValueError("cannot train on an empty data set")
        self.n, self.batch_size = n, min(batch_size, n)
        self.generator = torch.Generator().manual_seed(seed)
        self.perm = torch.randperm(n, generator=self.generator)
        self.pos = 0

    def next(self) -> torch.Tensor:
        if self.pos + self.batch_size > self.n:
            self.perm = torch.randperm(self.n, generator=self.generator)
            self.pos = 0
        idx = self.perm[self.pos : self.pos + self.batch_size]
        self.pos += self.batch_size
        return idx

    def state_dict(self) -> dict:
        return {"generator": self.generator.get_state(), "perm": self.perm, "pos": self.pos}

    def load_state_dict(self, state: dict) -> None:
        self.generator.set_state(state["generator"])
        self.perm, self.pos = state["perm"], state["pos"]


def _truncate_live(live_dir: Path, last_step: int) -> None:
    """Drop dvclive rows logged after ``last_step`` (work lost with a killed run)."""
    for tsv in (live_dir / "plots" / "metrics").rglob("*.tsv"):
        with open(tsv, newline="") as f:
            rows = list(csv.reader(f, delimiter="\t"))
        if not rows:
            continue
        step_col = rows[0].index("step")
        kept = [rows[0]] + [r for r in rows[1:] if int(r[step_col]) <= last_step]
        with open(tsv, "w", newline="") as f:
            csv.writer(f, delimiter="\t", lineterminator="\n").writerows(kept)


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
) -> TrainResult:
    """Train ``model`` on the rows of ``data`` for ``opt.steps`` steps.

    ``checkpoint`` is written every ``opt.checkpoint_every`` steps and resumed
    from when its ``fingerprint`` (a hash of everything that defines the run)
    matches; it is removed when the run completes.
    """
    from dvclive import Live

    checkpoint = Path(checkpoint)
    device = torch.device(device)
    model.to(device)
    groups = model.param_groups(opt.lr)
    optimizer = torch.optim.Adam(groups, lr=opt.lr) if groups else None
    scheduler = (torch.optim.lr_scheduler.MultiStepLR(optimizer, sorted(opt.lr_milestones), gamma=opt.lr_gamma)
                 if optimizer is not None else None)
    sampler = BatchSampler(len(data), opt.batch_size, opt.seed)
    torch.manual_seed(opt.seed)
    start = 0

    if checkpoint.is_file():
        state = load_torch(checkpoint)
        if state.get("fingerprint") == fingerprint:
            model.load_state_dict(state["model"])
            if optimizer is not None:
                optimizer.load_state_dict(state["optimizer"])
                scheduler.load_state_dict(state["scheduler"])
            sampler.load_state_dict(state["sampler"])
            torch.set_rng_state(state["torch_rng"])
            start = state["step"]
        else:  # a checkpoint of another configuration: start over
            checkpoint.unlink()

    live = None
    if live_dir is not None:
        live_dir = Path(live_dir)
        if start:
            _truncate_live(live_dir, start)
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
                "torch_rng": torch.get_rng_state(),
            },
        )

    kill_at = int(os.environ.get(KILL_ENV, "-1"))
    logs: dict[str, float] = {}
    model.train()
    bar = tqdm(total=opt.steps, initial=start, desc=desc, mininterval=2.0, dynamic_ncols=True)
    try:
        for step in range(start + 1, opt.steps + 1):
            batch = data.batch(sampler.next(), device)
            model.before_step(step)
            ctx = StepContext(optimizer, kl_weight(step, opt.kl_warmup_steps))
            try:
                logs = model.train_step(batch, step, ctx)
            except NonFiniteLoss as exc:
                raise TrainingDiverged(
                    f"{desc}: loss is {exc.value} at step {step}; last good checkpoint "
                    f"{'kept at ' + str(checkpoint) if checkpoint.is_file() else 'none (before the first)'}"
                ) from None
            if scheduler is not None:
                scheduler.step()
            bar.update(1)
            if live is not None and (step % opt.log_every == 0 or step == opt.steps):
                live.step = step
                for k, v in logs.items():
                    live.log_metric(f"{desc}/{k}", v)
                live.make_summary()
            if step % opt.checkpoint_every == 0 and step < opt.steps:
                save(step)
            if step == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)
    finally:
        bar.close()
        if live is not None:
            live.end()
    if checkpoint.is_file():
        checkpoint.unlink()
    model.eval()
    return TrainResult(steps=opt.steps, resumed_from=start, final_logs=logs)
