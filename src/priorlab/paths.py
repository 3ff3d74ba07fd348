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
DIAGNOSIS = "diagnosis"
"""The first folder of every diagnosis arm's outputs (issue 43): runs of a group ``diagnosis/<study>/...``
and the studies' ablation stages write under it, outside every folder a claim, ``figures`` or the report
reads, so ``dvc repro report`` never trains an arm; the ``diagnosis`` stage reads them."""


LIBRARY = Path("src") / "priorlab"
"""The library's source, as ``dvc.yaml``'s ``code`` stage names it (its one dependency on the package)."""


def code_digest_file() -> Path:
    """Output of ``code``: the sha256 of each of :data:`LIBRARY`'s files, what every other stage depends on."""
    return MODELS / "code.json"


def is_diagnosis(group: str) -> bool:
    """Whether runs of ``group`` are diagnosis arms (``diagnosis/...``) rather than runs a claim reads."""
    return group.split("/")[0] == DIAGNOSIS


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


def pretrain_live_dir(setup: str) -> Path:
    """``pretrain@<setup>``'s dvclive curves."""
    return REPORTS / "live" / "pretrain" / setup


def train_live_dir(run: str, group: str) -> Path:
    """``train@<run>``'s dvclive curves, in its group's folder like its model (so the stages reading one
    group's curves never depend on another's runs)."""
    return REPORTS / "live" / "train" / group / run


def evaluation_file(run: str, group: str) -> Path:
    """``evaluate@<run>``'s record (every score, the settings and versions; a cached output)."""
    return MODELS / "evaluate" / group / f"{run}.json"


def metrics_file(run: str, group: str) -> Path:
    """``evaluate@<run>``'s headline numbers for ``dvc metrics`` (in git)."""
    return METRICS / group / f"{run}.json"


def figures_dir(run: str) -> Path:
    return REPORTS / "figures" / run


def diagnosis_file(study: str) -> Path:
    """The ``diagnosis`` stage's report of ``study``: why the study's failing claims fail (issue 43)."""
    return REPORTS / DIAGNOSIS / f"{study}.md"


def ablation_dir(study: str, arm: str) -> Path:
    """The output of one of ``study``'s ablation stages (a diagnosis arm fitted outside the study's folder)."""
    return MODELS / DIAGNOSIS / study / arm


def experiment_dir(name: str) -> Path:
    """Report folder of the experiment stage ``name`` (stage, package ``priorlab.studies.<name>``
    and folder share the name); its ``summary.json`` is gathered by the report."""
    return REPORTS / name


def checkpoint_file(phase: str, run: str) -> Path:
    return CHECKPOINTS / phase / f"{run}.pt"
