"""DVC stage `sparse_coding`: see :func:`priorlab.experiments.sparse_coding.run_sparse_coding`."""

import sys

from priorlab.cli import run_stage
from priorlab.experiments.sparse_coding import run_sparse_coding

if __name__ == "__main__":
    sys.exit(run_stage(run_sparse_coding))
