"""A pipeline target on a machine without DVC (e.g. a lent GPU with torch only): export here, run there.

    python -m stagerun.plan export isa_experiments --out plan.json    # here: DVC resolves dvc.yaml
    python -m stagerun.plan run plan.json -j 4 --gpus 0,0,0,0         # there: no DVC needed

``export`` asks DVC (through :mod:`stagerun.dvc_adapter`) for the targets' stages and everything
upstream of them, upstream first, with each stage's command (``foreach`` / ``matrix`` and ``${...}``
already resolved), working directory, outputs and the stages it waits for, and writes them to a JSON
plan.  ``run`` removes a stage's outputs (persistent ones kept, as DVC does) and runs its command, in
dependency order on ``-j`` workers (``--gpus``: one ``CUDA_VISIBLE_DEVICES`` entry per worker, as
``make repro GPUS=...``), stops launching at the first failure and exits 1, and records each stage's
wall time (``--record``).  It imports nothing of DVC,
and the stage scripts do not either, so the outputs are those ``dvc repro`` would make; back on a
machine with DVC, ``dvc commit`` records them in ``dvc.lock``.

Every stage of the closure is in the plan (a bare machine has none of the upstream outputs; the data
stages synthesise or read from the package registries), unless ``--stale-only``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Sequence

from priorlab.errors import UserError

PLAN_VERSION = 2  # 2: each stage lists its persistent outputs (kept when it runs)


def export(targets: Sequence[str], root: str | Path = ".", stale_only: bool = False) -> dict:
    """The plan of ``targets`` (their stages and everything upstream, upstream first)."""
    from stagerun import dvc_adapter  # lazy: +1 module, ~6 ms at import stagerun.plan

    root = Path(root).resolve()
    with dvc_adapter.open_repo(root, lock=False) as repo:
        stages = dvc_adapter.select(repo, list(targets))
        ups = dvc_adapter.upstream(repo, stages)
        chosen = set(stages)
        if stale_only:
            done: set = set()
            chosen = set()
            for s in stages:
                if dvc_adapter.changed(s, ups[s] & done):
                    chosen.add(s)
                done.add(s)
        entries = []
        for s in stages:
            if s not in chosen:
                continue
            entries.append({"name": s.addressing, "cmd": s.cmd,
                            "wdir": os.path.relpath(s.wdir, root),
                            "after": sorted(u.addressing for u in ups[s] if u in chosen),
                            "outs": sorted(os.path.relpath(str(o.fs_path), root) for o in s.outs),
                            "persist": sorted(os.path.relpath(str(o.fs_path), root) for o in s.outs if o.persist)})
    return {"version": PLAN_VERSION, "targets": list(targets), "stages": entries}


def load_plan(path: str | Path) -> dict:
    try:
        plan = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise UserError(f"no plan file {path}: write one with `python -m stagerun.plan export TARGET --out {path}`") from None
    except json.JSONDecodeError as exc:
        raise UserError(f"{path} is not a plan (JSON: {exc.msg} at line {exc.lineno})") from None
    if not isinstance(plan, dict) or plan.get("version") != PLAN_VERSION or not isinstance(plan.get("stages"), list):
        raise UserError(f"{path} is not a version-{PLAN_VERSION} plan of `python -m stagerun.plan export`")
    names = [s["name"] for s in plan["stages"]]
    for i, s in enumerate(plan["stages"]):
        missing = [a for a in s["after"] if a not in names[:i]]
        if missing:
            raise UserError(f"{path}: stage {s['name']} waits for {missing[0]}, which does not come before it")
    return plan


def remove_outs(root: Path, stage: dict) -> None:
    """Delete a stage's outputs before its command runs, persistent ones kept, as ``dvc repro`` does:
    an output folder then holds only what this run wrote (no files of an earlier run or profile)."""
    for out in stage["outs"]:
        if out in stage["persist"]:
            continue
        path = root / out
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()


def run(plan: dict, root: str | Path = ".", jobs: int = 1, gpus: Sequence[str] | None = None,
        log=print) -> dict:
    """Execute ``plan`` in ``root`` on ``jobs`` workers; ``{"ran", "failed", "wall_s"}``."""
    from stagerun.repro import worker_envs  # lazy: +4 modules, ~31 ms at import stagerun.plan

    root = Path(root).resolve()
    envs = worker_envs(jobs, gpus)
    todo = list(plan["stages"])
    done: set[str] = set()
    running: dict[int, tuple[dict, subprocess.Popen, float]] = {}
    walls: dict[str, float] = {}
    failed: list[str] = []
    start = time.perf_counter()
    while todo or running:
        free = [k for k in range(jobs) if k not in running]
        ready = [s for s in todo if set(s["after"]) <= done] if not failed else []
        for slot, stage in zip(free, ready):
            todo.remove(stage)
            remove_outs(root, stage)
            log(f"[worker {slot}] running {stage['name']}: {stage['cmd']}")
            proc = subprocess.Popen(stage["cmd"], shell=True, cwd=root / stage["wdir"], env={**os.environ, **envs[slot]})
            running[slot] = (stage, proc, time.perf_counter())
        if not running:
            break  # a failure left the rest unlaunched
        time.sleep(0.05)
        for slot, (stage, proc, t0) in list(running.items()):
            if proc.poll() is None:
                continue
            del running[slot]
            walls[stage["name"]] = round(time.perf_counter() - t0, 2)
            if proc.returncode == 0:
                done.add(stage["name"])
                log(f"[worker {slot}] finished {stage['name']} in {walls[stage['name']]:.1f} s")
            else:
                failed.append(stage["name"])
                log(f"[worker {slot}] FAILED {stage['name']} (exit {proc.returncode}): no new stages are started")
    return {"ran": sorted(done), "failed": failed, "not_run": [s["name"] for s in todo],
            "wall_s": walls, "total_s": round(time.perf_counter() - start, 2), "jobs": jobs}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m stagerun.plan", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)
    ex = sub.add_parser("export", help="write the plan of TARGETS (needs DVC)")
    ex.add_argument("targets", nargs="+")
    ex.add_argument("--out", required=True)
    ex.add_argument("--stale-only", action="store_true", help="only the stages dvc repro would run now")
    rn = sub.add_parser("run", help="execute a plan (no DVC needed)")
    rn.add_argument("plan")
    rn.add_argument("-j", "--jobs", type=int, default=1)
    rn.add_argument("--gpus", help="comma-separated CUDA device per worker, e.g. 0,0,1,1")
    rn.add_argument("--record", help="write the walls and outcome as JSON here")
    args = ap.parse_args(argv)
    try:
        if args.command == "export":
            plan = export(args.targets, stale_only=args.stale_only)
            Path(args.out).write_text(json.dumps(plan, indent=2) + "\n")
            print(f"wrote {args.out}: {len(plan['stages'])} stage(s) for {', '.join(args.targets)}")
            return 0
        plan = load_plan(args.plan)
        gpus = args.gpus.split(",") if args.gpus else None
        try:
            outcome = run(plan, jobs=args.jobs, gpus=gpus, log=lambda m: print(m, flush=True))
        except ValueError as exc:
            raise UserError(str(exc)) from None
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.record:
        Path(args.record).write_text(json.dumps(outcome, indent=2) + "\n")
    print(f"{len(outcome['ran'])} stage(s) ran, {len(outcome['failed'])} failed, {len(outcome['not_run'])} not run; "
          f"{outcome['total_s']:.1f} s on {args.jobs} worker(s)")
    return 1 if outcome["failed"] or outcome["not_run"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
