"""Trained runs for the experiment stages: the runs of a group, a run's model with its data, and
a model applied to many inputs in batches (no gradients, float64 numpy out)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

from priorlab import paths
from priorlab.config import Params
from priorlab.errors import UserError
from priorlab.io import read_json

if TYPE_CHECKING:
    from priorlab.data.store import Dataset
    from priorlab.models.vae import VAE


def stage_output(path: Path, stage: str, study: str) -> dict:
    """The JSON file ``path`` that ``stage`` writes, read; a ``UserError`` naming the stage (and the study
    whose ``dvc repro`` runs it) when it has not run."""
    if not path.is_file():
        raise UserError(f"{path} is missing: stage {stage} has not run (dvc repro {study} runs it)")
    return read_json(path)


def model_file(params: Params, run: str) -> Path:
    """The trained model of ``run`` (in its group's folder)."""
    return paths.train_dir(run, params.run(run).group) / "model.pt"


def metrics_file(params: Params, run: str) -> Path:
    """The headline numbers the evaluate stage writes for ``run`` (in git: present in a fresh clone)."""
    return paths.metrics_file(run, params.run(run).group)


def evaluation_file(params: Params, run: str) -> Path:
    """The record the evaluate stage writes for ``run`` (in its group's folder)."""
    return paths.evaluation_file(run, params.run(run).group)


def is_trained(params: Params, run: str) -> bool:
    """Whether the ``train`` stage has written the run's model."""
    return model_file(params, run).is_file()


def group_runs(params: Params, *groups: str, trained: bool = False) -> list[str]:
    """Names of the runs of ``params.runs`` in any of ``groups``, in params order; with ``trained``
    only those whose trained model exists."""
    return [r for r, spec in params.runs.items()
            if spec.group in groups and (not trained or is_trained(params, r))]


def pretraining_unit(params: Params, run: str) -> str:
    """The independent unit a run belongs to: the setup whose pretraining it starts from (every seed on
    one pretraining shares it; a setup replicate ``setups.<name>.seed`` is a unit of its own), or the
    run itself where its setup is not pretrained (trained from scratch)."""
    setup = params.run(run).setup
    return setup if params.setup(setup).pretraining else run


def load_trained(params: Params, run: str) -> tuple[VAE, Dataset]:
    """The trained model of ``run`` (eval mode) and the data set of its setup."""
    from priorlab.phases import load_model, load_setup_data  # lazy: +26 modules, ~56 ms at import priorlab.studies.runs

    r = params.run(run)
    data = load_setup_data(params, r.setup)
    model, _ = load_model(params, r.setup, r.model, model_file(params, run), data.obs_shape)
    return model, data


@torch.no_grad()
def in_batches(fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, batch: int = 500) -> np.ndarray:
    """``fn`` over ``x`` in batches of ``batch`` rows, concatenated: a float64 array."""
    return torch.cat([fn(x[s : s + batch]) for s in range(0, len(x), batch)]).double().numpy()


def encode(model: VAE, x: torch.Tensor, batch: int = 500) -> np.ndarray:
    """The representation (posterior mean) of ``x``: ``[N, D]`` float64."""
    return in_batches(model.represent, x, batch)
