"""Process-wide CPU settings: the OpenMP wait policy priorlab sets at import, and the glibc malloc
tuning a stage applies when it starts (not at import)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

SRC = str(Path(__file__).resolve().parents[1] / "src")
PROBE = ("import os, priorlab, priorlab.runtime as rt\n"
         "at_import = rt._applied\n"
         "from priorlab.cli import run_stage\n"
         "def noop(params):\n    'A stage that does nothing.'\n"
         "run_stage(noop, argv=['--params', 'profiles/tiny.yaml'])\n"
         "print(at_import, rt._applied, os.environ['OMP_WAIT_POLICY'])")


def _probe(env_extra: dict) -> list[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "PRIORLAB_MALLOC_TUNING")}
    env.update(PYTHONPATH=SRC, **env_extra)
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True,
                         cwd=Path(SRC).parent)
    return out.stdout.split()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc mallopt is Linux-only")
def test_malloc_tuning_applies_when_a_stage_starts_not_at_import_and_can_be_turned_off():
    assert _probe({}) == ["None", "True", "PASSIVE"]
    assert _probe({"PRIORLAB_MALLOC_TUNING": "0"})[:2] == ["None", "False"]


def test_an_explicit_omp_wait_policy_wins():
    assert _probe({"OMP_WAIT_POLICY": "ACTIVE"})[2] == "ACTIVE"
