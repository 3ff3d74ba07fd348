"""The tiny profile's pipeline in a throw-away git copy of the project: commands run in it, and the
one serial run the end-to-end and cluster tests compare against (``tiny_serial`` in conftest)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from benchmarks.project_copy import copy_project, pipeline_env

ROOT = Path(__file__).resolve().parents[1]


def sh(cwd: Path, *cmd: str, check: bool = True, env: dict | None = None) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, cwd=cwd, env={**pipeline_env(cwd), **(env or {})}, capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


def dvc(cwd: Path, *args: str, **kw) -> subprocess.CompletedProcess:
    return sh(cwd, sys.executable, "-m", "dvc", *args, **kw)


def commit_all(cwd: Path, message: str) -> None:
    sh(cwd, "git", "add", "-A")
    sh(cwd, "git", "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "-m", message)


def tiny_copy(dst: Path) -> Path:
    """A git copy of the project at ``dst`` with the tiny profile committed."""
    if shutil.which("git") is None:
        pytest.skip("git is required by DVC pipelines")
    copy_project(ROOT, dst)
    sh(dst, sys.executable, "-m", "priorlab.config", "use", "tiny")
    commit_all(dst, "tiny")
    return dst


def read_params(project: Path) -> dict:
    """The project's raw params, ``params.yaml`` and its section files merged (``config.read_raw``)."""
    from priorlab.config import read_raw

    return read_raw(project / "params.yaml")


def write_params(project: Path, raw: dict) -> None:
    """``raw`` written as the project's ``params.yaml`` and section files (``config.write_raw``)."""
    from priorlab.config import write_raw

    write_raw(raw, project)


def param_texts(project: Path) -> dict[Path, str]:
    """Every params file of the project and its text: what :func:`restore_params` writes back."""
    from priorlab.config import param_files

    return {path: path.read_text() for path in param_files(project / "params.yaml")}


def restore_params(texts: dict[Path, str]) -> None:
    for path, text in texts.items():
        if path.read_text() != text:
            path.write_text(text)


def lock_outs(project: Path) -> dict[str, list[tuple[str, str]]]:
    """Each stage of ``project``'s dvc.lock -> its outputs' (path, md5)."""
    stages = yaml.safe_load((project / "dvc.lock").read_text())["stages"]
    return {name: [(o["path"], o["md5"]) for o in entry.get("outs", [])] for name, entry in stages.items()}


@dataclass(frozen=True)
class SerialRun:
    path: Path
    outs: dict[str, list[tuple[str, str]]]
    """dvc.lock's outputs right after the serial run (the tests change the project afterwards)."""


def serial_tiny(dst: Path) -> SerialRun:
    """The tiny profile after one complete run, results committed.  A plain `dvc repro` starts it and is
    killed (SIGKILL) mid-way through the first pretraining, after a checkpoint; the project's runner on two
    workers (``-j 2``, what `make repro` runs) resumes and finishes it.  The runner's launches cost a
    fraction of DVC's per stage (68 s against about 5 min for the profile); the tests that rerun single
    stages with plain `dvc repro` one at a time (``tests/test_pipeline_e2e.py``) find DVC's outputs
    identical to the runner's, and the Slurm test's two one-CPU shards find the whole lock identical."""
    tiny_copy(dst)
    killed = dvc(dst, "repro", check=False, env={"PRIORLAB_KILL_AT_STEP": "30"})
    assert killed.returncode != 0
    assert list((dst / ".checkpoints" / "pretrain").glob("*.pt")), "no checkpoint survived the kill"
    sh(dst, sys.executable, "-m", "stagerun.repro", "-j", "2")
    assert "up to date" in dvc(dst, "status").stdout
    again = sh(dst, sys.executable, "-m", "stagerun.repro", "-j", "2")
    assert "0 stage(s) ran" in again.stdout, again.stdout  # a second call runs nothing
    commit_all(dst, "results")
    return SerialRun(dst, lock_outs(dst))
