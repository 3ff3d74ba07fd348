"""DVC stage `sparse_vae_fit`: see :func:`priorlab.studies.sparse_vae_experiments.fit.run_sparse_vae_fit`."""

import sys

from priorlab.cli import run_stage
from priorlab.studies.sparse_vae_experiments.fit import run_sparse_vae_fit

if __name__ == "__main__":
    sys.exit(run_stage(run_sparse_vae_fit, "rho"))
