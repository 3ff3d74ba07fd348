"""Spread the runs of a profile over machines that share a DVC remote.

Every machine checks out the same commit (same code, same ``params.yaml``) and adds the same DVC
remote; then::

    python -m stagerun.shard run --shard 0/3 --push     # machine 0; 1/3 and 2/3 on the others
    python -m stagerun.shard collect                    # any machine, once the shards have pushed

``run`` reproduces its shard (``python -m stagerun.repro`` on ``-j`` workers, ``--gpus`` one per
worker) and pushes it; ``collect`` fetches what the shards pushed, restores every stage whose
inputs match a pushed run from DVC's run-cache ("restored <stage> from the run-cache") and runs
only what no shard holds: the experiment stages, the figures and the report (and any run no shard
pushed).  Commit ``dvc.lock`` and the git-tracked outputs on that machine afterwards.

**What a shard is** (:func:`split`).  Every run is in one shard, and every ``data@``, ``pretrain@``
and ``prior_init@`` stage is computed by exactly one shard, its *owner*; a shard that trains runs
of a setup it does not own waits until the owner has pushed the setup's stages and restores them
(``needs``).  Computing a stage twice is not only waste: GPU kernels (and conv nets on different
CPUs) are not bit-reproducible, two pretrainings of a setup would differ, and the runs downstream
of the copy the collector does not restore would not match the run-cache and would train again.
A setup (pretraining and runs) is one piece of work unless it costs more than a shard's fair
share, then its runs are cut into that many pieces; pieces go largest first to the least-loaded
shard, by an estimate of their training cost (steps times a per-kind cost per step).  The split
depends only on ``params.yaml``: the same on every machine, whatever the order of its entries.
A shard runs in three steps, each pushed before the next (so no shard waits for long): the
``data@`` stages it owns (and :data:`EVERY_SHARD`); the ``pretrain@``/``prior_init@`` stages it owns; its runs.

**What is pushed.**  ``dvc push --run-cache`` sends the run-cache entries and the cached outputs of
``dvc.lock``, not the metrics and curves that are in git (``cache: false``), which a run-cache
entry also names and without which no other machine can restore the stage.  :func:`push` sends
every object that the local run-cache entries name, as DVC 2 did; :func:`fetch` takes the remote's
entries and the objects of those that belong to a stage of this pipeline.  DVC restores a stage
only if it has no ``persist: true`` output and no ``cache: false`` output outside ``metrics:`` and
``plots:``; ``dvc.yaml`` declares the per-run stages so.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from stagerun import dvc_adapter
from priorlab.errors import UserError

WAIT_S = 12 * 3600.0
"""How long a shard waits for upstream stages another shard computes (a paper-profile pretraining is
100k steps: minutes to an hour on one GPU)."""

POLL_S = 60.0

EVERY_SHARD = ("code", "setup_runs", "param_slices")
"""Stages every shard computes itself, first: cheap and deterministic (files written from the library's
source and the params), and read by the stages a shard restores (the run-cache key includes them)."""


class ShardError(UserError, ValueError):
    """A bad shard spec or a missing remote: one line naming what to change."""


@dataclass(frozen=True)
class Shard:
    """What one machine does: train and evaluate ``runs``; compute the upstream stages it ``owns``
    (pushed for the shards that ``need`` them); restore the stages it ``needs`` from the remote."""

    index: int
    count: int
    runs: tuple[str, ...]
    owns: tuple[str, ...]
    needs: dict[str, int]  # upstream stage -> the shard that computes it
    cost: float
    cells: tuple[str, ...] = ()  # the study cells it trains (:func:`cell_costs`)

    @property
    def name(self) -> str:
        return f"{self.index}/{self.count}"

    @property
    def targets(self) -> list[str]:
        """The DVC stages the shard reproduces (with everything upstream of them)."""
        return [f"evaluate@{run}" for run in self.runs] + list(self.cells)


def parse_shard(text: str) -> tuple[int, int]:
    """``"i/n"`` → ``(i, n)``: shard ``i`` of ``n``, counted from 0."""
    parts = str(text).strip().split("/")
    if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
        raise ShardError(f"--shard {text!r}: expected INDEX/COUNT, e.g. 0/2 (shards are counted from 0)")
    index, count = (int(p) for p in parts)
    if count < 1:
        raise ShardError(f"--shard {text!r}: the count must be at least 1")
    if index >= count:
        raise ShardError(f"--shard {text!r}: the index must be 0..{count - 1} (shards are counted from 0)")
    return index, count


def _step_cost(params, setup: str, model: str) -> float:
    """A step's cost relative to a VAE's on MLPs, as the model kind and the nets declare it."""
    return params.model(model).step_cost * params.setup(setup).step_cost


def run_cost(params, run: str) -> float:
    """Estimated training cost of one run (VAE-step equivalents)."""
    r = params.run(run)
    steps = params.model(r.model).train_steps or params.train.steps
    return max(steps, 1) * _step_cost(params, r.setup, r.model)


def pretrain_cost(params, setup: str) -> float:
    """Estimated cost of a setup's pretraining (0 for a setup that is not pretrained)."""
    s = params.setup(setup)
    if not s.pretraining:
        return 0.0
    spec = params.model(s.pretrain_model)
    return (spec.pretrain_steps or params.pretrain.steps) * _step_cost(params, setup, s.pretrain_model)


def cell_costs(params) -> dict[str, tuple[str | None, float]]:
    """The study cells of ``params`` as the studies declare them (:func:`priorlab.pipeline.study_cells`):
    stage -> (the data set stage it reads, None when it builds its own data; its cost in VAE steps)."""
    from priorlab.pipeline import study_cells  # lazy: torch + yaml, ~1.8 s at import stagerun.shard

    return {cell.stage: (cell.dataset, cell.cost) for cell in study_cells(params)}


def _lpt(sizes: dict, bins: int, loads: list[float] | None = None) -> dict:
    """Longest processing time first: each item (largest first, ties by key) to the least-loaded bin."""
    loads = list(loads) if loads is not None else [0.0] * bins
    where = {}
    for item in sorted(sizes, key=lambda k: (-sizes[k], k)):
        b = min(range(bins), key=lambda i: (loads[i], i))
        where[item] = b
        loads[b] += sizes[item]
    return where


def split(params, count: int) -> list[Shard]:
    """The ``count`` shards of the runs of ``params``.

    Every run and every study cell (:func:`cell_costs`) is in exactly one shard, and every ``data@``,
    ``pretrain@`` and ``prior_init@`` stage is owned by exactly one.  A setup is one piece (its pretraining and its runs) unless it costs
    more than a shard's fair share (total / count): then its runs are cut into that many pieces of
    about equal cost, the pretraining in the first.  Pieces go largest first to the least-loaded
    shard; then the study cells, largest first, to the least-loaded shard.  The shard with a setup's
    first piece owns the setup's ``pretrain@``/``prior_init@``; the
    owner of the costliest setup of a data set owns its ``data@`` (data sets that no setup uses,
    read by the in-process studies, go round the shards by name).
    """
    if count < 1:
        raise ShardError(f"the number of shards must be at least 1, got {count}")
    by_setup: dict[str, list[str]] = {s: [] for s in params.setups}
    for run in sorted(params.runs):
        by_setup[params.runs[run].setup].append(run)
    cost = {r: run_cost(params, r) for r in params.runs}
    pre = {s: pretrain_cost(params, s) for s in by_setup}
    cells = cell_costs(params)
    share = (sum(cost.values()) + sum(pre.values()) + sum(c for _, c in cells.values())) / count
    pieces: dict[tuple[str, int], float] = {}
    members: dict[tuple[str, int], list[str]] = {}
    for setup, runs in sorted(by_setup.items()):
        setup_total = pre[setup] + sum(cost[r] for r in runs)
        k = max(1, min(len(runs), math.ceil(setup_total / share - 1e-9))) if share > 0 else 1
        where = _lpt({r: cost[r] for r in runs}, k, [pre[setup]] + [0.0] * (k - 1))
        for j in range(k):
            members[(setup, j)] = sorted(r for r in runs if where[r] == j)
            pieces[(setup, j)] = sum(cost[r] for r in members[(setup, j)]) + (pre[setup] if j == 0 else 0.0)
    placed = _lpt(pieces, count)
    loads = [sum(c for p, c in pieces.items() if placed[p] == k) for k in range(count)]
    cell_shard = _lpt({stage: c for stage, (_, c) in cells.items()}, count, loads)
    owner = {setup: placed[(setup, 0)] for setup in by_setup}
    setup_total = {s: pre[s] + sum(cost[r] for r in runs) for s, runs in by_setup.items()}
    data_owner: dict[str, int] = {}
    for setup in sorted(by_setup, key=lambda s: (-setup_total[s], s)):
        data_owner.setdefault(params.setup(setup).dataset, owner[setup])
    for i, dataset in enumerate(sorted(set(params.datasets) - set(data_owner))):
        data_owner[dataset] = i % count
    shards = []
    for k in range(count):
        runs = sorted(r for p, where in placed.items() if where == k for r in members[p])
        owned = sorted(s for s, o in owner.items() if o == k)
        owns = [f"data@{d}" for d, o in sorted(data_owner.items()) if o == k]
        owns += [f"{stage}@{s}" for s in owned for stage in ("pretrain", "prior_init")]
        needs: dict[str, int] = {}
        for setup in sorted({params.runs[r].setup for r in runs} | set(owned)):
            needs[f"data@{params.setup(setup).dataset}"] = data_owner[params.setup(setup).dataset]
            if setup not in owned:
                needs[f"pretrain@{setup}"] = needs[f"prior_init@{setup}"] = owner[setup]
        mine = sorted(stage for stage, where in cell_shard.items() if where == k)
        for stage in mine:
            if cells[stage][0] is not None:
                needs[f"data@{cells[stage][0]}"] = data_owner[cells[stage][0]]
        needs = {stage: o for stage, o in sorted(needs.items()) if o != k}
        load = sum(c for p, c in pieces.items() if placed[p] == k) + sum(cells[stage][1] for stage in mine)
        shards.append(Shard(k, count, tuple(runs), tuple(owns), needs, load, tuple(mine)))
    return shards


# --------------------------------------------------------------------------- DVC: remote and run-cache
# (every call into DVC goes through stagerun.dvc_adapter)


def _remote(repo, remote: str | None) -> str:
    name = remote or dvc_adapter.default_remote(repo)
    if not name:
        raise ShardError("no default DVC remote: add the shared one on every machine, "
                         "e.g. `dvc remote add -d store s3://bucket/priorlab` (or pass --remote NAME)")
    if not dvc_adapter.has_remote(repo, name):
        raise ShardError(f"DVC remote {name!r} is not configured (`dvc remote list`)")
    return name


def push(root: str | Path = ".", remote: str | None = None, jobs: int | None = None, log=print) -> int:
    """Push every object the local run-cache entries name (cached and git-tracked outputs), then the
    entries: an entry reaches the remote only after its objects, so a push cut short (a killed job)
    leaves objects no entry names yet, never an entry another machine cannot restore."""
    with dvc_adapter.open_repo(root) as repo:
        name = _remote(repo, remote)
        entries = dvc_adapter.run_cache_entries(repo)
        moved, failed = dvc_adapter.transfer_objects(repo, entries, name, jobs, "push")
        if failed:
            raise UserError(f"{failed} object(s) could not be pushed to {name!r}; run the command again")
        dvc_adapter.push_entries(repo, name)
    log(f"pushed {len(entries)} run-cache entries and {moved} new object(s) to {name!r}")
    return moved


def fetch(root: str | Path = ".", remote: str | None = None, jobs: int | None = None, cmds: set[str] | None = None,
          log=print) -> int:
    """Fetch the remote's run-cache entries and the objects of those whose command is a stage of this
    pipeline (``cmds``: of these stages only).  Returns the number of entries they cover."""
    with dvc_adapter.open_repo(root) as repo:
        name = _remote(repo, remote)
        dvc_adapter.pull_entries(repo, name)
        wanted = cmds if cmds is not None else {s.cmd for s in dvc_adapter.command_stages(repo)}
        entries = [(k, v) for k, v in dvc_adapter.run_cache_entries(repo)
                   if dvc_adapter.entry_cmd(repo, k, v) in wanted]
        moved, failed = dvc_adapter.transfer_objects(repo, entries, name, jobs, "pull")
        conflicts = _conflicts(repo, entries)
    log(f"fetched {moved} object(s) for {len(entries)} run-cache entries from {name!r}")
    if failed:
        log(f"warning: {failed} object(s) named by run-cache entries are not on {name!r}; "
            "their stages will run here")
    for cmd in conflicts:
        log(f"warning: several runs of `{cmd}` with the same inputs gave different outputs; "
            "DVC restores the newest, and stages downstream of the others will run again")
    return len(entries)


def _conflicts(repo, entries) -> list[str]:
    by_key: dict[str, list[str]] = {}
    for key, value in entries:
        by_key.setdefault(key, []).append(value)
    return sorted({dvc_adapter.entry_cmd(repo, k, vs[0]) or k for k, vs in by_key.items() if len(vs) > 1})


def _stage_cmds(root: str | Path, targets: Sequence[str]) -> set[str]:
    """Commands of ``targets`` and every stage upstream of them."""
    with dvc_adapter.open_repo(root, lock=False) as repo:
        return {s.cmd for s in _closure(repo, targets) if s.cmd}


def _closure(repo, targets: Sequence[str]) -> list:
    """``targets`` and every stage upstream of them, upstream first (none without targets)."""
    if not targets:
        return []
    try:
        return dvc_adapter.select(repo, targets)
    except dvc_adapter.UnknownStageError as exc:
        raise ShardError(f"dvc.yaml has no stage {exc.stage!r}: the shards expect data@, pretrain@, "
                         "prior_init@ and evaluate@ stages named after the params' entries") from None


def restore_only(root: str | Path, targets: Sequence[str], log=None) -> tuple[list[str], list[str]]:
    """Bring ``targets`` and their upstream up to date from the (local) run-cache, running nothing,
    as ``dvc repro`` restores a stage.  Returns the stages restored and those that could not be."""
    with dvc_adapter.open_repo(root) as repo:
        stages = _closure(repo, targets)
        upstream = dvc_adapter.upstream(repo, stages)
        missing, restored = set(), []
        for stage in stages:
            if upstream[stage] & missing:
                missing.add(stage)
                continue
            if not dvc_adapter.changed(stage, upstream[stage]):
                continue
            if not dvc_adapter.restore(repo, stage):  # its outputs are gone, as `dvc repro` removes them
                missing.add(stage)
                continue
            restored.append(stage)
            if log is not None:
                log(f"restored {stage.addressing} from the run-cache")
        dvc_adapter.write_lock(restored)
        return [s.addressing for s in restored], sorted(s.addressing for s in missing)


def wait_for(root: Path, stages: dict[str, int], count: int, remote: str | None, timeout: float,
             interval: float, log=print) -> None:
    """Restore ``stages`` (stage -> the shard computing it) from the remote once their shards have
    pushed them; poll every ``interval`` seconds, give up after ``timeout``."""
    deadline = time.monotonic() + timeout
    cmds = _stage_cmds(root, list(stages))
    while True:
        fetch(root, remote, cmds=cmds, log=lambda m: None)
        missing = [s for s in restore_only(root, list(stages), log=log)[1] if s in stages]
        if not missing:
            log(f"restored {', '.join(sorted(stages))} (pushed by shard(s) "
                f"{', '.join(sorted({f'{o}/{count}' for o in stages.values()}))})")
            return
        owners = ", ".join(sorted({f"{stages[s]}/{count}" for s in missing}))
        if time.monotonic() >= deadline:
            raise ShardError(f"gave up after {timeout:.0f} s waiting for {', '.join(missing)}: shard(s) {owners} "
                             "compute them; run `python -m stagerun.shard run --shard I/N --push` there "
                             "(same commit, same remote), or raise --wait")
        log(f"waiting for {', '.join(missing)} from shard(s) {owners} (next look in {interval:.0f} s)")
        time.sleep(interval)


# --------------------------------------------------------------------------- commands


def _load(root: Path):
    from priorlab.config import load_params  # lazy: yaml, ~96 ms at import stagerun.shard

    return load_params(root / "params.yaml")


def describe(shard: Shard, total: float) -> str:
    lines = [f"shard {shard.name}: {len(shard.runs)} run(s), {len(shard.cells)} study cell(s), estimated cost {shard.cost / (total or 1):.0%} of the total"]
    lines += [f"  run   {run}" for run in shard.runs]
    lines += [f"  cell  {stage}" for stage in shard.cells]
    lines += [f"  owns  {stage}" for stage in shard.owns]
    lines += [f"  needs {stage} (from shard {o}/{shard.count})" for stage, o in shard.needs.items()]
    return "\n".join(lines)


def cmd_plan(root: Path, count: int, index: int | None, as_json: bool) -> int:
    shards = split(_load(root), count)
    total = sum(s.cost for s in shards)
    chosen = shards if index is None else [shards[index]]
    if as_json:
        print(json.dumps([{"shard": s.name, "runs": list(s.runs), "cells": list(s.cells), "owns": list(s.owns),
                           "needs": {k: f"{o}/{count}" for k, o in s.needs.items()}, "targets": s.targets,
                           "cost_share": round(s.cost / (total or 1), 4)} for s in chosen], indent=2))
    else:
        print("\n".join(describe(s, total) for s in chosen))
    return 0


def cmd_run(root: Path, index: int, count: int, do_push: bool, remote: str | None, jobs: int,
            gpus: Sequence[str] | None, dry: bool, wait: float, interval: float) -> int:
    """One shard, in three steps, each pushed with ``--push`` before the next: the ``data@`` stages it
    owns; the ``pretrain@``/``prior_init@`` stages it owns (after restoring foreign data they read);
    its runs (after restoring the foreign setups they start from)."""
    from stagerun.repro import exit_status, reproduce  # lazy: +3 modules, ~29 ms at import stagerun.shard

    def log(message: str) -> None:
        print(message, flush=True)

    shards = split(_load(root), count)
    shard = shards[index]
    log(describe(shard, sum(s.cost for s in shards)))
    if dry:
        outcome = reproduce(shard.targets + [s for s in shard.owns], jobs, gpus, root=root, dry=True, log=log)
        log(f"shard {shard.name}: {len(outcome.ran)} stage(s) stale and {len(outcome.downstream)} downstream of them "
            "(restored or run when it runs)")
        return 0
    if not shard.runs and not shard.owns and not shard.cells:
        log(f"shard {shard.name} holds nothing: more shards than pieces of work")
        return 0
    needed_by_others = {st for other in shards if other.index != index for st in other.needs if st in shard.owns}
    if shard.needs or do_push:
        _remote_check(root, remote)
    if needed_by_others and not do_push:
        log(f"warning: shard(s) {', '.join(sorted({f'{o.index}/{count}' for o in shards if set(o.needs) & set(shard.owns)}))} "
            f"wait for {', '.join(sorted(needed_by_others))}, which only this shard computes: run it with --push")
    if _has_remote(root, remote):  # what this shard (an earlier attempt) or another already pushed
        fetch(root, remote, cmds=_stage_cmds(root, shard.targets + list(shard.owns)), log=log)

    own_data = [s for s in shard.owns if s.startswith("data@")]
    own_setups = [s for s in shard.owns if s.startswith("prior_init@")]
    foreign_data = {s: o for s, o in shard.needs.items() if s.startswith("data@")}
    steps = [(own_data + list(EVERY_SHARD), {}), (own_setups, foreign_data), (shard.targets, shard.needs)]
    ran = restored = 0
    for targets, needs in steps:
        if needs:
            wait_for(root, needs, count, remote, wait, interval, log=log)
        if not targets:
            continue
        early, _ = restore_only(root, targets, log=log)  # what an earlier attempt of this shard pushed
        outcome = reproduce(targets, jobs, gpus, root=root, log=log)
        ran, restored = ran + len(outcome.ran), restored + len(early) + len(outcome.restored)
        if outcome.signal:  # cancelled, pre-empted, Ctrl-C: no further step; what finished is pushed
            # said first: a scheduler's SIGKILL may end the push (a cut push leaves no entry without its objects)
            log(f"shard {shard.name}: {interrupted(outcome)}; run it again to continue"
                + ("; pushing what finished" if do_push else ""))
            if do_push:
                push(root, remote, log=log)
            return exit_status(outcome.signal)
        if outcome.failed:
            log(f"shard {shard.name}: failed: {', '.join(outcome.failed)}")
            return 1
        if do_push:  # also what an earlier attempt made but did not push: other shards may wait for it
            push(root, remote, log=log)
    log(f"shard {shard.name}: done ({ran} stage(s) ran, {restored} restored from the run-cache, "
        f"{len(shard.needs)} from other shards)")
    return 0


def interrupted(outcome) -> str:
    """What a run stopped by a signal left: the stages it stopped (the finished ones are recorded)."""
    import signal

    stopped = f" ({', '.join(outcome.stopped)})" if outcome.stopped else ""
    return (f"interrupted ({signal.Signals(outcome.signal).name}): stopped {len(outcome.stopped)} running "
            f"stage(s){stopped}, recorded {len(outcome.ran)} finished")


def _has_remote(root: str | Path, remote: str | None) -> bool:
    with dvc_adapter.open_repo(root, lock=False) as repo:
        return bool(remote or dvc_adapter.default_remote(repo))


def _remote_check(root: Path, remote: str | None) -> None:
    with dvc_adapter.open_repo(root, lock=False) as repo:
        _remote(repo, remote)


def cmd_collect(root: Path, remote: str | None, jobs: int, gpus: Sequence[str] | None, do_push: bool) -> int:
    """Fetch every pushed run of this pipeline, then reproduce everything (restoring what was pushed)."""
    from stagerun.repro import exit_status, reproduce  # lazy: +3 modules, ~29 ms at import stagerun.shard

    def log(message: str) -> None:
        print(message, flush=True)

    _load(root)  # params valid before anything is fetched
    fetch(root, remote, log=log)
    with dvc_adapter.open_repo(root, lock=False) as repo:
        every = [s.addressing for s in dvc_adapter.command_stages(repo)]
    restored, _ = restore_only(root, every, log=log)  # everything the shards pushed; the runner runs the rest
    outcome = reproduce(None, jobs, gpus, root=root, log=log)
    if outcome.signal:
        log(f"collect: {interrupted(outcome)}; run it again to continue")
        return exit_status(outcome.signal)
    outcome.skipped = [s for s in outcome.skipped if s not in restored]
    outcome.restored[:0] = restored
    trained = sorted(s for s in outcome.ran if s.split("@")[0] in ("pretrain", "prior_init", "train"))
    log(f"collect: {len(outcome.restored)} stage(s) restored from the run-cache, {len(outcome.ran)} ran, "
        f"{len(outcome.skipped)} up to date, {len(outcome.failed)} failed")
    if trained:
        log(f"note: {len(trained)} training stage(s) ran here, no shard had pushed them: {', '.join(trained)}")
    if outcome.failed:
        return 1
    if do_push:
        push(root, remote, log=log)
    log("next: commit the results here (git add dvc.lock metrics reports; git commit)")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stagerun.shard", description=__doc__.splitlines()[0])
    parser.add_argument("-C", "--root", default=".", help="project root (default: the current directory)")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("plan", help="print which setups and runs each shard holds")
    p.add_argument("--shards", type=int, required=False, help="number of shards (or give --shard I/N)")
    p.add_argument("--shard", help="only this shard, I/N (counted from 0)")
    p.add_argument("--json", action="store_true", help="machine-readable output")

    def workers(q):
        q.add_argument("-j", "--jobs", type=int, default=2, help="stages side by side (default 2)")
        q.add_argument("--gpus", default=None, help="comma-separated CUDA devices, one per worker")
        q.add_argument("--remote", default=None, help="DVC remote (default: the default remote)")

    r = sub.add_parser("run", help="reproduce one shard's runs (and, with --push, push them)")
    r.add_argument("--shard", required=True, help="I/N: shard I of N, counted from 0")
    r.add_argument("--push", action="store_true", help="push the results and their run-cache entries")
    r.add_argument("--dry", action="store_true", help="print the stale stages of the shard, run nothing")
    r.add_argument("--wait", type=float, default=WAIT_S,
                   help=f"seconds to wait for the stages other shards compute (default {WAIT_S:.0f})")
    r.add_argument("--poll", type=float, default=POLL_S, help=f"seconds between looks at the remote (default {POLL_S:.0f})")
    workers(r)

    c = sub.add_parser("collect", help="fetch every pushed run, reproduce the rest and the report")
    c.add_argument("--push", action="store_true", help="push what ran here too")
    workers(c)

    ns = parser.parse_args(argv)
    root = Path(ns.root).resolve()
    try:
        gpus = [g.strip() for g in ns.gpus.split(",") if g.strip()] if getattr(ns, "gpus", None) else None
        if getattr(ns, "jobs", 1) < 1:
            raise ShardError(f"--jobs must be at least 1, got {ns.jobs}")
        if gpus is not None and len(gpus) < ns.jobs:
            raise ShardError(f"--gpus names {len(gpus)} device(s) for {ns.jobs} workers; give one per worker")
        if ns.command == "plan":
            if ns.shard:
                index, count = parse_shard(ns.shard)
            elif ns.shards is not None:
                index, count = None, ns.shards
                if count < 1:
                    raise ShardError(f"--shards must be at least 1, got {count}")
            else:
                raise ShardError("plan: give --shards N or --shard I/N")
            return cmd_plan(root, count, index, ns.json)
        dvc_adapter.require_tested_dvc()  # run and collect drive DVC's internals (restore, push of run-cache objects)
        if ns.command == "run":
            index, count = parse_shard(ns.shard)
            if ns.wait < 0 or ns.poll <= 0:
                raise ShardError("--wait must be >= 0 and --poll > 0 seconds")
            return cmd_run(root, index, count, ns.push, ns.remote, ns.jobs, gpus, ns.dry, ns.wait, ns.poll)
        return cmd_collect(root, ns.remote, ns.jobs, gpus, ns.push)
    except (UserError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # between the runner's runs (a wait, a push): nothing is half-recorded
        print("interrupted: run it again to continue (what was pushed stays pushed)", file=sys.stderr)
        return 130
    except Exception as exc:  # DVC's lock held by another process, ...: one line, as the runner's
        from stagerun.repro import debugging  # lazy: +3 modules, ~29 ms at import stagerun.shard

        line = dvc_adapter.user_situation(exc)
        if line is None or debugging():
            raise
        print(f"error: {line} (PRIORLAB_DEBUG=1 for the traceback)", file=sys.stderr)
        return 2


if __name__ == "__main__":
    os.environ.setdefault("DVC_NO_ANALYTICS", "1")
    sys.exit(main())
