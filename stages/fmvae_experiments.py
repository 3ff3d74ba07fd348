"""DVC stage `fmvae_experiments`: see :func:`priorlab.experiments.fmvae_experiments.run_fmvae_experiments`."""

import sys

from priorlab.cli import run_stage
from priorlab.experiments.fmvae_experiments import run_fmvae_experiments

if __name__ == "__main__":
    sys.exit(run_stage(run_fmvae_experiments))
