"""Process-wide CPU settings priorlab applies at import (OpenMP wait policy, glibc malloc)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

SRC = str(Path(__file__).resolve().parents[1] / "src")


def _probe(env_extra: dict) -> list[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "PRIORLAB_MALLOC_TUNING")}
    env.update(PYTHONPATH=SRC, **env_extra)
    out = subprocess.run([sys.executable, "-c", "import os, priorlab; print(priorlab.MALLOC_TUNED, "
                          "os.environ['OMP_WAIT_POLICY'])"], env=env, capture_output=True, text=True, check=True)
    return out.stdout.split()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc mallopt is Linux-only")
def test_malloc_tuning_applies_by_default_and_can_be_turned_off():
    assert _probe({}) == ["True", "PASSIVE"]
    assert _probe({"PRIORLAB_MALLOC_TUNING": "0"})[0] == "False"


def test_an_explicit_omp_wait_policy_wins():
    assert _probe({"OMP_WAIT_POLICY": "ACTIVE"})[1] == "ACTIVE"
