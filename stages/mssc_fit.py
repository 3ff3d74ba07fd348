"""DVC stage `mssc_fit`: see :func:`priorlab.experiments.mssc_fit.run_mssc_fit`."""

import sys

from priorlab.cli import run_stage
from priorlab.experiments.mssc_fit import run_mssc_fit

if __name__ == "__main__":
    sys.exit(run_stage(run_mssc_fit, "model", "bars"))
