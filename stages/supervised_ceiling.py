"""DVC stage `supervised_ceiling`: see :func:`priorlab.studies.fmvae_experiments.supervised_ceiling.run_supervised_ceiling`."""

import sys

from priorlab.cli import run_stage
from priorlab.studies.fmvae_experiments.supervised_ceiling import run_supervised_ceiling

if __name__ == "__main__":
    sys.exit(run_stage(run_supervised_ceiling))
