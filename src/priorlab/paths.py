"""Where every stage reads and writes (relative to the project root).

Runs are the keys of ``runs:`` in params.yaml (by convention ``<setup>-<model>-<seed>``).
"""

from __future__ import annotations

from pathlib import Path

DATA = Path("data")
MODELS = Path("models")
METRICS = Path("metrics")
REPORTS = Path("reports")
CHECKPOINTS = Path(".checkpoints")  # resumable state of running stages; not a DVC output


def data_dir(dataset: str) -> Path:
    return DATA / dataset


def pretrain_dir(setup: str) -> Path:
    return MODELS / "pretrain" / setup


def prior_init_dir(run: str) -> Path:
    return MODELS / "prior_init" / run


def train_dir(run: str) -> Path:
    return MODELS / "train" / run


def live_dir(phase: str, run: str) -> Path:
    return REPORTS / "live" / phase / run


def metrics_file(run: str) -> Path:
    return METRICS / f"{run}.json"


def figures_dir(run: str) -> Path:
    return REPORTS / "figures" / run


def experiment_dir(name: str) -> Path:
    """Report folder of the experiment stage ``name`` (stage, module ``priorlab.experiments.<name>``
    and folder share the name); its ``summary.json`` is gathered by the report."""
    return REPORTS / name


def checkpoint_file(phase: str, run: str) -> Path:
    return CHECKPOINTS / phase / f"{run}.pt"
