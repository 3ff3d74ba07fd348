"""DVC stage `fmvae_experiments`: see :func:`priorlab.experiments.factorial_mixture.run_fmvae_experiments`."""

import sys

from priorlab.cli import run_stage
from priorlab.experiments.factorial_mixture import run_fmvae_experiments

if __name__ == "__main__":
    sys.exit(run_stage(run_fmvae_experiments))
