"""A throw-away git copy of the project (source files only) and the environment its pipeline runs in:
what the pipeline benchmarks and the end-to-end tests run ``dvc repro`` in."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path


RECORDS = ("reports/pipeline_timings_cpu.json", "reports/gpu/gpu_hours.json", "reports/sparse_vae_released_code_cpu.json",
           "reports/sparse_vae_released_code_movielens_cpu.json")
"""Committed records under ``reports/`` that a stage reads (the report prices missing units with them; paper
003's diagnosis sets the released code's runs beside the study's; ``tests/test_stage_deps.py`` checks the list)."""


def copy_project(root: Path, dst: Path) -> Path:
    """Git copy of the project's source files (no pipeline outputs; the :data:`RECORDS` they read and the
    ``.keep`` files of the folders stages depend on) at ``dst``, committed."""
    files = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"], cwd=root,
                           capture_output=True, check=True).stdout.split(b"\0")
    for f in filter(None, (x.decode() for x in files)):
        src = root / f
        if src.is_file() and (f in RECORDS or f.endswith("/.keep")  # a folder a stage depends on before any run writes it
                              or not f.startswith(("data/", "models/", "metrics/", "reports/"))) and f != "dvc.lock":
            (dst / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst / f)
    git = ["git", "-c", "user.email=bench@priorlab", "-c", "user.name=bench"]
    subprocess.run(["git", "init", "-q"], cwd=dst, check=True)
    subprocess.run([*git, "add", "-A"], cwd=dst, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "copy"], cwd=dst, check=True)
    return dst


def pipeline_env(project: Path) -> dict[str, str]:
    bin_dir = str(Path(sys.executable).parent)
    return {**os.environ, "PATH": bin_dir + os.pathsep + os.environ["PATH"], "DVC_NO_ANALYTICS": "1",
            "PYTHONPATH": str(project / "src")}
