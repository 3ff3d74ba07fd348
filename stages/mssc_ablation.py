"""DVC stage `mssc_ablation`: see :func:`priorlab.studies.mssc_experiments.fit.run_mssc_ablation`."""

import sys

from priorlab.cli import run_stage
from priorlab.studies.mssc_experiments.fit import run_mssc_ablation

if __name__ == "__main__":
    sys.exit(run_stage(run_mssc_ablation, "ablation"))
