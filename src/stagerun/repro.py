"""``dvc repro`` on several workers: the stages DVC would run, recorded in ``dvc.lock`` as DVC records them.

DVC 3.67 runs the stages of one workspace one at a time.  Two ``dvc repro`` processes cannot share
the work either: each holds the repository lock except while a stage's command runs, and DVC's
per-path lock then *refuses* (it does not wait) a second process that checks a stage upstream of a
running one — every per-run chain shares its pretraining stage.  So this runner drives DVC's own
objects (through :mod:`stagerun.dvc_adapter`) from one process, holding DVC's repository lock for
its whole run (DVC's per-path lock, ``.dvc/tmp/rwlock``, then guards nothing and is skipped while no
other process holds an entry in it: :func:`stagerun.dvc_adapter.sole_path_locker`):

* the stage graph is DVC's (``repo.index.graph``), optionally cut to ``targets`` and their upstream,
  as ``dvc repro TARGETS`` does;
* a stage is considered once every stage it depends on has finished, and checked with DVC's
  ``Stage.changed`` at that moment — the check ``dvc repro`` makes when it reaches the stage, so a
  stage whose upstream reran without changing its outputs is skipped, exactly as in a serial run;
* a changed stage is restored from DVC's run-cache when DVC would restore it; otherwise its outputs
  are removed as DVC removes them (persistent ones kept), its command runs in a subprocess on a free
  worker (a ``python stages/<name>.py ARGS`` command is forked from a process that imported the stage
  scripts' modules once, :mod:`stagerun.prefork`; ``--no-preload`` starts a new interpreter each
  time, as ``dvc repro`` does), and when it exits 0 DVC saves and commits it (``Stage.save``/``Stage.commit``) and its
  entry is written to ``dvc.lock`` (``ProjectFile.dump_stages``, batched);
* a failing command stops new launches; the running ones finish and are recorded; exit status 1.

The runner owns its stage processes: each runs in a session (process group) of its own, so the
terminal's Ctrl-C reaches only the runner; on SIGINT or SIGTERM the runner stops every running stage
(SIGTERM to its group, SIGKILL after :data:`STOP_GRACE_S`), records the stages that finished in
``dvc.lock`` and exits with one line (status 130 / 143).  A stage also dies with the runner when the
runner is killed outright (``kill -9``): it watches a pipe whose only writer is the runner
(:func:`priorlab.runtime.die_with_runner`), so no stage outlives the run that started it and keeps writing
after DVC's lock is released.

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
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from stagerun import dvc_adapter, prefork
from stagerun.dvc_adapter import TESTED_DVC, parse_params_once, require_tested_dvc  # noqa: F401  (re-exported)
from priorlab.errors import UserError
from priorlab.runtime import RUNNER_FD

HISTORY = Path(".dvc") / "tmp" / "priorlab-stage-walls.json"
"""Wall time of each stage's last run (written by the runner; DVC's own tmp folder, not tracked).
The runner starts the ready stage with the longest remaining path first (critical-path list
scheduling), so long independent stages — the in-process studies — do not end up last."""

STOP_GRACE_S = 10.0
"""After an interrupt, how long a stopped stage gets to exit on SIGTERM before SIGKILL."""

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
"""The signals that stop a run: Ctrl-C's and the one ``kill`` sends by default."""

LOCK_FLUSH_S = 60.0
"""Finished stages are written to ``dvc.lock`` at most this long after they end, and always before the
runner exits (a write puts the finished stages' entries in place: :func:`stagerun.dvc_adapter.write_lock`).
Each write scans the whole lock (about 0.05 s of the runner's CPU for the cpu profile's 736 KB): every 20 s
it was 17 % of the runner's own CPU over a full cpu run (py-spy, clean_clone_2026_11_29c).  A stage a
killed runner did not write is restored from the run-cache by the next run, not rerun."""


@dataclass
class Outcome:
    ran: list[str] = field(default_factory=list)
    restored: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    wall_s: dict[str, float] = field(default_factory=dict)
    max_rss_mib: dict[str, float] = field(default_factory=dict)
    total_s: float = 0.0
    runner_cpu_s: float = 0.0  # the runner's own CPU (its process, every thread; not the stages')
    jobs: int = 1
    stopped: list[str] = field(default_factory=list)  # running when the runner was interrupted
    downstream: list[str] = field(default_factory=list)  # --dry: up to date now, below a stale stage
    signal: int = 0  # the signal that interrupted the run (0: none)

    def timings(self) -> dict:
        """What ``--timings`` writes: per stage that ran, its wall time and peak RSS."""
        return {"jobs": self.jobs, "total_wall_s": round(self.total_s, 2), "runner_cpu_s": round(self.runner_cpu_s, 2),
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


class _Spawned:
    """A stage command run by the shell."""

    def __init__(self, popen: subprocess.Popen):
        self.popen, self.pid = popen, popen.pid

    def poll(self) -> tuple[int, float] | None:
        """``(exit status, peak RSS in MiB)`` once exited (``Popen.poll`` with the child's rusage)."""
        pid, status, usage = os.wait4(self.pid, os.WNOHANG)
        if pid == 0:
            return None
        self.popen.returncode = os.waitstatus_to_exitcode(status)
        return self.popen.returncode, usage.ru_maxrss / 1024


class _Forked:
    """A stage command forked from the preloaded process (:mod:`stagerun.prefork`)."""

    def __init__(self, preloaded: prefork.Preloaded, pid: int):
        self.preloaded, self.pid = preloaded, pid

    def poll(self) -> tuple[int, float] | None:
        return self.preloaded.poll(self.pid)


class _Run:
    """One scheduling pass over DVC's stage graph (see the module docstring)."""

    def __init__(self, repo, todo: set, envs: list[dict[str, str]], dry: bool, log, preload: bool = False,
                 run_cache: bool = True):
        self.repo, self.todo, self.envs, self.dry, self.log = repo, todo, envs, dry, log
        self.run_cache = run_cache  # False: a changed stage always runs its command (dvc repro --no-run-cache)
        self.upstream = {s: ups & todo for s, ups in dvc_adapter.upstream(repo, todo).items()}
        self.rank = critical_path_rank(todo, self.upstream, _read_history(repo.root_dir))
        self.done: set = set()
        self.running: dict = {}  # stage -> (Popen, slot, start)
        self.free = list(range(len(envs)))
        self.unflushed: list = []
        self.last_flush = time.monotonic()
        self.stop = False
        self.out = Outcome()
        # a stage's lifeline: it inherits the read end; the write end stays here, so it closes (and the
        # stage sees end-of-file) however the runner ends, kill -9 included
        self.lifeline, self._lifeline_w = os.pipe()
        self.preload = preload and not dry
        self.preloaded: prefork.Preloaded | None = None  # started with the first stage it can fork

    def close(self) -> None:
        if self.preloaded is not None:
            self.preloaded.close()
        for fd in (self.lifeline, self._lifeline_w):
            with contextlib.suppress(OSError):
                os.close(fd)

    def interrupt(self, signum: int) -> None:
        """SIGINT / SIGTERM: start nothing more; :meth:`loop` stops the running stages."""
        self.out.signal = self.out.signal or signum
        self.stop = True

    def flush(self) -> None:
        """Write the finished stages' entries to ``dvc.lock`` in one dump."""
        if self.unflushed:
            dvc_adapter.write_lock(self.unflushed)
            self.unflushed.clear()
        self.last_flush = time.monotonic()

    def _finish(self, stage, how: str) -> None:
        getattr(self.out, how).append(stage.addressing)
        self.done.add(stage)

    def _needs_run(self, stage) -> bool:
        """Whether a stage whose upstream has finished must run its command: False when it is up to date
        (skipped) or restored from the run-cache (both finished here), or, in a dry run, only listed."""
        name = stage.addressing
        if not dvc_adapter.changed(stage, self.upstream[stage]):
            if self.dry and any(u.addressing in self.out.ran or u.addressing in self.out.downstream
                                for u in self.upstream[stage]):
                # up to date now, but a stale upstream stage runs first: its new outputs rerun this one
                self.log(f"downstream: {name} (reruns when the stages it depends on change their outputs)")
                self._finish(stage, "downstream")
                return False
            if not self.dry:
                dvc_adapter.keep_ignored(stage)
            self._finish(stage, "skipped")
            return False
        if self.dry:
            self.log(f"stale: {name}: {stage.cmd}")
            self._finish(stage, "ran")
            return False
        # what `dvc repro` tries first: a run with these inputs in the run-cache (else the outputs are gone)
        if self.run_cache and dvc_adapter.restore(self.repo, stage):
            self.unflushed.append(stage)
            self.log(f"restored {name} from the run-cache")
            self._finish(stage, "restored")
            return False
        return True

    def _batch(self, stage, ready: list) -> list:
        """The stages that run in one process with ``stage``: itself, and the ready stages of the batch it
        declares (``meta``: ``batch_cmd``, ``batch_plan``, ``batch_key``, ``batch_mode`` other than
        ``separate``) that ``batch_plan <keys>`` — asked once per launch, given every candidate's key —
        puts in its group (JSON: a list of key lists) and that must run.  Just ``[stage]`` otherwise."""
        meta = stage.meta or {}
        if self.dry or meta.get("batch_mode", "separate") == "separate" or not meta.get("batch_cmd"):
            return [stage]
        peers = [s for s in ready if s is not stage and s not in self.done and s not in self.running
                 and (s.meta or {}).get("batch_cmd") == meta["batch_cmd"]]
        if not peers:
            return [stage]
        by_key = {(s.meta or {})["batch_key"]: s for s in [stage, *peers]}
        proc = subprocess.run(f"{meta['batch_plan']} {','.join(by_key)}", shell=True, cwd=stage.wdir, text=True,
                              capture_output=True, env={**os.environ, **self.envs[0]})
        try:
            if proc.returncode != 0:
                raise ValueError((proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1])
            groups = json.loads((proc.stdout.strip().splitlines() or ["[]"])[-1])
        except ValueError as exc:  # json.JSONDecodeError included
            self.log(f"warning: `{meta['batch_plan']}` gave no batches ({exc}); {stage.addressing} runs alone")
            return [stage]
        group = next((g for g in groups if meta["batch_key"] in g), [])
        return [stage, *(by_key[k] for k in group if k != meta["batch_key"] and self._needs_run(by_key[k]))]

    def _start(self, stage, ready: list | None = None) -> None:
        """Skip, restore or launch one stage whose upstream has finished (with the ready stages it runs
        with, :meth:`_batch`: one process, one worker, each recorded as its own stage)."""
        if not self._needs_run(stage):
            return
        members = self._batch(stage, ready or [])
        cmd = stage.cmd
        if len(members) > 1:
            cmd = f"{stage.meta['batch_cmd']} {','.join(s.meta['batch_key'] for s in members)}"
        name = " + ".join(s.addressing for s in members) if len(members) > 1 else stage.addressing
        slot = self.free.pop(0)
        self.log(f"[worker {slot}] running {name}: {cmd}")
        env = {**self.envs[slot], RUNNER_FD: str(self.lifeline)}
        proc = None
        argv = prefork.script_command(cmd, {**os.environ, **env}) if self.preload else None
        if argv is not None and not (self.preloaded is not None and self.preloaded.ended):
            if self.preloaded is None:
                self.preloaded = prefork.Preloaded(Path(self.repo.root_dir) / "stages", pass_fds=(self.lifeline,))
            try:
                proc = _Forked(self.preloaded, self.preloaded.spawn(argv, stage.wdir, env))
            except prefork.Ended as exc:
                self.log(f"warning: {exc}; the stages start new interpreters from now on")
        if proc is None:
            proc = _Spawned(subprocess.Popen(cmd, shell=True, cwd=stage.wdir, start_new_session=True,
                                             pass_fds=(self.lifeline,), env={**os.environ, **env}))
        start = time.monotonic()
        for member in members:
            self.running[member] = (proc, slot, start)

    def _reap(self) -> bool:
        """Record the stages whose command has exited (a batch's process: each of its stages; its wall
        shared out evenly, its peak memory each's); whether any had."""
        reaped = False
        procs: dict[int, list] = {}
        for stage, (proc, _, _) in self.running.items():
            procs.setdefault(id(proc), []).append(stage)
        for members in procs.values():
            proc, slot, start = self.running[members[0]]
            exited = proc.poll()
            if exited is None:
                continue
            self.free = sorted(self.free + [slot])
            wall = time.monotonic() - start
            reaped = True
            for stage in members:
                del self.running[stage]
                self._record(stage, exited, wall / len(members), slot)
        return reaped

    def _record(self, stage, exited: tuple[int, float], wall: float, slot: int) -> None:
        """One exited stage: saved and queued for ``dvc.lock``, or its failure handled."""
        returncode, self.out.max_rss_mib[stage.addressing] = exited
        name = stage.addressing
        self.out.wall_s[name] = wall
        if returncode != 0 and self.out.signal:
            self.log(f"stopped {name}")  # its rerun resumes from its checkpoint: nothing to put back
            self.out.stopped.append(name)
            self.done.add(stage)
            return
        if returncode != 0:
            self.log(f"error: stage {name} failed (exit status {returncode}); "
                     "finishing the running stages, starting no new ones")
            self._put_back(stage)
            self.out.failed.append(name)
            self.stop = True
            return
        try:
            dvc_adapter.save_run(stage)
        except dvc_adapter.RecordError as exc:
            self.log(f"error: {exc}; finishing the running stages, starting no new ones")
            self.out.failed.append(name)
            self.stop = True
            return
        self.unflushed.append(stage)
        self._finish(stage, "ran")
        self.log(f"[worker {slot}] finished {name} in {self.out.wall_s[name]:.1f} s")

    def _put_back(self, stage) -> None:
        """A failed stage's recorded outputs back from the cache (:func:`dvc_adapter.put_back_recorded`)."""
        back, not_back = dvc_adapter.put_back_recorded(stage)
        if back:
            self.log(f"{stage.addressing}: put back its recorded {', '.join(back)} (dvc.lock's; the stage stays stale)")
        if not_back:
            self.log(f"{stage.addressing}: {', '.join(not_back)} not in the cache "
                     f"(kept in git: `git checkout -- {' '.join(not_back)}`)")

    def _stop_running(self) -> None:
        """SIGTERM to every running stage's process group; SIGKILL to those still there after the grace."""
        for proc, _, _ in self.running.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_S
        while self.running and time.monotonic() < deadline:
            time.sleep(0.05)
            self._reap()
        for proc, _, _ in self.running.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        while self.running:
            time.sleep(0.05)
            self._reap()

    def ready(self) -> list:
        """The stages whose upstream has finished and that are not started, critical path first."""
        pending = self.todo - self.done - set(self.running)
        return sorted((s for s in pending if self.upstream[s] <= self.done), key=lambda s: (-self.rank[s], s.addressing))

    def loop(self) -> Outcome:
        look = True  # whether a stage may have become ready since the last look: a start, an end, a skip
        while True:
            if self.out.signal and self.running:
                self._stop_running()
            if self.out.signal:
                return self.out
            if look and self.free and not self.stop:
                # a look costs 0.06-0.25 ms on the cpu profile's graph (DVC's Stage hashes its path each time):
                # once per 50 ms poll it was a fifth of the runner's own CPU over a full run (py-spy)
                finished = len(self.done)
                ready = self.ready()
                for stage in ready:
                    if self.stop or not self.free:
                        break
                    if stage not in self.running and stage not in self.done:  # not started with a batch just now
                        self._start(stage, ready)
                look = len(self.done) != finished  # stages skipped just now may have made others ready
            if not self.running:
                if self.stop or not (self.todo - self.done):
                    return self.out
                look = True
                continue
            time.sleep(0.05)
            look = self._reap() or look
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
              root: str | Path = ".", dry: bool = False, log=print, preload: bool | None = None,
              run_cache: bool = True) -> Outcome:
    """Reproduce the pipeline of ``root`` (or ``targets`` and their upstream) on ``jobs`` workers.
    ``preload`` (default: without ``gpus``) forks stage scripts from a process that has imported their
    modules once (:mod:`stagerun.prefork`) instead of starting a new interpreter for each."""
    require_tested_dvc()  # before anything else, as the adapter does before it touches DVC
    envs = worker_envs(jobs, gpus)
    preload = not gpus if preload is None else preload
    with dvc_adapter.open_repo(root) as repo, parse_params_once(), dvc_adapter.sole_path_locker(repo):
        run = _Run(repo, set(dvc_adapter.select(repo, targets)), envs, dry, log, preload, run_cache)
        run.out.jobs = jobs
        start = time.monotonic()
        try:
            with _signals_to(run):
                try:
                    return run.loop()
                finally:
                    run.flush()  # still under the run's handlers: a signal now cannot cut dvc.lock short
        finally:
            run.close()
            run.out.total_s = time.monotonic() - start
            # a stopped or failed stage's wall is how long it ran, not how long it takes: keep its last full one
            _write_history(repo.root_dir, {n: w for n, w in run.out.wall_s.items() if n in run.out.ran})


class Interrupted(Exception):
    """SIGINT / SIGTERM before the runner started any stage (nothing to stop or record)."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _raise_interrupted(signum, frame):
    raise Interrupted(signum)


@contextlib.contextmanager
def _signals_to(run: _Run):
    """SIGINT and SIGTERM go to ``run`` (stop, record, exit) while it runs; outside it they raise
    :class:`Interrupted` (main thread only: elsewhere, e.g. under a test's thread, nothing changes)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, lambda signum, frame: run.interrupt(signum)) for s in STOP_SIGNALS}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)



def exit_status(signum: int) -> int:
    """The shell's status of a process ended by ``signum`` (130 for Ctrl-C, 143 for SIGTERM)."""
    return 128 + int(signum)


def debugging() -> bool:
    """``PRIORLAB_DEBUG=1`` (or ``--debug``): errors keep their traceback instead of one line."""
    return os.environ.get("PRIORLAB_DEBUG", "") not in ("", "0")


def record(targets: Sequence[str] | None = None, root: str | Path = ".", log=print) -> list[str]:
    """Record the workspace's outputs of ``targets`` (and their upstream; default all) in ``dvc.lock``
    without running anything, as ``dvc commit --force`` does, in one pass over DVC's index (``dvc commit``
    re-reads the whole pipeline per target: minutes for this project, seconds here).  For a change that
    provably leaves outputs as they are (a refactor, a comment); it records whatever is on disk, so after a
    library edit run the ``code`` stage first (its digest of the library is an output).  A whole
    record (no ``targets``) also drops the entries of stages the pipeline no longer has."""
    require_tested_dvc()
    with dvc_adapter.open_repo(root) as repo, parse_params_once(), dvc_adapter.sole_path_locker(repo):
        stages = dvc_adapter.select(repo, targets)
        for stage in stages:
            dvc_adapter.save_run(stage)
        dvc_adapter.write_lock(stages)
        gone = dvc_adapter.prune_lock(repo) if not targets else []
    log(f"recorded {len(stages)} stage(s) in dvc.lock as they are on disk"
        + (f"; dropped {len(gone)} entr{'y' if len(gone) == 1 else 'ies'} of stages the pipeline no longer has" if gone else ""))
    return [s.addressing for s in stages]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stagerun.repro", description=__doc__.splitlines()[0])
    parser.add_argument("targets", nargs="*", help="stages to reproduce with their upstream (default: all)")
    parser.add_argument("-j", "--jobs", type=int, default=2, help="workers (default 2)")
    parser.add_argument("--gpus", default=None,
                        help="comma-separated CUDA devices, one per worker (sets CUDA_VISIBLE_DEVICES)")
    parser.add_argument("--dry", action="store_true", help="print the stages that are stale now, run nothing")
    parser.add_argument("--timings", default=None, help="write each stage's wall time and peak RSS (JSON) here")
    parser.add_argument("--debug", action="store_true", help="tracebacks instead of one-line errors (PRIORLAB_DEBUG=1)")
    parser.add_argument("--no-preload", dest="preload", action="store_false", default=None,
                        help="a new interpreter per stage (default without --gpus: stage scripts are forked "
                             "from one process that imported their modules once)")
    parser.add_argument("--no-run-cache", dest="run_cache", action="store_false",
                        help="run a changed stage's command even where DVC's run-cache holds its outputs "
                             "(as `dvc repro --no-run-cache`)")
    parser.add_argument("--record", action="store_true",
                        help="run nothing: record the outputs on disk in dvc.lock (as `dvc commit --force`, one pass)")
    ns = parser.parse_args(argv)
    gpus = [g.strip() for g in ns.gpus.split(",") if g.strip()] if ns.gpus else None
    try:
        worker_envs(ns.jobs, gpus)  # validates before DVC starts
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        from priorlab.config import check_machine, check_once  # lazy: yaml, ~96 ms at import stagerun.repro

        if Path("params.yaml").is_file():  # make repro's check: an invalid params.yaml starts nothing (one line, exit 2)
            check_once("params.yaml")
        check_machine("params.yaml")  # e.g. device: cuda on a machine without CUDA, before DVC removes anything
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if ns.debug:
        os.environ["PRIORLAB_DEBUG"] = "1"
    start, cpu_start = time.monotonic(), time.process_time()
    main_thread = threading.current_thread() is threading.main_thread()
    # until the run takes them over (and after it): no stage is running, so nothing to stop or record
    previous = {s: signal.signal(s, _raise_interrupted) for s in STOP_SIGNALS} if main_thread else {}
    try:
        if ns.record:
            record(ns.targets, log=lambda m: print(m, flush=True))
            return 0
        outcome = reproduce(ns.targets, ns.jobs, gpus, dry=ns.dry, log=lambda m: print(m, flush=True),
                            preload=ns.preload, run_cache=ns.run_cache)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except Interrupted as exc:
        print(f"interrupted ({exc}) before any stage started: nothing ran, nothing changed", file=sys.stderr)
        return exit_status(exc.signum)
    except Exception as exc:
        line = dvc_adapter.user_situation(exc)
        if line is None or debugging():
            raise
        print(f"error: {line} (PRIORLAB_DEBUG=1 for the traceback)", file=sys.stderr)
        return 2
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    wall, outcome.runner_cpu_s = time.monotonic() - start, time.process_time() - cpu_start
    if ns.timings:
        Path(ns.timings).parent.mkdir(parents=True, exist_ok=True)
        Path(ns.timings).write_text(json.dumps(outcome.timings(), indent=2) + "\n")
    if outcome.signal:
        print(f"interrupted ({signal.Signals(outcome.signal).name}): stopped {len(outcome.stopped)} running stage(s)"
              f"{' (' + ', '.join(outcome.stopped) + ')' if outcome.stopped else ''}; {len(outcome.ran)} finished "
              f"and {len(outcome.restored)} restored are recorded in dvc.lock; rerun to continue", file=sys.stderr)
        return exit_status(outcome.signal)
    more = (f" and {len(outcome.downstream)} downstream of them (a run executes those too where their inputs "
            "change)" if ns.dry else "")
    print(f"{len(outcome.ran)} stage(s) {'stale' if ns.dry else 'ran'}{more}, {len(outcome.restored)} restored, "
          f"{len(outcome.skipped)} up to date, {len(outcome.failed)} failed; "
          f"{wall:.1f} s on {ns.jobs} worker(s); the runner's own CPU {outcome.runner_cpu_s:.1f} s "
          f"({100 * outcome.runner_cpu_s / max(wall, 1e-9):.1f} % of one core)", flush=True)
    return 1 if outcome.failed else 0


if __name__ == "__main__":
    sys.exit(main())
