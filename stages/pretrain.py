"""DVC stage `pretrain`: see :func:`priorlab.pipeline.run_pretrain`."""

import sys

from priorlab.cli import run_stage
from priorlab.pipeline import run_pretrain

if __name__ == "__main__":
    sys.exit(run_stage(run_pretrain, "setup"))
