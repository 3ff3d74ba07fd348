"""DVC stage `vsc_experiments`: see :func:`priorlab.experiments.vsc_experiments.run_vsc_experiments`."""

import sys

from priorlab.cli import run_stage
from priorlab.experiments.vsc_experiments import run_vsc_experiments

if __name__ == "__main__":
    sys.exit(run_stage(run_vsc_experiments))
