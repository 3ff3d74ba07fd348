"""DVC stage `param_slices`: see :func:`priorlab.studies.param_slices.run_param_slices`."""

import sys

from priorlab.cli import run_stage
from priorlab.studies.param_slices import run_param_slices

if __name__ == "__main__":
    sys.exit(run_stage(run_param_slices))
