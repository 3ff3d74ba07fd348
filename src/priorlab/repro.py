"""``dvc repro`` on several workers: the stages DVC would run, recorded in ``dvc.lock`` as DVC records them.

DVC 3.67 runs the stages of one workspace one at a time.  Two ``dvc repro`` processes cannot share
the work either: each holds the repository lock except while a stage's command runs, and DVC's
per-path lock then *refuses* (it does not wait) a second process that checks a stage upstream of a
running one — every per-run chain shares its pretraining stage.  So this runner drives DVC's own
objects from one process, holding DVC's repository lock for its whole run:

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
import contextlib
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

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


def _select(graph, stages, targets: Sequence[str] | None):
    """The stages of ``targets`` and everything upstream of them (all stages without targets)."""
    import networkx as nx

    if not targets:
        return set(stages)
    by_name = {s.addressing: s for s in stages}
    unknown = [t for t in targets if t not in by_name]
    if unknown:
        raise UserError(f"unknown stage {unknown[0]!r} (see `dvc stage list`)")
    chosen = set()
    for t in targets:
        chosen |= {by_name[t]} | nx.descendants(graph, by_name[t])  # edges point upstream in DVC's graph
    return chosen


class _Run:
    """One scheduling pass over DVC's stage graph (see the module docstring)."""

    def __init__(self, repo, todo: set, graph, envs: list[dict[str, str]], dry: bool, log):
        self.repo, self.todo, self.envs, self.dry, self.log = repo, todo, envs, dry, log
        self.upstream = {s: set(graph.successors(s)) & todo for s in todo}  # DVC's edges point upstream
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
            self.unflushed[0].dvcfile.dump_stages(list(self.unflushed), update_pipeline=False)
            self.unflushed.clear()
        self.last_flush = time.monotonic()

    def _finish(self, stage, how: str) -> None:
        getattr(self.out, how).append(stage.addressing)
        self.done.add(stage)

    def _start(self, stage) -> None:
        """Skip, restore or launch one stage whose upstream has finished."""
        from dvc.stage.cache import RunCacheNotFoundError

        name = stage.addressing
        if stage.frozen or not stage.changed(upstream=list(self.upstream[stage])):
            return self._finish(stage, "skipped")
        if self.dry:
            self.log(f"stale: {name}: {stage.cmd}")
            return self._finish(stage, "ran")
        # as Stage.run: the outputs go first (a checkout from the run-cache refuses to overwrite files it
        # has not cached, e.g. a git-tracked metrics file of another profile: ConfirmRemoveError)
        stage.remove_outs(ignore_remove=False, force=False)
        try:  # what `dvc repro` tries first: a run with these inputs in the run-cache
            self.repo.stage_cache.restore(stage)
        except RunCacheNotFoundError:
            pass
        else:
            stage.save()
            stage.commit()
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
            # DVC's rule (Stage.run): no run-cache entry for a stage with uncached plain outputs
            no_cache_outs = any(not o.use_cache for o in stage.outs if not (o.is_metric or o.is_plot))
            stage.save(run_cache=not no_cache_outs)
            stage.commit()
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


_GLOB = frozenset("*?[]")


def lookup(config, key_path: str):
    """``config[k1][k2]...`` for the dotted ``key_path`` (list items by index), as ``dpath.get`` finds
    it; ``KeyError`` when absent.  Callers send glob patterns to dpath itself."""
    node = config
    for part in key_path.split("."):
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise KeyError(key_path)
    return node


@contextlib.contextmanager
def parse_params_once():
    """Within this block, DVC parses each params file once per version (path, mtime, size).

    ``Stage.changed`` re-reads and re-parses ``params.yaml`` for every stage that depends on it
    (``dvc.dependency.param.read_param_file``) and then walks the whole parsed tree once per
    parameter (``dpath.get``): about 20 ms a stage, 2 s of a no-op over the cpu profile's 103
    stages.  This swaps in a version of that function that keeps the parsed file while its stat is
    unchanged and looks dotted keys up directly, returning what DVC's returns.
    """
    from copy import deepcopy

    import dpath
    import dvc.dependency.param as dvc_param
    from dvc.fs import LocalFileSystem

    original = dvc_param.read_param_file
    parsed: dict = {}

    def read_param_file(fs, path, key_paths=None, flatten=False, **load_kwargs):
        if not isinstance(fs, LocalFileSystem):  # e.g. a git revision's files: DVC's own reader
            return original(fs, path, key_paths, flatten, **load_kwargs)
        try:
            st = os.stat(path)
        except (OSError, TypeError):
            return original(fs, path, key_paths, flatten, **load_kwargs)
        stamp = (st.st_mtime_ns, st.st_size, tuple(sorted(load_kwargs.items())))
        if parsed.get(path, (None,))[0] != stamp:
            parsed[path] = (stamp, dvc_param.load_path(path, fs, **load_kwargs))
        config = parsed[path][1]
        if not key_paths:
            return deepcopy(config)
        if not flatten:  # DVC's nested form, from the kept parse
            nested: dict = {}
            for key_path in dict.fromkeys(key_paths):
                dpath.merge(nested, deepcopy(dpath.search(config, key_path, separator=".")), separator=".")
            return nested
        found = {}
        for key_path in key_paths:
            try:
                found[key_path] = deepcopy(get(config, key_path))  # DVC parses afresh: callers may keep it
            except KeyError:
                continue
        return found

    def get(config, key_path: str):
        if not _GLOB & set(key_path):
            try:
                return lookup(config, key_path)
            except KeyError:
                pass  # dpath may still read it (e.g. a non-string key)
        return dpath.get(config, key_path, separator=".")

    dvc_param.read_param_file = read_param_file
    try:
        yield
    finally:
        dvc_param.read_param_file = original


TESTED_DVC = (3, 67)
"""The DVC release (major, minor) whose internals this runner and :mod:`priorlab.shard` drive:
``Stage.changed/save/commit``, ``stage_cache.restore``, ``ProjectFile.dump_stages``,
``dvc.dependency.param.read_param_file`` — not a public API (``requirements.txt`` pins dvc==3.67.1)."""


def require_tested_dvc(version: str | None = None) -> None:
    """Refuse, with one line, a DVC other than :data:`TESTED_DVC` (``version``: the installed one)."""
    if version is None:
        from importlib.metadata import version as installed

        version = installed("dvc")
    try:
        found = tuple(int(p) for p in version.split(".")[:2])
    except ValueError:
        found = ()
    if found != TESTED_DVC:
        tested = ".".join(map(str, TESTED_DVC))
        raise UserError(f"the parallel runner drives DVC internals tested with dvc {tested}.x, found dvc {version}: "
                        f"install the pinned one (pip install -r requirements.txt) or run plain `dvc repro`")


def reproduce(targets: Sequence[str] | None = None, jobs: int = 2, gpus: Sequence[str] | None = None,
              root: str | Path = ".", dry: bool = False, log=print) -> Outcome:
    """Reproduce the pipeline of ``root`` (or ``targets`` and their upstream) on ``jobs`` workers."""
    require_tested_dvc()
    from dvc.repo import Repo, lock_repo

    envs = worker_envs(jobs, gpus)
    repo = Repo(str(root))
    try:
        with lock_repo(repo), parse_params_once():
            graph = repo.index.graph
            run = _Run(repo, _select(graph, [s for s in repo.index.stages if s.cmd], targets), graph, envs, dry, log)
            run.out.jobs = jobs
            start = time.monotonic()
            try:
                return run.loop()
            finally:
                run.flush()
                run.out.total_s = time.monotonic() - start
                _write_history(repo.root_dir, run.out.wall_s)
    finally:
        repo.close()


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
