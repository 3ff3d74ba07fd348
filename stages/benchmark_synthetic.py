"""DVC stage `benchmark_synthetic`: see :func:`priorlab.studies.benchmark.synthetic.run_benchmark_synthetic`."""

import sys

from priorlab.cli import run_stage
from priorlab.studies.benchmark.synthetic import run_benchmark_synthetic

if __name__ == "__main__":
    sys.exit(run_stage(run_benchmark_synthetic, "prior"))
