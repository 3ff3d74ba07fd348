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
    """One panel per ELBO term; phases drawn one after another along the step axis."""
    fig, axes = plt.subplots(1, len(CURVES), figsize=(4 * len(CURVES), 3))
    offset = 0
    for live_dir in live_dirs:
        metrics = read_live_metrics(live_dir)
        phase = Path(live_dir).parent.name
        last = 0
        for ax, name in zip(axes, CURVES):
            if name in metrics:
                df = metrics[name]
                ax.plot(df["step"] + offset, df["value"], label=phase)
                last = max(last, int(df["step"].max()))
        offset += last
    for ax, name in zip(axes, CURVES):
        ax.set_title(name)
        ax.set_xlabel("step")
        ax.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    path = Path(path)
    save_figure(path, fig)
    return path
