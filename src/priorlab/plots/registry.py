"""The figures the ``figures`` stage draws for each run: one entry per figure, declaring the observation
kinds it can draw and the model capability it needs (a vector data set gets no image grid, a
model without a decoder no reconstructions).  Adding a figure is one entry here.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch

from priorlab.config import FigureParams
from priorlab.models.protocol import Generative, Model

ANY_KIND = frozenset({"image", "vector", "counts"})


@dataclass(frozen=True)
class RunFigureInputs:
    """Everything a per-run figure may use."""

    model: Model
    x: torch.Tensor  # prepared test observations (``figures.n_reconstructions`` of them)
    live_dirs: list[Path]  # dvclive folders of the phases, in order
    params: FigureParams
    title: str


@dataclass(frozen=True)
class RunFigure:
    name: str  # the file is ``<name>.png``
    observation_kinds: frozenset[str]
    needs: type | None  # a capability of priorlab.models.protocol, or None
    draw: Callable[[RunFigureInputs, Path], Path]

    def applies(self, model: Model, observation_kind: str) -> bool:
        return observation_kind in self.observation_kinds and (self.needs is None or isinstance(model, self.needs))


def _curves(f: RunFigureInputs, path: Path) -> Path:
    from priorlab.plots.curves import (  # lazy: pyplot + pandas, ~602 ms at import priorlab.plots.registry
        plot_training_curves)

    return plot_training_curves(f.live_dirs, path, title=f.title)


def _reconstructions(f: RunFigureInputs, path: Path) -> Path:
    from priorlab.plots.reconstructions import (  # lazy: pyplot, ~310 ms at import priorlab.plots.registry
        plot_reconstructions)

    return plot_reconstructions(f.model, f.x, path, title=f.title)


def _traversals(f: RunFigureInputs, path: Path) -> Path:
    from priorlab.plots.traversals import plot_traversals  # lazy: pyplot, ~323 ms at import priorlab.plots.registry

    p = f.params
    return plot_traversals(f.model, f.x, path, steps=p.traversal_steps, span=p.traversal_range,
                           max_dims=p.max_traversal_dims, title=f.title)


RUN_FIGURES: tuple[RunFigure, ...] = (
    RunFigure("curves", ANY_KIND, None, _curves),
    RunFigure("reconstructions", frozenset({"image"}), Generative, _reconstructions),
    RunFigure("traversals", frozenset({"image"}), Generative, _traversals),
)
"""The per-run figures, in the order they are drawn."""
