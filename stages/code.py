"""DVC stage `code`: see :func:`priorlab.pipeline.run_code`."""

import sys

from priorlab.cli import run_stage
from priorlab.pipeline import run_code

if __name__ == "__main__":
    sys.exit(run_stage(run_code))
