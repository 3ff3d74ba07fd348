"""DVC stage `isa_experiments`: see :func:`priorlab.studies.isa_experiments.report.run_isa_experiments`."""

import sys

from priorlab.cli import run_stage
from priorlab.studies.isa_experiments.report import run_isa_experiments

if __name__ == "__main__":
    sys.exit(run_stage(run_isa_experiments))
