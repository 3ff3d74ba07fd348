"""Image-grid helpers shared by the reconstruction, traversal and study figures."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import torch

from priorlab.io import save_figure


def to_grid(images: torch.Tensor | np.ndarray, nrow: int) -> np.ndarray:
    """Tile ``[N, C, H, W]`` images (C = 1) into one 2-D array with ``nrow`` rows, 1-px gaps."""
    imgs = np.asarray(images.detach().cpu() if isinstance(images, torch.Tensor) else images, dtype=np.float64)
    imgs = imgs[:, 0]
    n, h, w = imgs.shape
    ncol = -(-n // nrow)
    grid = np.ones((nrow * (h + 1) - 1, ncol * (w + 1) - 1))
    for i in range(n):
        r, c = divmod(i, ncol)
        grid[r * (h + 1) : r * (h + 1) + h, c * (w + 1) : c * (w + 1) + w] = imgs[i]
    return grid


def scale01(x: torch.Tensor) -> torch.Tensor:
    """Rescale each image to [0, 1] for display (L2-normalised inputs are not in [0, 1])."""
    flat = x.flatten(1)
    lo, hi = flat.min(1, keepdim=True)[0], flat.max(1, keepdim=True)[0]
    return ((flat - lo) / (hi - lo).clamp_min(1e-12)).view_as(x)


def save_image_grid(images: torch.Tensor | np.ndarray, nrow: int, path: str | Path, title: str,
                    figsize: tuple[float, float], fontsize: int = 8) -> Path:
    """``images`` (values in [0, 1]) tiled by :func:`to_grid` in grey, titled, written to ``path``."""
    fig, ax = plt.subplots(figsize=figsize)
    ax.imshow(to_grid(images, nrow=nrow), cmap="gray", vmin=0, vmax=1, interpolation="nearest")
    ax.set_axis_off()
    ax.set_title(title, fontsize=fontsize)
    path = Path(path)
    save_figure(path, fig)
    return path
