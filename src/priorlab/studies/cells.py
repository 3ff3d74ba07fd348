"""A study cell: a DVC stage that trains a study's models (one per point of its grid).  Each study
declares its cells (a ``cells(params)`` function beside its fit); :func:`priorlab.pipeline.study_cells`
lists them all for whoever schedules the pipeline — ``stagerun``'s shards balance machines by their
costs and never name a paper.

A cell's cost is in VAE-step units: training steps x models x the relative cost of a step of the
model's kind (``ModelParams.step_cost``) on the setup's nets (``SetupParams.step_cost``).
"""

from __future__ import annotations

from dataclasses import dataclass

from priorlab.config import Params


@dataclass(frozen=True)
class Cell:
    stage: str  # the DVC stage, e.g. "isa_fit@isa_vae-0"
    dataset: str | None  # the data set whose data@ stage it reads; None: it builds its own data
    cost: float  # VAE-step units


def step_cost(params: Params, setup: str, model: str) -> float:
    """The cost of one training step of ``models.<model>`` on ``setups.<setup>``'s nets, in VAE steps."""
    return params.model(model).step_cost * params.setup(setup).step_cost
