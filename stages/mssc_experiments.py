"""DVC stage `mssc_experiments`: see :func:`priorlab.studies.mssc_experiments.report.run_mssc_experiments`."""

import sys

from priorlab.cli import run_stage
from priorlab.studies.mssc_experiments.report import run_mssc_experiments

if __name__ == "__main__":
    sys.exit(run_stage(run_mssc_experiments))
