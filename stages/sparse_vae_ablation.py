"""DVC stage `sparse_vae_ablation`: see :func:`priorlab.studies.sparse_vae_experiments.real.run_sparse_vae_ablation`."""

import sys

from priorlab.cli import run_stage
from priorlab.studies.sparse_vae_experiments.real import run_sparse_vae_ablation

if __name__ == "__main__":
    sys.exit(run_stage(run_sparse_vae_ablation, "ablation"))
