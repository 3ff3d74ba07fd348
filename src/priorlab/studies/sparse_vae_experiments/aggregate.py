"""Paper 003's study, read and tabulated: the ``sparse_vae_fit`` cells' rows (and the heatmap's W), the
``sparse_vae_real`` stage's rows, the medians and quartiles per (method, ρ) of fig. 2–4, and
``recovery_vs_rho.csv`` (the data plots of ``dvc plots``).  No figures, no claims."""

from __future__ import annotations

from typing import Any

import numpy as np

from priorlab import paths
from priorlab.config import Params
from priorlab.studies.sparse_vae_experiments import NAME
from priorlab.studies.sparse_vae_experiments.fit import cell_dir
from priorlab.studies.runs import stage_output


def study_rows(params: Params) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Every (ρ, data set, method) row, from the ``sparse_vae_fit`` cells in ``rhos`` order, and the W
    of the first sparse VAE at the first ρ that has one (the heatmap); a ``UserError`` for a missing cell."""
    rows: list[dict[str, Any]] = []
    heat: dict[str, Any] = {}
    for rho in params.sparse_vae_study.rhos:
        cell = stage_output(cell_dir(rho) / "rows.json", f"sparse_vae_fit@{float(rho)!r}", NAME)
        rows += cell["rows"]
        if cell["heat"] and not heat:
            h = cell["heat"]
            heat = {"W": np.asarray(h["W"], dtype=np.float32), "rho": h["rho"],
                    "support": np.asarray(h["support"], dtype=bool), "match": np.asarray(h["match"], dtype=int)}
    return rows, heat


def real_fits() -> dict[str, Any]:
    """The ``sparse_vae_real`` stage's rows; a ``UserError`` when it has not run."""
    from priorlab.studies.sparse_vae_experiments.real import (
        REAL_CELL)  # lazy: +15 modules, ~27 ms at import priorlab.studies.sparse_vae_experiments.aggregate

    return stage_output(paths.MODELS / NAME / REAL_CELL / "rows.json", "sparse_vae_real", NAME)


def read_movielens_arms(params: Params) -> dict[str, dict[str, Any]]:
    """Every ``sparse_vae_study.movielens_ablations`` arm: name → {``settings`` (a dict), ``rows``}; a
    ``UserError`` naming the first arm that has not run."""
    import dataclasses

    from priorlab.studies.sparse_vae_experiments.real import (
        ablation_dir)  # lazy: +15 modules, ~27 ms at import priorlab.studies.sparse_vae_experiments.aggregate

    return {name: {"settings": dataclasses.asdict(arm),
                   "rows": stage_output(ablation_dir(name) / "rows.json", f"sparse_vae_ablation@{name}",
                                        NAME)["movielens_rows"]}
            for name, arm in params.sparse_vae_study.movielens_ablations.items()}


RHO_SCORES = ("mse", "dci_d", "precision", "recall", "f1", "active_columns")  # per-row scores


def summarise(rows: list[dict[str, Any]]) -> dict[str, dict[float, dict[str, float]]]:
    """method → ρ → n, median, lower / upper quartile of every numeric score, and the collapse rate."""
    out: dict[str, dict[float, dict[str, float]]] = {}
    for method in dict.fromkeys(r["method"] for r in rows):
        out[method] = {}
        for rho in dict.fromkeys(r["rho"] for r in rows):
            sel = [r for r in rows if r["method"] == method and r["rho"] == rho]
            if not sel:
                continue
            keys = [k for k in RHO_SCORES if k in sel[0]]
            stats: dict[str, float] = {"n": float(len(sel))}
            for k in keys:
                v = np.array([r[k] for r in sel], dtype=float)
                stats.update({k: float(np.median(v)), f"{k}_q25": float(np.quantile(v, 0.25)),
                              f"{k}_q75": float(np.quantile(v, 0.75)), f"{k}_mean": float(v.mean())})
            if "collapsed" in sel[0]:
                stats["collapse_rate"] = float(np.mean([r["collapsed"] for r in sel]))
            out[method][rho] = stats
    return out


def recovery_table(summary: dict[str, dict[float, dict[str, float]]]) -> tuple[list[str], list[list[float]]]:
    """``recovery_vs_rho.csv``, the data plots of fig. 2–4 that ``dvc plots diff`` overlays across
    commits: one row per ρ, one column ``<score>_<method>`` per score a method has (the median over
    data sets of :func:`summarise`; ``f1`` etc. only for the sparse VAE and the linear baselines;
    ``collapse_rate`` for the deep models)."""
    rhos = sorted({r for per_rho in summary.values() for r in per_rho})
    cols = [(k, m) for k in (*RHO_SCORES, "collapse_rate") for m, per_rho in summary.items()
            if any(k in v for v in per_rho.values())]
    rows = [[rho, *(summary[m].get(rho, {}).get(k, float("nan")) for k, m in cols)] for rho in rhos]
    return ["rho", *(f"{k}_{m}" for k, m in cols)], rows


def write_recovery_table(summary, path) -> None:
    header, rows = recovery_table(summary)
    np.savetxt(path, np.reshape(np.asarray(rows, float), (-1, len(header))), "%.10g", ",",
               header=",".join(header), comments="")
