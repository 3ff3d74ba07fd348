"""DVC stage `sparse_vae_experiments`: see :func:`priorlab.studies.sparse_vae_experiments.report.run_sparse_vae_experiments`."""

import sys

from priorlab.cli import run_stage
from priorlab.studies.sparse_vae_experiments.report import run_sparse_vae_experiments

if __name__ == "__main__":
    sys.exit(run_stage(run_sparse_vae_experiments))
