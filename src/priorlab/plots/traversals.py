"""Latent traversals (Higgins et al. 2017; Chen et al. 2018 style grid).

Row d decodes the posterior mean of one image with dimension d swept over
``[-span, span]`` (the other dimensions fixed); rows are ordered by the
dimension's average KL so the informative dimensions come first.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import torch

from priorlab.io import save_figure
from priorlab.plots.images import scale01, to_grid


@torch.no_grad()
def traversal_images(model, x: torch.Tensor, dims: list[int], steps: int, span: float) -> torch.Tensor:
    """``[len(dims) * steps, C, H, W]`` decoded means, row-major by dimension."""
    z0 = model.represent(x[:1])[0]
    values = torch.linspace(-span, span, steps)
    z = z0.repeat(len(dims) * steps, 1)
    for row, d in enumerate(dims):
        z[row * steps : (row + 1) * steps, d] = values
    return model.decode_mean(z)


@torch.no_grad()
def dimension_order(model, x: torch.Tensor) -> list[int]:
    """Latent dimensions sorted by decreasing posterior-mean variance over ``x``."""
    return torch.argsort(model.represent(x).var(0), descending=True).tolist()


def plot_traversals(
    model, x: torch.Tensor, path: str | Path, steps: int = 9, span: float = 2.5, max_dims: int = 10, title: str = ""
) -> Path:
    """Traverse the first image of ``x``; dimensions ordered by their variance over ``x``."""
    dims = dimension_order(model, x)[:max_dims] if len(x) > 1 else list(range(min(max_dims, model.represent(x).shape[1])))
    imgs = traversal_images(model, x[:1], dims, steps, span)
    fig, ax = plt.subplots(figsize=(0.8 * steps, 0.8 * len(dims) + 0.4))
    ax.imshow(to_grid(scale01(imgs), nrow=len(dims)), cmap="gray", vmin=0, vmax=1, interpolation="nearest")
    ax.set_yticks([(i + 0.5) * (imgs.shape[-2] + 1) for i in range(len(dims))], [f"z{d}" for d in dims])
    ax.set_xticks([])
    ax.set_title(f"{title}: traversals over [-{span}, {span}]", fontsize=9)
    path = Path(path)
    save_figure(path, fig)
    return path
