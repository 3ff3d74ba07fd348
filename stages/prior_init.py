"""DVC stage `prior_init`: see :func:`priorlab.pipeline.run_prior_init`."""

import sys

from priorlab.cli import run_stage
from priorlab.pipeline import run_prior_init

if __name__ == "__main__":
    sys.exit(run_stage(run_prior_init, "setup"))
