"""Replicates trained as one model: the N seeds of an arm stepped together (issue 47).

The members (same class and configuration, different seeds) have their weights stacked along a new
first dimension; a step maps the model's :meth:`~priorlab.models.protocol.LossStep.step_loss` over
them with ``torch.func.vmap`` + ``functional_call``, so one kernel launch serves every member, and
one Adam over the stacked weights is N independent Adams (Adam is elementwise).  What makes member i
the standalone run of seed i (:func:`priorlab.train.fit` with ``opt.seed = seed_i``):

* batches: its own :class:`~priorlab.train.trainer.BatchSampler` seeded with its seed;
* noise: its own generator, seeded as :func:`fit` seeds torch's global one; the step's random draws
  (``torch.rand`` / ``randn`` / ``Tensor.normal_`` / ``uniform_`` and their ``_like`` forms) are
  drawn for every member from its generator before the vectorised pass (:class:`NoisePlan`) and
  handed to it, in the order and shapes of a standalone step;
* Adam state, lr schedule, checkpoints: its own, in the format of a standalone checkpoint (a member's
  checkpoint resumes as a standalone run and back);
* the update after the optimiser step (:meth:`~priorlab.models.protocol.LossStep.update_after_step`:
  SVI on the factorial mixture prior's q, the sparse VAE's SSL update, a likelihood's σ²): run on each
  member with its slice of the step's carry, eagerly, on its own weights and buffers (views of the
  stacked ones); it may draw no noise (:class:`NotVectorisable` if it does);
* a non-finite loss stops that member only (:class:`ReplicateResult` holds its
  :class:`~priorlab.train.trainer.TrainingDiverged`; its last good checkpoint is kept), the others go on.

So member i equals the standalone run up to float rounding: a batched matrix product sums in another
order than the single one (the tests bound the difference in float64, where rounding is ~1e-16).

Each member module keeps its own Python object; during the run its parameters and buffers are views
of the stacked tensors (a schedule's ``before_step`` on a member writes its slice), and they get
their own storage back when the run ends.  The members must branch identically in Python at each step
(schedules depend on the step only).  Models that are not a :class:`LossStep`, or that say why not
(:meth:`~priorlab.models.protocol.LossStep.not_vectorised`), train in separate runs:
:func:`vectorisable` says which.

Only the rows of the data set are shared; each member writes its own curves (dvclive) when asked.
"""

from __future__ import annotations

import math
import os
import signal
from dataclasses import dataclass, replace
from pathlib import Path

import torch
from torch.overrides import TorchFunctionMode
from tqdm.auto import tqdm

from priorlab.config import OptimParams
from priorlab.device import deferred_value_checks
from priorlab.io import load_torch, remove_temporaries, save_torch
from priorlab.models.protocol import Batch, LossStep, Model, StepContext, TrainingSet
from priorlab.train.live import restore as restore_live, snapshot as snapshot_live
from priorlab.train.trainer import (
    KILL_ENV,
    BatchSampler,
    TrainingDiverged,
    TrainResult,
    adam,
    compile_options,
    kl_weight,
)

__all__ = ["NOISE_MODES", "NoisePlan", "ReplicateResult", "fit_replicates", "vectorisable"]

NOISE_MODES = ("member", "batched")
"""``member``: each member's draws from its own generator, as in its standalone run (N small draws per
random op); ``batched``: one draw for all members from the first member's generator (one launch; the
same distribution, other numbers than the standalone runs)."""


def vectorisable(model: Model) -> str | None:
    """None when replicates of ``model`` can train vectorised, else why not."""
    if not isinstance(model, LossStep):
        return f"{type(model).__name__}'s step is not one differentiable loss (an EM or closed-form fit)"
    return model.not_vectorised()


# --------------------------------------------------------------------------- noise


@dataclass(frozen=True)
class Draw:
    """One random draw of a step: ``normal`` or ``uniform`` with parameters ``(a, b)`` (mean and std,
    or bounds), of one member's shape."""

    kind: str
    shape: tuple[int, ...]
    dtype: torch.dtype
    a: float
    b: float

    def sample(self, generator: torch.Generator, device: torch.device, leading: tuple[int, ...] = ()) -> torch.Tensor:
        out = torch.empty(leading + self.shape, dtype=self.dtype, device=device)
        fill = out.normal_ if self.kind == "normal" else out.uniform_
        return fill(self.a, self.b, generator=generator)


_FILLS = {torch.Tensor.normal_: ("normal", 0.0, 1.0), torch.Tensor.uniform_: ("uniform", 0.0, 1.0)}
_FACTORIES = {torch.randn: ("normal", 0.0, 1.0), torch.rand: ("uniform", 0.0, 1.0)}
_LIKES = {torch.randn_like: ("normal", 0.0, 1.0), torch.rand_like: ("uniform", 0.0, 1.0)}
_OTHER_RANDOM = {
    torch.normal, torch.bernoulli, torch.multinomial, torch.poisson, torch.randint, torch.randint_like,
    torch.randperm, torch.Tensor.bernoulli_, torch.Tensor.exponential_, torch.Tensor.geometric_,
    torch.Tensor.cauchy_, torch.Tensor.log_normal_, torch.Tensor.random_, torch.Tensor.bernoulli,
    torch.Tensor.multinomial,
}


class NotVectorisable(RuntimeError):
    """A model's step draws noise in a way the vectorised trainer cannot give each member its own of."""


def _size(args: tuple) -> tuple[int, ...]:
    if len(args) == 1 and isinstance(args[0], (tuple, list, torch.Size)):
        return tuple(int(s) for s in args[0])
    return tuple(int(s) for s in args)


def describe(func, args: tuple, kwargs: dict) -> Draw | None:
    """The :class:`Draw` a torch call makes from the global generator, None for a call that draws
    nothing; :class:`NotVectorisable` for a random call it cannot replay (a generator passed in, or
    another distribution)."""
    if func in _OTHER_RANDOM:
        raise NotVectorisable(f"the step calls {getattr(func, '__name__', func)}, which the vectorised trainer "
                              "cannot give each member its own draws of")
    spec = _FILLS.get(func) or _FACTORIES.get(func) or _LIKES.get(func)
    if spec is None:
        return None
    if kwargs.get("generator") is not None:
        raise NotVectorisable("the step draws from its own torch.Generator, shared by every member")
    kind, a, b = spec
    if func in _FILLS:
        target, rest = args[0], list(args[1:])
        a = float(rest[0]) if rest else float(kwargs.get("mean" if kind == "normal" else "from", a))
        b = float(rest[1]) if len(rest) > 1 else float(kwargs.get("std" if kind == "normal" else "to", b))
        return Draw(kind, tuple(target.shape), target.dtype, a, b)
    if func in _LIKES:
        like = args[0]
        return Draw(kind, tuple(like.shape), kwargs.get("dtype") or like.dtype, a, b)
    return Draw(kind, _size(args), kwargs.get("dtype") or torch.get_default_dtype(), a, b)


class _NoDraws(TorchFunctionMode):
    """Refuses a random draw (an update after the step must not draw: its standalone run would draw
    from torch's global generator, which the vectorised trainer does not give each member)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if describe(func, args, kwargs) is not None:
            raise NotVectorisable(f"the update after the step draws noise ({getattr(func, '__name__', func)})")
        return func(*args, **kwargs)


class _PlanChanged(Exception):
    """The step drew other noise than the plan says (a schedule switched a branch): re-plan."""


class _Noise(TorchFunctionMode):
    """Inside a step: with ``replay`` None, records the step's draws (and draws them for real); else
    returns ``replay[k]`` for the k-th draw, after checking it is the draw the plan expects."""

    def __init__(self, plan: list[Draw] | None = None, replay: list[torch.Tensor] | None = None):
        super().__init__()
        self.plan, self.replay, self.seen = plan, replay, []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        draw = describe(func, args, kwargs)
        if draw is None:
            return func(*args, **kwargs)
        k = len(self.seen)
        self.seen.append(draw)
        if self.replay is None:
            return func(*args, **kwargs)
        if k >= len(self.plan) or self.plan[k] != draw:
            raise _PlanChanged
        return self.replay[k]


class NoisePlan:
    """The random draws of one step, and the members' generators they are drawn from.

    :meth:`draw` draws the plan for every member (``[N, *shape]`` per draw), from each member's
    generator (``member``) or in one launch from the first's (``batched``); generators can be saved
    and restored (a re-plan redraws from the same states)."""

    def __init__(self, seeds: list[int], device: torch.device, mode: str = "member"):
        if mode not in NOISE_MODES:
            raise ValueError(f"noise must be one of {NOISE_MODES}, got {mode!r}")
        self.device, self.mode = device, mode
        self.generators = [torch.Generator(device=device).manual_seed(int(s)) for s in seeds]
        self.draws: list[Draw] | None = None

    def record(self, step) -> None:
        """Run ``step()`` (a member's loss, outside vmap) and keep the draws it makes (from a scratch
        generator state: the members' generators are untouched)."""
        mode = _Noise()
        with torch.random.fork_rng(devices=[self.device] if self.device.type == "cuda" else []), mode:
            step()
        self.draws = mode.seen

    def states(self) -> list[torch.Tensor]:
        return [g.get_state() for g in self.generators]

    def set_states(self, states: list[torch.Tensor]) -> None:
        for g, s in zip(self.generators, states):
            g.set_state(s)

    def draw(self) -> list[torch.Tensor]:
        n = len(self.generators)
        if self.mode == "batched":
            return [d.sample(self.generators[0], self.device, (n,)) for d in self.draws]
        return [torch.stack([d.sample(g, self.device) for g in self.generators]) for d in self.draws]


# --------------------------------------------------------------------------- the vectorised step


class _StepLoss(torch.nn.Module):
    """``model.step_loss`` as a module's forward, so ``functional_call`` can swap the model's weights."""

    def __init__(self, model: Model):
        super().__init__()
        self.model = model

    def forward(self, x, labels, ctx: StepContext):
        return self.model.step_loss(Batch(x, labels), ctx)


@dataclass
class ReplicateResult:
    """One member's outcome: its :class:`TrainResult`, or the divergence that stopped it."""

    seed: int
    result: TrainResult | None = None
    diverged: TrainingDiverged | None = None


def is_setting(value) -> bool:
    """A plain setting: a number, a string, or a tuple of settings (not a tuple that holds tensors: a
    cache is state, not a setting)."""
    if isinstance(value, tuple):
        return all(is_setting(v) for v in value)
    return isinstance(value, (bool, int, float, str))


def check_same_settings(members: list[Model]) -> None:
    """Raise ``ValueError`` when two members' modules differ in a plain setting (:func:`is_setting`,
    e.g. β): the vectorised step runs the first member's Python code for all of them."""
    first = dict(members[0].named_modules())
    for i, m in enumerate(members[1:], 1):
        for path, mod in m.named_modules():
            ref = first.get(path)
            if ref is None or type(ref) is not type(mod):
                raise ValueError(f"replicates must be the same model: member {i} differs at {path or 'the top'}")
            for k, v in vars(mod).items():
                if is_setting(v) and vars(ref).get(k) != v:
                    where = f"{path}.{k}" if path else k
                    raise ValueError(f"replicates must be the same model: {where} is {vars(ref).get(k)!r} for the "
                                     f"first member, {v!r} for member {i}")


def _stack(members: list[Model]) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor], list[str]]:
    """Stacked parameters (trainable ones as leaves that require grad) and buffers; the members'
    tensors become views of their slices.  Also the names of the trainable parameters."""
    template = members[0]
    named = [dict(m.named_parameters()) for m in members]
    keys = list(named[0])
    for m, d in zip(members[1:], named[1:]):
        if list(d) != keys or any(d[k].shape != named[0][k].shape for k in keys):
            raise ValueError(f"replicates must be the same model: {type(m).__name__} differs in its parameters")
    trainable = [k for k in keys if named[0][k].requires_grad]
    params = {}
    for k in keys:
        stacked = torch.stack([d[k].detach() for d in named]).clone()
        params[k] = stacked.requires_grad_(k in trainable)
        for i, d in enumerate(named):
            d[k].data = params[k].data[i]
    buffers = {}
    modules = [dict(m.named_modules()) for m in members]
    for name, buf in template.named_buffers():
        path, _, attr = name.rpartition(".")
        owners = [mods[path] for mods in modules]
        buffers[name] = torch.stack([o._buffers[attr] for o in owners]).clone()
        for i, o in enumerate(owners):
            o._buffers[attr] = buffers[name][i]
    return params, buffers, trainable


def _unstack(members: list[Model]) -> None:
    """Members own their tensors again (copies of their slices)."""
    for m in members:
        for p in m.parameters():
            p.data = p.data.clone()
        for mod in m.modules():
            for attr, buf in mod._buffers.items():
                if buf is not None:
                    mod._buffers[attr] = buf.clone()


def _groups(template: Model, params: dict[str, torch.Tensor], lr: float) -> tuple[list[dict], list[str]]:
    """The template's parameter groups over the stacked parameters, and the names in group order."""
    name_of = {id(p): k for k, p in template.named_parameters()}
    groups, order = [], []
    for g in template.param_groups(lr):
        names = [name_of[id(p)] for p in g["params"]]
        order.extend(names)
        groups.append({**g, "params": [params[k] for k in names]})
    return groups, order


def _member_optimizer_state(state: dict, i: int) -> dict:
    """Member i's slice of the stacked optimiser's state dict: a standalone optimiser's state dict."""
    def cut(v):
        return v[i].clone() if isinstance(v, torch.Tensor) and v.dim() > 0 else v
    return {"state": {k: {n: cut(v) for n, v in s.items()} for k, s in state["state"].items()},
            "param_groups": state["param_groups"]}


def _stack_optimizer_states(states: list[dict]) -> dict:
    """The stacked optimiser's state dict from the members' (all at the same step)."""
    first = states[0]

    def join(vs):  # Adam's step counts are 0-d and equal; its moments are stacked
        return torch.stack(vs) if isinstance(vs[0], torch.Tensor) and vs[0].dim() > 0 else vs[0]
    return {"state": {k: {n: join([s["state"][k][n] for s in states]) for n in first["state"][k]}
                      for k in first["state"]},
            "param_groups": first["param_groups"]}


def fit_replicates(
    models: list[Model],
    data: TrainingSet,
    opt: OptimParams,
    seeds: list[int],
    *,
    checkpoints: list[str | Path],
    fingerprints: list[str],
    device: torch.device | str = "cpu",
    noise: str = "member",
    desc: str = "replicates",
    progress: bool = True,
    live_dirs: list[str | Path] | None = None,
    curves: str | None = None,
) -> list[ReplicateResult]:
    """Train ``models[i]`` as the run of ``opt`` with seed ``seeds[i]``, all N in one vectorised loop.

    Each member's checkpoint (``checkpoints[i]``, every ``opt.checkpoint_every`` steps, removed when
    it completes) has the format of :func:`~priorlab.train.fit`'s, so either resumes the other; a
    run resumes when every member's checkpoint matches its fingerprint at the same step (else it starts
    over).  ``live_dirs``: each member's dvclive folder, its curves named ``<curves>/<term>`` (default
    ``desc``) as :func:`fit` writes them (values equal up to rounding).  ``noise``: :data:`NOISE_MODES`.  ``opt.compile`` compiles the vectorised loss.  Raises
    ``ValueError`` when the models cannot be vectorised (:func:`vectorisable`)."""
    n = len(models)
    if live_dirs is not None and len(live_dirs) != n:
        raise ValueError(f"need one live folder per model: {n} models, {len(live_dirs)} folders")
    if not n or not (len(seeds) == len(checkpoints) == len(fingerprints) == n):
        raise ValueError(f"need one seed, checkpoint and fingerprint per model: {n} models, {len(seeds)} seeds, "
                         f"{len(checkpoints)} checkpoints, {len(fingerprints)} fingerprints")
    for m in models:
        why = vectorisable(m)
        if why is not None:
            raise ValueError(f"{type(m).__name__} cannot train vectorised: {why}")
        if type(m) is not type(models[0]):
            raise ValueError(f"replicates must be one model kind: {type(models[0]).__name__} and {type(m).__name__}")
    check_same_settings(models)
    device = torch.device(device)
    checkpoints = [Path(c) for c in checkpoints]
    for c in checkpoints:
        remove_temporaries(c)
    for m in models:
        m.to(device)
    data = data.to(device)
    template = models[0]
    params, buffers, trainable = _stack(models)
    groups, order = _groups(template, params, opt.lr)
    optimizer = adam(groups, opt)
    scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, sorted(opt.lr_milestones), gamma=opt.lr_gamma)
    samplers = [BatchSampler(len(data), opt.batch_size, s, device=data.device) for s in seeds]
    plan = NoisePlan(seeds, device, noise)
    start, snapshots = _resume(checkpoints, fingerprints, models, optimizer, scheduler, samplers, plan,
                               live_dirs is not None)
    lives = _open_lives(live_dirs, snapshots if start else None)

    step_module = _StepLoss(template)
    flat = {f"model.{k}": v for k, v in {**params, **buffers}.items()}  # the step module's names
    names, tensors = list(flat), list(flat.values())

    def member_loss(tensors, x, labels, draws, ctx):
        with _Noise(plan.draws, draws):
            return torch.func.functional_call(step_module, dict(zip(names, tensors)), (x, labels, ctx))

    batched = torch.vmap(member_loss, in_dims=(0, 0, None if data.labels is None else 0, 0, None), randomness="error")
    if opt.compile != "eager":
        batched = torch.compile(batched, options=compile_options(opt.compile))

    alive = [True] * n
    out = [ReplicateResult(int(s)) for s in seeds]
    losses = torch.empty(max(1, min(opt.log_every, opt.steps)), n, dtype=torch.float64, device=device)
    rows: list[int] = []
    last_logs: list[dict[str, float]] = [{} for _ in range(n)]
    kill_at = int(os.environ.get(KILL_ENV, "-1"))

    def save(step: int) -> None:
        state = optimizer.state_dict()
        for i in range(n):
            if alive[i]:
                save_torch(checkpoints[i], {
                    "fingerprint": fingerprints[i], "step": step, "model": models[i].state_dict(),
                    "optimizer": _member_optimizer_state(state, i), "scheduler": scheduler.state_dict(),
                    "sampler": samplers[i].state_dict(), "torch_rng": plan.generators[i].get_state()
                    if device.type == "cpu" else None,
                    "live": snapshot_live(live_dirs[i]) if live_dirs is not None else None,
                    "cuda_rng": [plan.generators[i].get_state()] if device.type == "cuda" else None})

    def check() -> None:
        if not rows:
            return
        values = losses[: len(rows)].tolist()
        for r, step in enumerate(rows):
            for i in range(n):
                if alive[i] and not math.isfinite(values[r][i]):
                    alive[i] = False
                    ck = checkpoints[i]
                    out[i].diverged = TrainingDiverged(
                        f"{desc} seed {seeds[i]}: loss is {values[r][i]} at step {step}; last good checkpoint "
                        f"{'kept at ' + str(ck) if ck.is_file() else 'none (before the first)'}")
        rows.clear()

    for m in models:
        m.train()
    validate_default = torch.distributions.Distribution._validate_args
    torch.distributions.Distribution.set_default_validate_args(False)
    bar = tqdm(total=opt.steps, initial=start, desc=desc, mininterval=2.0, dynamic_ncols=True, disable=not progress)
    try:
        with deferred_value_checks():
            for step in range(start + 1, opt.steps + 1):
                log_step = step % opt.log_every == 0 or step == opt.steps
                idx = [s.next() for s in samplers]
                batches = [data.batch(i, device) for i in idx]
                x = torch.stack([b.x for b in batches])
                labels = None if batches[0].labels is None else torch.stack([b.labels for b in batches])
                for m in models:
                    m.before_step(step)
                # the KL weight as a tensor: a compiled loss takes a new value as an input (a number would recompile)
                ctx = StepContext(None, torch.tensor(kl_weight(step, opt.kl_warmup_steps), dtype=torch.float64,
                                                     device=device), wants_logs=log_step)
                with template.mapped():
                    loss, logs, carry = _step(plan, template, batches[0], ctx, batched, tensors, x, labels)
                optimizer.zero_grad(set_to_none=True)
                loss.sum().backward()
                optimizer.step()
                with _NoDraws():
                    for i, (m, b) in enumerate(zip(models, batches)):
                        m.update_after_step(b, {k: v[i] for k, v in carry.items()}, step)
                scheduler.step()
                losses[len(rows)].copy_(loss.detach())
                rows.append(step)
                bar.update(1)
                save_now = step % opt.checkpoint_every == 0 and step < opt.steps
                if log_step or save_now or len(rows) == losses.shape[0]:
                    check()
                if log_step:
                    read = {k: v.detach().to(torch.float64).tolist() for k, v in logs.items()}
                    for i in range(n):
                        last_logs[i] = {k: v[i] for k, v in read.items()}
                        if lives and alive[i]:
                            lives[i].step = step
                            for k, v in last_logs[i].items():
                                lives[i].log_metric(f"{curves or desc}/{k}", v)
                            lives[i].make_summary()
                if save_now:
                    save(step)
                if step == kill_at:
                    os.kill(os.getpid(), signal.SIGKILL)
                if not any(alive):
                    break
    finally:
        bar.close()
        for live in lives:
            live.end()
        torch.distributions.Distribution.set_default_validate_args(validate_default)
        for p in params.values():
            p.requires_grad_(False)
        _unstack(models)
    for m in models:
        m.eval()
    for i in range(n):
        if alive[i]:
            checkpoints[i].unlink(missing_ok=True)
            out[i].result = TrainResult(steps=opt.steps, resumed_from=start, final_logs=last_logs[i])
    return out


def _step(plan: NoisePlan, template: Model, first: Batch, ctx: StepContext, batched, tensors: list, x, labels):
    """The vectorised loss of one step: the members' draws, then the mapped loss over the stacked
    ``tensors`` (re-planned when the step drew other noise than the plan)."""
    for attempt in range(2):
        if plan.draws is None:
            with torch.no_grad():
                plan.record(lambda: template.step_loss(first, ctx))
        states = plan.states()
        draws = plan.draws and plan.draw()
        try:
            return batched(tensors, x, labels, draws or [], ctx)
        except _PlanChanged:
            plan.set_states(states)
            plan.draws = None
    raise NotVectorisable(f"{type(template).__name__}'s step draws different noise each time it runs")


def _open_lives(live_dirs: list[str | Path] | None, snapshots: list[dict] | None) -> list:
    """A dvclive ``Live`` per member (none without ``live_dirs``), its folder first put back as its
    checkpoint had it when resuming (``snapshots``), as :func:`fit` does."""
    if live_dirs is None:
        return []
    from dvclive import Live

    lives = []
    for i, d in enumerate(live_dirs):
        if snapshots:
            restore_live(d, snapshots[i])
        lives.append(Live(str(d), dvcyaml=False, save_dvc_exp=False, resume=bool(snapshots), report=None))
    return lives


def _resume(checkpoints: list[Path], fingerprints: list[str], models: list[Model], optimizer, scheduler,
            samplers: list[BatchSampler], plan: NoisePlan, with_live: bool) -> tuple[int, list]:
    """The step every member's checkpoint is at (their states loaded) and their curves' snapshots, or
    ``(0, [])`` (stale ones removed; one without curves when curves are kept cannot resume them)."""
    states = [load_torch(c) if c.is_file() else None for c in checkpoints]
    ok = all(s is not None and s.get("fingerprint") == f and (not with_live or s.get("live") is not None)
             for s, f in zip(states, fingerprints))
    if not ok or len({s["step"] for s in states}) != 1:
        for c, s in zip(checkpoints, states):
            if s is not None:
                c.unlink()
        return 0, []
    for m, s in zip(models, states):
        with torch.no_grad():
            for k, v in m.state_dict().items():
                v.copy_(s["model"][k])  # into the stacked slice the member's tensor views
    optimizer.load_state_dict(_stack_optimizer_states([s["optimizer"] for s in states]))
    scheduler.load_state_dict(states[0]["scheduler"])
    for sampler, s in zip(samplers, states):
        sampler.load_state_dict(s["sampler"])
    plan.set_states([s["torch_rng"] if s.get("cuda_rng") is None else s["cuda_rng"][0] for s in states])
    return int(states[0]["step"]), [s["live"] for s in states]
