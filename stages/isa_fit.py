"""DVC stage `isa_fit`: see :func:`priorlab.studies.isa_experiments.fit.run_isa_fit`."""

import sys

from priorlab.cli import run_stage
from priorlab.studies.isa_experiments.fit import run_isa_fit

if __name__ == "__main__":
    sys.exit(run_stage(run_isa_fit, "model", "seed"))
