"""``dvc repro`` on several workers: the stages DVC would run, recorded in ``dvc.lock`` as DVC records them.

DVC 3.67 runs the stages of one workspace one at a time.  Two ``dvc repro`` processes cannot share
the work either: each holds the repository lock except while a stage's command runs, and DVC's
per-path lock then *refuses* (it does not wait) a second process that checks a stage upstream of a
running one — every per-run chain shares its pretraining stage.  So this runner drives DVC's own
objects (through :mod:`priorlab.dvc_adapter`) from one process, holding DVC's repository lock for
its whole run:

* the stage graph is DVC's (``repo.index.graph``), optionally cut to ``targets`` and their upstream,
  as ``dvc repro TARGETS`` does;
* a stage is considered once every stage it depends on has finished, and checked with DVC's
  ``Stage.changed`` at that moment — the check ``dvc repro`` makes when it reaches the stage, so a
  stage whose upstream reran without changing its outputs is skipped, exactly as in a serial run;
* a changed stage is restored from DVC's run-cache when DVC would restore it; otherwise its outputs
  are removed as DVC removes them (persistent ones kept), its command runs in a subprocess on a free
  worker, and when it exits 0 DVC saves and commits it (``Stage.save``/``Stage.commit``) and its
  entry is written to ``dvc.lock`` (``ProjectFile.dump_stages``, batched);
* a failing command stops new launches; the running ones finish and are recorded; exit status 1.

Outputs are those of a serial ``dvc repro``: the same commands with the same inputs, and the torch
thread count of a stage comes from ``params.yaml`` (``threads``), never from the number of workers.
Each worker may be pinned to GPUs (``--gpus 0,1``: worker *k* gets ``CUDA_VISIBLE_DEVICES`` = the
*k*-th entry), which spreads the paper profile's runs over the GPUs of one machine.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from priorlab import dvc_adapter
from priorlab.dvc_adapter import TESTED_DVC, parse_params_once, require_tested_dvc  # noqa: F401  (re-exported)
from priorlab.errors import UserError

HISTORY = Path(".dvc") / "tmp" / "priorlab-stage-walls.json"
"""Wall time of each stage's last run (written by the runner; DVC's own tmp folder, not tracked).
The runner starts the ready stage with the longest remaining path first (critical-path list
scheduling), so long independent stages — the in-process studies — do not end up last."""

LOCK_FLUSH_S = 20.0
"""Finished stages are written to ``dvc.lock`` at most this long after they end (DVC rewrites the
whole file for every dump, about a second on the cpu profile), and always before the runner exits."""


@dataclass
class Outcome:
    ran: list[str] = field(default_factory=list)
    restored: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    wall_s: dict[str, float] = field(default_factory=dict)
    max_rss_mib: dict[str, float] = field(default_factory=dict)
    total_s: float = 0.0
    jobs: int = 1

    def timings(self) -> dict:
        """What ``--timings`` writes: per stage that ran, its wall time and peak RSS."""
        return {"jobs": self.jobs, "total_wall_s": round(self.total_s, 2),
                "stages": {n: {"wall_s": round(self.wall_s[n], 2), "max_rss_mib": round(self.max_rss_mib[n], 1)}
                           for n in self.ran if n in self.wall_s},
                "restored": self.restored, "up_to_date": len(self.skipped), "failed": self.failed}


def worker_envs(jobs: int, gpus: Sequence[str] | None) -> list[dict[str, str]]:
    """The environment additions of each worker slot (``CUDA_VISIBLE_DEVICES`` per slot with ``gpus``)."""
    if jobs < 1:
        raise ValueError(f"jobs must be at least 1, got {jobs}")
    if gpus:
        if len(gpus) < jobs:
            raise ValueError(f"--gpus names {len(gpus)} device(s) for {jobs} workers; give one per worker")
        return [{"PRIORLAB_WORKER": str(k), "CUDA_VISIBLE_DEVICES": gpus[k]} for k in range(jobs)]
    return [{"PRIORLAB_WORKER": str(k)} for k in range(jobs)]


class _Run:
    """One scheduling pass over DVC's stage graph (see the module docstring)."""

    def __init__(self, repo, todo: set, envs: list[dict[str, str]], dry: bool, log):
        self.repo, self.todo, self.envs, self.dry, self.log = repo, todo, envs, dry, log
        self.upstream = {s: ups & todo for s, ups in dvc_adapter.upstream(repo, todo).items()}
        self.rank = critical_path_rank(todo, self.upstream, _read_history(repo.root_dir))
        self.done: set = set()
        self.running: dict = {}  # stage -> (Popen, slot, start)
        self.free = list(range(len(envs)))
        self.unflushed: list = []
        self.last_flush = time.monotonic()
        self.stop = False
        self.out = Outcome()

    def flush(self) -> None:
        """Write the finished stages' entries to ``dvc.lock`` in one dump."""
        if self.unflushed:
            dvc_adapter.write_lock(self.unflushed)
            self.unflushed.clear()
        self.last_flush = time.monotonic()

    def _finish(self, stage, how: str) -> None:
        getattr(self.out, how).append(stage.addressing)
        self.done.add(stage)

    def _start(self, stage) -> None:
        """Skip, restore or launch one stage whose upstream has finished."""
        name = stage.addressing
        if not dvc_adapter.changed(stage, self.upstream[stage]):
            return self._finish(stage, "skipped")
        if self.dry:
            self.log(f"stale: {name}: {stage.cmd}")
            return self._finish(stage, "ran")
        # what `dvc repro` tries first: a run with these inputs in the run-cache (else the outputs are gone)
        if dvc_adapter.restore(self.repo, stage):
            self.unflushed.append(stage)
            self.log(f"restored {name} from the run-cache")
            return self._finish(stage, "restored")
        slot = self.free.pop(0)
        self.log(f"[worker {slot}] running {name}: {stage.cmd}")
        proc = subprocess.Popen(stage.cmd, shell=True, cwd=stage.wdir, env={**os.environ, **self.envs[slot]})
        self.running[stage] = (proc, slot, time.monotonic())

    def _reap(self) -> None:
        """Record the stages whose command has exited."""
        for stage, (proc, slot, start) in list(self.running.items()):
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)  # like Popen.poll, with the child's peak RSS
            if pid == 0:
                continue
            proc.returncode = os.waitstatus_to_exitcode(status)
            self.out.max_rss_mib[stage.addressing] = usage.ru_maxrss / 1024
            del self.running[stage]
            self.free = sorted(self.free + [slot])
            name = stage.addressing
            self.out.wall_s[name] = time.monotonic() - start
            if proc.returncode != 0:
                self.log(f"error: stage {name} failed (exit status {proc.returncode}); "
                         "finishing the running stages, starting no new ones")
                self.out.failed.append(name)
                self.stop = True
                continue
            dvc_adapter.save_run(stage)
            self.unflushed.append(stage)
            self._finish(stage, "ran")
            self.log(f"[worker {slot}] finished {name} in {self.out.wall_s[name]:.1f} s")

    def loop(self) -> Outcome:
        while True:
            pending = self.todo - self.done - set(self.running)
            ready = sorted((s for s in pending if self.upstream[s] <= self.done),
                           key=lambda s: (-self.rank[s], s.addressing))
            for stage in ready:
                if self.stop or not self.free:
                    break
                self._start(stage)
            if not self.running:
                if self.stop or not (self.todo - self.done):
                    return self.out
                continue  # stages skipped just now may have made others ready
            time.sleep(0.05)
            self._reap()
            if time.monotonic() - self.last_flush > LOCK_FLUSH_S:
                self.flush()


BENCH = Path("reports") / "bench.json"
"""Committed pipeline profile (``make bench-pipeline``): its mean wall per stage kind stands in for
stages this workspace has never run, so a fresh clone schedules the long studies early too."""


def _read_json(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _read_history(root: str) -> dict[str, float]:
    """Last wall per stage name, and ``kind:<kind>`` -> mean wall per stage kind from the bench record."""
    walls: dict[str, float] = {}
    bench = _read_json(Path(root) / BENCH)
    kinds = bench.get("pipeline", {}).get("by_kind", {}) if isinstance(bench, dict) else {}
    for kind, row in kinds.items():
        if isinstance(row, dict) and row.get("n"):
            walls[f"kind:{kind}"] = float(row["sum_wall_s"]) / row["n"]
    history = _read_json(Path(root) / HISTORY)
    if isinstance(history, dict):
        walls.update({str(k): float(v) for k, v in history.items() if isinstance(v, (int, float))})
    return walls


def _write_history(root: str, walls: dict[str, float]) -> None:
    if walls:
        path = Path(root) / HISTORY
        path.parent.mkdir(parents=True, exist_ok=True)
        old = _read_json(path)
        old = old if isinstance(old, dict) else {}
        path.write_text(json.dumps({**old, **{k: round(v, 2) for k, v in walls.items()}}, indent=1, sort_keys=True))


def critical_path_rank(stages, upstream: dict, walls: dict[str, float], default_s: float = 1.0) -> dict:
    """Each stage's wall plus the longest chain of walls downstream of it (the classic list-scheduling
    priority).  A stage's wall: its own last one, else its kind's (``kind:train``), else ``default_s``."""
    downstream: dict = {s: [] for s in stages}
    for s, ups in upstream.items():
        for u in ups:
            downstream[u].append(s)
    rank: dict = {}

    def visit(s):
        if s not in rank:
            own = walls.get(s.addressing, walls.get("kind:" + s.addressing.split("@")[0], default_s))
            rank[s] = own + max((visit(d) for d in downstream[s]), default=0.0)
        return rank[s]

    for s in stages:
        visit(s)
    return rank


def reproduce(targets: Sequence[str] | None = None, jobs: int = 2, gpus: Sequence[str] | None = None,
              root: str | Path = ".", dry: bool = False, log=print) -> Outcome:
    """Reproduce the pipeline of ``root`` (or ``targets`` and their upstream) on ``jobs`` workers."""
    require_tested_dvc()  # before anything else, as the adapter does before it touches DVC
    envs = worker_envs(jobs, gpus)
    with dvc_adapter.open_repo(root) as repo, parse_params_once():
        run = _Run(repo, set(dvc_adapter.select(repo, targets)), envs, dry, log)
        run.out.jobs = jobs
        start = time.monotonic()
        try:
            return run.loop()
        finally:
            run.flush()
            run.out.total_s = time.monotonic() - start
            _write_history(repo.root_dir, run.out.wall_s)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m priorlab.repro", description=__doc__.splitlines()[0])
    parser.add_argument("targets", nargs="*", help="stages to reproduce with their upstream (default: all)")
    parser.add_argument("-j", "--jobs", type=int, default=2, help="workers (default 2)")
    parser.add_argument("--gpus", default=None,
                        help="comma-separated CUDA devices, one per worker (sets CUDA_VISIBLE_DEVICES)")
    parser.add_argument("--dry", action="store_true", help="print the stages that are stale now, run nothing")
    parser.add_argument("--timings", default=None, help="write each stage's wall time and peak RSS (JSON) here")
    ns = parser.parse_args(argv)
    gpus = [g.strip() for g in ns.gpus.split(",") if g.strip()] if ns.gpus else None
    try:
        worker_envs(ns.jobs, gpus)  # validates before DVC starts
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    start = time.monotonic()
    try:
        outcome = reproduce(ns.targets, ns.jobs, gpus, dry=ns.dry, log=lambda m: print(m, flush=True))
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if ns.timings:
        Path(ns.timings).parent.mkdir(parents=True, exist_ok=True)
        Path(ns.timings).write_text(json.dumps(outcome.timings(), indent=2) + "\n")
    print(f"{len(outcome.ran)} stage(s) {'stale' if ns.dry else 'ran'}, {len(outcome.restored)} restored, "
          f"{len(outcome.skipped)} up to date, {len(outcome.failed)} failed; "
          f"{time.monotonic() - start:.1f} s on {ns.jobs} worker(s)", flush=True)
    return 1 if outcome.failed else 0


if __name__ == "__main__":
    sys.exit(main())
