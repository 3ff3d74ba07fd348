"""A fitted model's codes at a glance: how much each latent varies over the data (the active ones,
Burda et al. 2016), and the data in the plane of the two that vary most."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from priorlab.io import save_figure


def plot_latents(codes: np.ndarray, path: str | Path, title: str = "", threshold: float = 0.01,
                 labels: np.ndarray | None = None) -> Path:
    """Left: Var_x of each latent's posterior mean (bars; dashed: the active-dimension ``threshold``).
    Right: the rows' codes on the two latents of largest variance (coloured by ``labels`` if given)."""
    codes = np.asarray(codes, dtype=np.float64)
    var = codes.var(axis=0)
    order = np.argsort(-var, kind="stable")
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.6))
    left.bar(np.arange(len(var)), var, color=np.where(var > threshold, "tab:blue", "tab:gray"))
    left.axhline(threshold, color="k", ls="--", lw=0.8)
    left.set_xlabel("latent")
    left.set_ylabel("variance of the posterior mean")
    left.set_title(f"{int((var > threshold).sum())} of {len(var)} active", fontsize=9)
    if codes.shape[1] >= 2:
        a, b = order[:2]
        right.scatter(codes[:, a], codes[:, b], s=4, c=labels if labels is not None else "tab:blue",
                      cmap="tab10" if labels is not None else None, alpha=0.6)
        right.set_xlabel(f"z{a}")
        right.set_ylabel(f"z{b}")
    else:
        right.hist(codes[:, 0], bins=40, color="tab:blue")
        right.set_xlabel("z0")
    right.set_title("the two most varying latents", fontsize=9)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    path = Path(path)
    save_figure(path, fig)
    return path
