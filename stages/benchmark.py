"""DVC stage `benchmark`: see :func:`priorlab.studies.benchmark.report.run_benchmark`."""

import sys

from priorlab.cli import run_stage
from priorlab.studies.benchmark.report import run_benchmark

if __name__ == "__main__":
    sys.exit(run_stage(run_benchmark))
