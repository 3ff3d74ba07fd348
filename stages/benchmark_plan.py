"""DVC stage `benchmark_plan`: see :func:`priorlab.studies.benchmark.plan.run_benchmark_plan`."""

import sys

from priorlab.cli import run_stage
from priorlab.studies.benchmark.plan import run_benchmark_plan

if __name__ == "__main__":
    sys.exit(run_stage(run_benchmark_plan))
