"""DVC stage `vsc_experiments`: see :func:`priorlab.studies.vsc_experiments.report.run_vsc_experiments`."""

import sys

from priorlab.cli import run_stage
from priorlab.studies.vsc_experiments.report import run_vsc_experiments

if __name__ == "__main__":
    sys.exit(run_stage(run_vsc_experiments))
