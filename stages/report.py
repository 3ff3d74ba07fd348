"""DVC stage `report`: see :func:`priorlab.pipeline.run_report`."""

import sys

from priorlab.cli import run_stage
from priorlab.pipeline import run_report

if __name__ == "__main__":
    sys.exit(run_stage(run_report))
