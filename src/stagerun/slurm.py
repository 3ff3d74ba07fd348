"""The pipeline on a Slurm cluster: one array task per shard, then a dependent job that collects.

    python -m stagerun.slurm submit --shards 4 --gpus-per-task 1 --sbatch-arg=--time=12:00:00
    # or: make slurm SHARDS=4 GPUS_PER_TASK=1 SBATCH='--time=12:00:00 --partition=gpu'

``submit`` runs on the login node, in a checkout whose default DVC remote every node reaches (an SSH
remote on a cluster: ``dvc remote add -d store ssh://login.example.org/scratch/priorlab-dvc``).  It
submits an array job whose task *i* runs shard *i*/N (``python -m stagerun.shard run --shard i/N
--push``, :mod:`stagerun.shard`) and a job that depends on the whole array (``afterany``) and runs
``python -m stagerun.shard collect`` in the checkout once every shard has finished.  The shards run
the checkout's commit (HEAD): ``submit`` refuses a checkout whose pipeline files differ from it.

**Where things are.**  ``.slurm/<commit>-<N>/`` (ignored by git and DVC) holds the job scripts,
``logs/`` (one file per task and attempt), ``work/<i>/`` (task *i*'s git worktree of the commit, with
its own DVC cache and the checkout's remotes: two tasks never share a DVC lock) and ``done/`` (a
file per shard that finished and pushed, written last).  After a collect that succeeds, the
worktrees are removed; the logs and ``done/`` stay.

**Failures.**  A task that fails, is cancelled, pre-empted or killed leaves no ``done`` file, and the
collect job says which shards are missing and stops, running nothing (it would otherwise train a
cluster's work on one node).  Submit again with the same ``--shards``: only the shards without a
``done`` file are submitted, and each restores what its earlier attempt finished (from its worktree's
run-cache and from the remote) and runs the rest.  A shard pushes objects before run-cache entries
(:func:`stagerun.shard.push`), so a task killed mid-push leaves no entry the remote cannot restore.
Pre-empted tasks are requeued by Slurm (``--requeue``) and resume the same way.  Each task's GPUs are
the ones Slurm gives it (``CUDA_VISIBLE_DEVICES``): one stage per GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Sequence

from priorlab.errors import UserError

PIPELINE_FILES = ("dvc.yaml", "params.yaml", "params", "src", "stages", "pyproject.toml", "requirements.txt")
"""What a shard's result depends on besides the data: a checkout whose copy of these differs from
HEAD would collect results the shards (which run HEAD) did not compute."""

STATE_DIR = ".slurm"


class SlurmError(UserError):
    """A submission that cannot go ahead (what to fix is in the message)."""


@dataclass(frozen=True)
class Submission:
    """One commit's pipeline spread over ``count`` array tasks."""

    root: str
    commit: str
    count: int
    jobs: int = 2
    gpus_per_task: int = 0
    poll_s: float = 60.0
    """How often a shard waiting for another shard's stages looks at the remote."""
    python: str = os.path.abspath(sys.executable)  # not resolved: a venv's python is a link out of it

    @property
    def name(self) -> str:
        return f"{self.commit[:12]}-{self.count}"

    @property
    def dir(self) -> Path:
        return Path(self.root) / STATE_DIR / self.name

    def worktree(self, index: int) -> Path:
        return self.dir / "work" / str(index)

    def done_file(self, index: int) -> Path:
        return self.dir / "done" / f"shard-{index}.json"

    def pending(self) -> list[int]:
        """Shards that have not finished and pushed."""
        return [i for i in range(self.count) if not self.done_file(i).is_file()]

    def save(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        _write_atomic(self.dir / "submission.json", json.dumps(asdict(self), indent=2) + "\n")

    @classmethod
    def load(cls, directory: Path) -> "Submission":
        path = directory / "submission.json"
        if not path.is_file():
            raise SlurmError(f"no submission in {directory} (submit first: python -m stagerun.slurm submit --shards N)")
        return cls(**json.loads(path.read_text()))


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _git(root: Path, *args: str) -> str:
    proc = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SlurmError(f"git {' '.join(args)} failed in {root}: {proc.stderr.strip().splitlines()[-1:]}")
    return proc.stdout.strip()


def head_commit(root: Path) -> str:
    """HEAD of the checkout at ``root``, after checking that its pipeline files are HEAD's."""
    commit = _git(root, "rev-parse", "HEAD")
    dirty = _git(root, "diff", "--name-only", "HEAD", "--", *PIPELINE_FILES)
    if dirty:
        files = ", ".join(dirty.splitlines()[:5])
        raise SlurmError(f"the shards run the commit HEAD, but {files} differ from it: commit them first")
    return commit


# --------------------------------------------------------------------------- job scripts


def _job_script(sub: Submission, directives: list[str], pythonpath: str, command: str) -> str:
    """An ``sbatch`` script: ``directives`` and the resources of ``sub``, then ``python -m stagerun.slurm``
    ``command`` with the job's code first on PYTHONPATH."""
    lines = ["#!/bin/bash", *(f"#SBATCH {d}" for d in directives), f"#SBATCH --cpus-per-task={max(sub.jobs, 1)}"]
    if sub.gpus_per_task:
        lines.append(f"#SBATCH --gpus-per-task={sub.gpus_per_task}")
    lines += ["set -euo pipefail", f"export PYTHONPATH={pythonpath}",
              f"exec {shlex.quote(sub.python)} -m stagerun.slurm -C {shlex.quote(sub.root)} {command}"]
    return "\n".join(lines) + "\n"


def array_script(sub: Submission, indices: Sequence[int]) -> str:
    """The ``sbatch`` script of the shards ``indices``: task *i* runs shard *i*/N."""
    return _job_script(sub, [f"--job-name=priorlab-{sub.name}", f"--array={','.join(map(str, indices))}",
                             f"--output={sub.dir}/logs/shard-%a-%A.out", "--open-mode=append", "--requeue"],
                       f"{shlex.quote(str(sub.dir / 'work'))}/\"$SLURM_ARRAY_TASK_ID\"/src",
                       f"task --submission {sub.name} --index \"$SLURM_ARRAY_TASK_ID\"")


def collect_script(sub: Submission) -> str:
    """The ``sbatch`` script of the collect job (submitted with a dependency on the array)."""
    return _job_script(sub, [f"--job-name=priorlab-{sub.name}-collect", f"--output={sub.dir}/logs/collect-%j.out"],
                       shlex.quote(str(Path(sub.root) / "src")), f"collect --submission {sub.name}")


def _sbatch(script: Path, extra: Sequence[str], dependency: str | None = None) -> str:
    """Submit ``script``; returns the job id."""
    exe = shutil.which("sbatch")
    if exe is None:
        raise SlurmError("sbatch not found: submit from a Slurm login node (or run `make shard SHARD=i/N` "
                         "on each machine, then `make collect`)")
    cmd = [exe, "--parsable", *extra, *([f"--dependency={dependency}"] if dependency else []), str(script)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SlurmError(f"sbatch refused {script.name}: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc.stdout.strip().split(";")[0]


def _prepare_worktree(sub: Submission, index: int) -> None:
    """Task ``index``'s git worktree of the commit, with the checkout's data sets and DVC remotes."""
    from stagerun import dvc_adapter  # lazy: +1 module, ~8 ms at import stagerun.slurm

    root, wt = Path(sub.root), sub.worktree(index)
    if not (wt / ".git").exists():
        if wt.exists():
            shutil.rmtree(wt)
        _git(root, "worktree", "prune")
        wt.parent.mkdir(parents=True, exist_ok=True)
        _git(root, "worktree", "add", "--detach", "--quiet", str(wt), sub.commit)
    elif _git(wt, "rev-parse", "HEAD") != sub.commit:
        raise SlurmError(f"{wt} is not at {sub.commit[:12]}: remove it (git worktree remove --force {wt})")
    datasets = root / ".datasets"
    if datasets.is_dir() and not (wt / ".datasets").exists():
        (wt / ".datasets").symlink_to(datasets.resolve())
    dvc_adapter.copy_remotes(root, wt)


def submit(root: Path, count: int, jobs: int, gpus_per_task: int, extra: Sequence[str], again: bool,
           poll_s: float = 60.0, log=print) -> Submission:
    """Submit the shards of HEAD that have not finished (all with ``again``) and the collect job."""
    from stagerun import dvc_adapter  # lazy: +1 module, ~8 ms at import stagerun.slurm
    from priorlab.config import load_params  # lazy: yaml, ~103 ms at import stagerun.slurm
    from stagerun.shard import split  # lazy: +2 modules, ~17 ms at import stagerun.slurm

    if count < 1:
        raise SlurmError(f"--shards must be at least 1, got {count}")
    if jobs < 1 or gpus_per_task < 0 or poll_s <= 0:
        raise SlurmError("--jobs must be at least 1, --gpus-per-task at least 0 and --poll above 0")
    root = root.resolve()
    sub = Submission(str(root), head_commit(root), count, jobs, gpus_per_task, poll_s)
    shards = split(load_params(root / "params.yaml"), count)  # params valid, and the split this commit's tasks will make
    with dvc_adapter.open_repo(root, lock=False) as repo:
        remote = dvc_adapter.default_remote(repo)
    if not remote:
        raise SlurmError("no default DVC remote: add one every node reaches, e.g. "
                         "`dvc remote add -d store ssh://login.example.org/scratch/priorlab-dvc`")
    if again and sub.dir.is_dir():
        shutil.rmtree(sub.dir / "done", ignore_errors=True)
    sub.save()
    pending = [i for i in sub.pending() if shards[i].runs or shards[i].owns or shards[i].cells]
    for i in set(sub.pending()) - set(pending):  # more shards than pieces of work: nothing to run
        _write_atomic(sub.done_file(i), json.dumps({"shard": f"{i}/{count}", "empty": True}) + "\n")
    (sub.dir / "logs").mkdir(parents=True, exist_ok=True)
    for i in pending:
        _prepare_worktree(sub, i)
    collect = sub.dir / "collect.sbatch"
    _write_atomic(collect, collect_script(sub))
    if pending:
        script = sub.dir / "shards.sbatch"
        _write_atomic(script, array_script(sub, pending))
        array = _sbatch(script, extra)
        log(f"submitted shard(s) {', '.join(f'{i}/{count}' for i in pending)} of {sub.commit[:12]} "
            f"as array job {array}")
        job = _sbatch(collect, extra, dependency=f"afterany:{array}")
    else:
        log(f"every shard of {sub.commit[:12]} finished earlier; submitting the collect job only")
        job = _sbatch(collect, extra)
    log(f"submitted the collect job {job} (runs once the shards have ended)")
    log(f"logs: {sub.dir / 'logs'}; watch with: squeue --me")
    return sub


# --------------------------------------------------------------------------- inside the jobs


def _enter(sub: Submission, cwd: Path) -> None:
    """Work in ``cwd`` as the pipeline's stages expect: its code first on PYTHONPATH (the job script
    put it there for this process too), the venv's ``python`` first on PATH."""
    os.environ.update({"PATH": str(Path(sub.python).parent) + os.pathsep + os.environ.get("PATH", ""),
                       "PYTHONPATH": str(cwd / "src"), "DVC_NO_ANALYTICS": "1"})
    os.chdir(cwd)


def visible_gpus(env: dict[str, str] | None = None) -> list[str]:
    """The devices Slurm gave this task (``CUDA_VISIBLE_DEVICES``), one stage per device."""
    value = (env if env is not None else os.environ).get("CUDA_VISIBLE_DEVICES", "")
    return [g.strip() for g in value.split(",") if g.strip()]


def shard_args(sub: Submission, *args: str) -> list[str]:
    """``python -m stagerun.shard <args>``'s arguments, one stage per GPU Slurm gave the job (else
    ``sub.jobs`` stages side by side)."""
    gpus = visible_gpus() if sub.gpus_per_task else []
    return [*args, "-j", str(len(gpus) or sub.jobs), *(["--gpus", ",".join(gpus)] if gpus else [])]


def run_task(sub: Submission, index: int, log=print) -> int:
    """Array task ``index``: shard ``index``/N in its worktree, pushed; its ``done`` file on success.
    The shard runs in this process, so that a signal Slurm sends the job (cancel, pre-emption, time
    limit) reaches its runner, which stops its stages (and they die with it on SIGKILL)."""
    from stagerun import shard  # lazy: +2 modules, ~15 ms at import stagerun.slurm

    if not 0 <= index < sub.count:
        raise SlurmError(f"task index {index} is not a shard of {sub.count}")
    _prepare_worktree(sub, index)  # a requeued task, or a worktree removed by hand
    wt = sub.worktree(index)
    args = shard_args(sub, "run", "--shard", f"{index}/{sub.count}", "--push", "--poll", str(sub.poll_s))
    log(f"task {index} on {os.uname().nodename}: python -m stagerun.shard {' '.join(args)} (in {wt})")
    start = time.time()
    _enter(sub, wt)
    rc = shard.main(["-C", str(wt), *args])
    if rc == 0:
        _write_atomic(sub.done_file(index), json.dumps({
            "shard": f"{index}/{sub.count}", "node": os.uname().nodename, "wall_s": round(time.time() - start, 1),
            "job": os.environ.get("SLURM_ARRAY_JOB_ID"), "finished": time.strftime("%Y-%m-%dT%H:%M:%S")}) + "\n")
    return rc


def run_collect(sub: Submission, log=print) -> int:
    """The collect job: every shard done, then ``stagerun.shard collect`` in the checkout."""
    from stagerun import shard  # lazy: +2 modules, ~15 ms at import stagerun.slurm

    missing = sub.pending()
    if missing:
        raise SlurmError(
            f"shard(s) {', '.join(f'{i}/{sub.count}' for i in missing)} did not finish (logs: {sub.dir / 'logs'}); "
            f"nothing was collected. Submit again: python -m stagerun.slurm submit --shards {sub.count} "
            "(only the unfinished shards run, from what they pushed)")
    root = Path(sub.root)
    if _git(root, "rev-parse", "HEAD") != sub.commit:
        raise SlurmError(f"{root} is no longer at {sub.commit[:12]}, the commit the shards ran: check it out "
                         f"(git checkout {sub.commit[:12]}) and submit again")
    head_commit(root)
    args = shard_args(sub, "collect")
    log(f"collect on {os.uname().nodename}: python -m stagerun.shard {' '.join(args)} (in {root})")
    _enter(sub, root)
    rc = shard.main(["-C", str(root), *args])
    if rc == 0:
        for i in range(sub.count):
            if sub.worktree(i).exists():
                _git(root, "worktree", "remove", "--force", str(sub.worktree(i)))
        _write_atomic(sub.dir / "collected.json",
                      json.dumps({"finished": time.strftime("%Y-%m-%dT%H:%M:%S")}) + "\n")
    return rc


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m stagerun.slurm", description=__doc__.splitlines()[0])
    parser.add_argument("-C", "--root", default=".", help="the checkout (default: the current directory)")
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("submit", help="submit the unfinished shards of HEAD as an array job, then collect")
    s.add_argument("--shards", type=int, required=True, help="array tasks (one shard each)")
    s.add_argument("-j", "--jobs", type=int, default=2, help="stages side by side in a task without GPUs (default 2)")
    s.add_argument("--gpus-per-task", type=int, default=0, help="GPUs per task, one stage on each (default 0)")
    s.add_argument("--sbatch-arg", action="append", default=[], metavar="ARG",
                   help="passed to sbatch for every job, e.g. --sbatch-arg=--partition=gpu (repeat for more)")
    s.add_argument("--again", action="store_true", help="submit every shard, finished ones too")
    s.add_argument("--poll", type=float, default=60.0,
                   help="seconds between a waiting shard's looks at the remote (default 60)")
    for name in ("task", "collect"):
        q = sub.add_parser(name, help=f"inside a job: the {'array task' if name == 'task' else 'collect step'}")
        q.add_argument("--submission", required=True, help="the submission's folder name in .slurm/")
        if name == "task":
            q.add_argument("--index", type=int, required=True, help="the array task id (the shard's index)")
    return parser


def main(argv: list[str] | None = None) -> int:
    ns = parser().parse_args(argv)
    root = Path(ns.root).resolve()
    try:
        if ns.command == "submit":
            extra = [a for arg in ns.sbatch_arg for a in shlex.split(arg)]
            submit(root, ns.shards, ns.jobs, ns.gpus_per_task, extra, ns.again, ns.poll,
                   log=lambda m: print(m, flush=True))
            return 0
        submission = Submission.load(root / STATE_DIR / ns.submission)
        if ns.command == "task":
            return run_task(submission, ns.index, log=lambda m: print(m, flush=True))
        return run_collect(submission, log=lambda m: print(m, flush=True))
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    os.environ.setdefault("DVC_NO_ANALYTICS", "1")
    sys.exit(main())
