"""Test images (top row) and their reconstructions from the posterior mean (bottom row)."""

from __future__ import annotations

from pathlib import Path

import torch

from priorlab.plots.images import save_image_grid, scale01


@torch.no_grad()
def plot_reconstructions(model, x: torch.Tensor, path: str | Path, title: str = "") -> Path:
    recon = model.reconstruct(x)
    return save_image_grid(torch.cat([scale01(x), scale01(recon)]), 2, path,
                           f"{title}: data (top), reconstruction (bottom)", figsize=(1.0 * len(x), 2.2), fontsize=9)
