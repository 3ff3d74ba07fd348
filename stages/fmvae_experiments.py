"""DVC stage `fmvae_experiments`: see :func:`priorlab.studies.fmvae_experiments.report.run_fmvae_experiments`."""

import sys

from priorlab.cli import run_stage
from priorlab.studies.fmvae_experiments.report import run_fmvae_experiments

if __name__ == "__main__":
    sys.exit(run_stage(run_fmvae_experiments))
