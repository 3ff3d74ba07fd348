"""Test images (top row) and their reconstructions from the posterior mean (bottom row)."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import torch

from priorlab.io import save_figure
from priorlab.plots.images import scale01, to_grid


@torch.no_grad()
def plot_reconstructions(model, x: torch.Tensor, path: str | Path, title: str = "") -> Path:
    recon = model.reconstruct(x)
    grid = to_grid(torch.cat([scale01(x), scale01(recon)]), nrow=2)
    fig, ax = plt.subplots(figsize=(1.0 * len(x), 2.2))
    ax.imshow(grid, cmap="gray", vmin=0, vmax=1, interpolation="nearest")
    ax.set_axis_off()
    ax.set_title(f"{title}: data (top), reconstruction (bottom)", fontsize=9)
    path = Path(path)
    save_figure(path, fig)
    return path
