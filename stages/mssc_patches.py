"""DVC stage `mssc_patches`: see :func:`priorlab.studies.mssc_experiments.fit.run_mssc_patches`."""

import sys

from priorlab.cli import run_stage
from priorlab.studies.mssc_experiments.fit import run_mssc_patches

if __name__ == "__main__":
    sys.exit(run_stage(run_mssc_patches, "model"))
