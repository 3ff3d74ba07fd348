"""DVC stage `evaluate`: see :func:`priorlab.pipeline.run_evaluate`."""

import sys

from priorlab.cli import run_stage
from priorlab.pipeline import run_evaluate

if __name__ == "__main__":
    sys.exit(run_stage(run_evaluate, "run"))
