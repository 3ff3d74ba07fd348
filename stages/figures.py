"""DVC stage `figures`: see :func:`priorlab.pipeline.run_figures`."""

import sys

from priorlab.cli import run_stage
from priorlab.pipeline import run_figures

if __name__ == "__main__":
    sys.exit(run_stage(run_figures))
