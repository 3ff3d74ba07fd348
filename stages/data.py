"""DVC stage `data`: see :func:`priorlab.pipeline.run_data`."""

import sys

from priorlab.cli import run_stage
from priorlab.pipeline import run_data

if __name__ == "__main__":
    sys.exit(run_stage(run_data, "dataset"))
