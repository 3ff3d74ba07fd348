"""DVC stage `setup_runs`: see :func:`priorlab.pipeline.run_setup_runs`."""

import sys

from priorlab.cli import run_stage
from priorlab.pipeline import run_setup_runs

if __name__ == "__main__":
    sys.exit(run_stage(run_setup_runs))
