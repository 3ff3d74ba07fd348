"""DVC stage `diagnosis`: see :func:`priorlab.studies.diagnosis.run_diagnosis`."""

import sys

from priorlab.cli import run_stage
from priorlab.studies.diagnosis import run_diagnosis

if __name__ == "__main__":
    sys.exit(run_stage(run_diagnosis))
