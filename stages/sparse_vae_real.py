"""DVC stage `sparse_vae_real`: see :func:`priorlab.experiments.sparse_vae_real.run_sparse_vae_real`."""

import sys

from priorlab.cli import run_stage
from priorlab.experiments.sparse_vae_real import run_sparse_vae_real

if __name__ == "__main__":
    sys.exit(run_stage(run_sparse_vae_real))
