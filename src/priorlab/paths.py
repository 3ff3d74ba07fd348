"""Where every stage reads and writes (relative to the project root).

Runs are the keys of ``runs:`` in params.yaml (by convention ``<setup>-<model>-<seed>``).  Trained
models and metrics files sit in a folder per experiment group (``runs.<run>.group``), so that an
experiment stage depends on its own groups' runs only: adding runs of another paper leaves it alone.
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


def setup_runs_root() -> Path:
    """Output of ``setup_runs``: ``<setup>.json`` per setup, what its ``prior_init@`` reads of the params."""
    return MODELS / "setup_runs"


def setup_runs_file(setup: str) -> Path:
    return setup_runs_root() / f"{setup}.json"


def prior_init_root(setup: str) -> Path:
    """Output of ``prior_init@<setup>``: one folder per run of the setup (and ``runs.json``)."""
    return MODELS / "prior_init" / setup


def prior_init_dir(run: str, setup: str) -> Path:
    return prior_init_root(setup) / run


def train_dir(run: str, group: str) -> Path:
    return MODELS / "train" / group / run


def live_dir(phase: str, run: str) -> Path:
    return REPORTS / "live" / phase / run


def evaluation_file(run: str, group: str) -> Path:
    """``evaluate@<run>``'s record (every score, the settings and versions; a cached output)."""
    return MODELS / "evaluate" / group / f"{run}.json"


def metrics_file(run: str, group: str) -> Path:
    """``evaluate@<run>``'s headline numbers for ``dvc metrics`` (in git)."""
    return METRICS / group / f"{run}.json"


def figures_dir(run: str) -> Path:
    return REPORTS / "figures" / run


def experiment_dir(name: str) -> Path:
    """Report folder of the experiment stage ``name`` (stage, package ``priorlab.studies.<name>``
    and folder share the name); its ``summary.json`` is gathered by the report."""
    return REPORTS / name


def checkpoint_file(phase: str, run: str) -> Path:
    return CHECKPOINTS / phase / f"{run}.pt"
