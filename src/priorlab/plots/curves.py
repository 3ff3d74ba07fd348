"""Training curves from the dvclive logs of one or more training phases."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from priorlab.io import save_figure

CURVES = ("elbo", "log_lik", "kl")


def read_live_metrics(live_dir: str | Path) -> dict[str, pd.DataFrame]:
    """``{metric: DataFrame[step, value]}`` from a dvclive directory (empty if absent)."""
    out = {}
    for tsv in sorted((Path(live_dir) / "plots" / "metrics").rglob("*.tsv")):
        df = pd.read_csv(tsv, sep="\t")
        out[tsv.stem] = df.rename(columns={tsv.stem: "value"})[["step", "value"]]
    return out


def plot_training_curves(live_dirs: list[str | Path], path: str | Path, title: str = "") -> Path:
    """One panel per ELBO term the phases logged (none logged, e.g. a model fitted in closed form: one
    panel saying so); phases drawn one after another along the step axis."""
    logged = [read_live_metrics(d) for d in live_dirs]
    names = [c for c in CURVES if any(c in m for m in logged)]
    fig, axes = plt.subplots(1, max(len(names), 1), figsize=(4 * max(len(names), 1), 3), squeeze=False)
    axes = axes[0]
    offset = 0
    for live_dir, metrics in zip(live_dirs, logged):
        phase = Path(live_dir).parent.name
        last = 0
        for ax, name in zip(axes, names):
            if name in metrics:
                df = metrics[name]
                ax.plot(df["step"] + offset, df["value"], label=phase)
                last = max(last, int(df["step"].max()))
        offset += last
    for ax, name in zip(axes, names):
        ax.set_title(name)
        ax.set_xlabel("step")
        ax.legend(fontsize=8)
    if not names:
        axes[0].axis("off")
        axes[0].text(0.5, 0.5, "no training curves logged\n(a model fitted without gradient steps)",
                     ha="center", va="center")
    fig.suptitle(title)
    fig.tight_layout()
    path = Path(path)
    save_figure(path, fig)
    return path
