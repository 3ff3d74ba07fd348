"""DVC stage `train`: see :func:`priorlab.pipeline.run_train`.

``--runs a,b,c`` instead of ``--run``: those runs' ``train@`` work in one vectorised process
(:func:`priorlab.pipeline.run_train_arm`; the seeds of one arm), each output where its stage writes it."""

import sys

from priorlab.cli import run_stage
from priorlab.pipeline import run_train, run_train_arm

if __name__ == "__main__":
    if any(a == "--runs" or a.startswith("--runs=") for a in sys.argv[1:]):
        sys.exit(run_stage(run_train_arm, "runs"))
    sys.exit(run_stage(run_train, "run"))
