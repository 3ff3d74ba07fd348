"""DVC stage `train`: see :func:`priorlab.pipeline.run_train`.

``--runs a,b,c`` instead of ``--run``: those runs' ``train@`` work in one vectorised process
(:func:`priorlab.pipeline.run_train_arm`; the seeds of one arm), each output where its stage writes it.
``--arms a,b,c``: print (JSON) which of those runs train together under ``replicates``
(:func:`priorlab.pipeline.train_arms`); the runner asks before it launches them (the stage's ``meta``)."""

import json
import sys

from priorlab.cli import run_stage
from priorlab.pipeline import run_train, run_train_arm, train_arms


def print_arms(params, runs: str) -> None:
    """Print which of the runs train together (JSON: a list of run lists)."""
    print(json.dumps(train_arms(params, runs)))


if __name__ == "__main__":
    argv = sys.argv[1:]
    if any(a == "--arms" or a.startswith("--arms=") for a in argv):
        sys.exit(run_stage(print_arms, "arms"))
    if any(a == "--runs" or a.startswith("--runs=") for a in argv):
        sys.exit(run_stage(run_train_arm, "runs"))
    sys.exit(run_stage(run_train, "run"))
