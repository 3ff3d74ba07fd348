"""DVC stage `train`: see :func:`priorlab.pipeline.run_train`."""

import sys

from priorlab.cli import run_stage
from priorlab.pipeline import run_train

if __name__ == "__main__":
    sys.exit(run_stage(run_train, "run"))
