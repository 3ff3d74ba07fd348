"""Paper 003's synthetic recovery study (the ``sparse_vae_experiments`` stage): sparse VAE vs VAE,
β-VAE, VSC, PCA and FactorAnalysis on the §2.2 benchmark as the factor correlation ρ grows (fig. 2–4).
The same stage runs the MovieLens and single-cell experiments (:mod:`.sparse_vae_real`) and writes
the fidelity table (:mod:`.sparse_vae_fidelity`).

The grid is ``sparse_vae_study`` (:class:`~priorlab.config.SparseVaeStudyParams`): per ρ,
``datasets_per_rho`` data sets (seed d draws data set d; the models are seeded with d too), every
``models`` entry trained from scratch by the shared trainer, and scikit-learn PCA / FactorAnalysis
fitted on the training half; the ``variant_models`` (the released code's loss scaling, VSC) on the
first ``variant_datasets_per_rho`` data sets, shown beside the claims, never deciding them.

Measured on the held-out half: MSE of the reconstruction at the posterior mean (PCA / FA: their
projection); DCI disentanglement with the true continuous z (``dci_mode: regression``, the released
code's ``GradientBoostingRegressor`` per factor; ``classification``: z binned into ``dci_bins``
training-quantile bins), importances fitted on all held-out points (the authors scored 16); for the
sparse VAE and the linear baselines the recovered support of W against the true one (features 1–3 ←
z1, 4–6 ← z2, 7 ← both): estimated columns are matched to the true factors by the Hungarian rule on
|corr(code, z)|; sparse VAE support = p*_jk > 0.5, linear support = |loading| ≥ 0.1 · the column's
max; precision, recall, F1 over the 7 × 2 entries. Active columns: the sparse VAE's columns with some
p* > 0.5 (paper: 2 of 5); the other deep models' active units (variance of the posterior mean over
the held-out points > 0.01). A fit *collapsed* when its MSE > 3 or it has fewer than 2 active columns:
reported as a rate per ρ, never dropped.

Every deep model has the same σ treatment: the ``gaussian_ig`` likelihood (σ_j² ~ IG, App. C.2,
initialised at the sample variances, updated after every step by the rule of its ``loss_scaling``),
as the released code gives the VAE, β-VAE and VSC the sparse VAE's σ prior. Claims:
:func:`decide_claims` on the medians over data sets of the ``models`` (``loss_scaling: paper``);
their deep baselines are the ``vae``-kind entries.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import matplotlib.pyplot as plt
import numpy as np

from priorlab import paths
from priorlab.config import Params
from priorlab.config.models import loss_scaling_of
from priorlab.studies.claims import Claim, claims_table, fmt, md_table
from priorlab.studies.criteria import criterion
from priorlab.studies.intervals import bootstrap
from priorlab.studies.sparse_vae_experiments.fit import (COLLAPSE_ACTIVE, COLLAPSE_MSE, NAME, PAPER, SUPPORT_FRACTION,  # noqa: F401
                                                 TITLE, cell_dir, collapsed, deep_row, fit_deep, in_memory,
                                                 linear_rows, match_columns, rho_rows, setup_for,
                                                 support_scores)
from priorlab.errors import UserError
from priorlab.io import read_json, save_figure, write_json

OUT = paths.experiment_dir(NAME)


def study_rows(params: Params) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Every (ρ, data set, method) row, from the ``sparse_vae_fit`` cells in ``rhos`` order, and the W
    of the first sparse VAE at the first ρ that has one (the heatmap); a ``UserError`` for a missing cell."""
    rows: list[dict[str, Any]] = []
    heat: dict[str, Any] = {}
    for rho in params.sparse_vae_study.rhos:
        path = cell_dir(rho) / "rows.json"
        if not path.is_file():
            raise UserError(f"{path} is missing: stage sparse_vae_fit@{float(rho)!r} has not run "
                            "(dvc repro sparse_vae_experiments runs it)")
        cell = read_json(path)
        rows += cell["rows"]
        if cell["heat"] and not heat:
            h = cell["heat"]
            heat = {"W": np.asarray(h["W"], dtype=np.float32), "rho": h["rho"],
                    "support": np.asarray(h["support"], dtype=bool), "match": np.asarray(h["match"], dtype=int)}
    return rows, heat


def real_fits() -> dict[str, Any]:
    """The ``sparse_vae_real`` stage's rows; a ``UserError`` when it has not run."""
    from priorlab.studies.sparse_vae_experiments.real import REAL_CELL

    path = paths.MODELS / NAME / REAL_CELL / "rows.json"
    if not path.is_file():
        raise UserError(f"{path} is missing: stage sparse_vae_real has not run (dvc repro sparse_vae_experiments runs it)")
    return read_json(path)


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


def _by_seed(rows: list[dict[str, Any]], method: str, rho: float, key: str) -> dict[int, float]:
    return {r["seed"]: float(r[key]) for r in rows if r["method"] == method and r["rho"] == rho}


def _median_gap(rows, sparse: str, baselines: list[str], rho: float, key: str, lower: bool, random_state: int):
    """Bootstrap over data sets (paired: a unit is one data set's scores of every model) of the worst
    case over ``baselines`` of the median of ``key``(sparse) − ``key``(baseline): the max when lower
    is better, the min otherwise."""
    cols = [_by_seed(rows, m, rho, key) for m in (sparse, *baselines)]
    seeds = sorted(set.intersection(*(set(c) for c in cols)))
    units = np.array([[c[s] for c in cols] for s in seeds])
    worst = np.max if lower else np.min

    def stat(u: np.ndarray) -> float:
        return float(worst(np.median(u[:, :1] - u[:, 1:], axis=0)))

    return bootstrap(units, stat, random_state, method="paired bootstrap")


def decide_claims(rows: list[dict[str, Any]], sparse: str, deep_baselines: list[str], random_state: int = 0
                  ) -> list[Claim]:
    """The synthetic claims (criteria ``003.mse``, ``003.dci``, ``003.support_f1``,
    ``003.active_columns``): per ρ a percentile-bootstrap interval over data sets of the medians."""
    rhos = list(dict.fromkeys(r["rho"] for r in rows if r["method"] == sparse))
    methods = [sparse, *deep_baselines]

    def measured(key: str) -> str:
        return "; ".join(f"ρ={r:g}: " + ", ".join(
            f"{m} {np.median(list(_by_seed(rows, m, r, key).values())):.3f} (collapsed "
            f"{np.mean(list(_by_seed(rows, m, r, 'collapsed').values())):.0%})" for m in methods) for r in rhos)

    def median(key: str, rho: float):
        return bootstrap(np.array(list(_by_seed(rows, sparse, rho, key).values()))[:, None],
                         lambda u: float(np.median(u)), random_state)

    n = min(len(_by_seed(rows, m, r, "mse")) for m in methods for r in rhos)
    return [
        criterion("003.mse").decide([(f"ρ={r:g}", _median_gap(rows, sparse, deep_baselines, r, "mse", True,
                                                             random_state)) for r in rhos],
                                    f"medians over {n} data sets — {measured('mse')}"),
        criterion("003.dci").decide([(f"ρ={r:g}", _median_gap(rows, sparse, deep_baselines, r, "dci_d", False,
                                                             random_state)) for r in rhos],
                                    f"medians over {n} data sets — {measured('dci_d')}"),
        criterion("003.support_f1").decide([(f"ρ={r:g}", median("f1", r)) for r in rhos],
                                           f"median F1 {fmt([np.median(list(_by_seed(rows, sparse, r, 'f1').values())) for r in rhos])}"),
        criterion("003.active_columns").decide(
            [(f"ρ={r:g}", median("active_columns", r)) for r in rhos],
            f"median active columns {fmt([np.median(list(_by_seed(rows, sparse, r, 'active_columns').values())) for r in rhos], 2)}"),
    ]


def heatmap(heat: dict[str, Any]) -> None:
    fig, axes = plt.subplots(1, 2, figsize=(6, 3.5))
    w = np.abs(heat["W"][:, heat["match"]])
    for ax, img, title in ((axes[0], heat["support"].astype(float), "true support"),
                           (axes[1], w / max(w.max(), 1e-12), f"|W| sparse VAE (matched, ρ={heat['rho']:g})")):
        ax.imshow(img, cmap="Greys", vmin=0, vmax=1, aspect="auto")
        ax.set(title=title, xlabel="factor", ylabel="feature", xticks=[0, 1], yticks=range(img.shape[0]))
    save_figure(OUT / "w_heatmap.png", fig)


def claim_models(params: Params, names: list[str], scaling: str) -> tuple[str | None, list[str]]:
    """The first ``sparse_vae`` entry of ``names`` with ``loss_scaling`` = ``scaling`` and the
    ``vae``-kind entries with it (the deep baselines of the claims)."""
    same = [m for m in names if params.models[m].kind in ("sparse_vae", "vae")
            and loss_scaling_of(params.models[m]) == scaling]
    sparse = next((m for m in same if params.models[m].kind == "sparse_vae"), None)
    return sparse, [m for m in same if params.models[m].kind == "vae"]


SUMMARY_COLUMNS = (("n", "n"), ("mse", "MSE"), ("mse_q25", "MSE q25"), ("mse_q75", "MSE q75"), ("dci_d", "DCI"),
                   ("dci_d_q25", "DCI q25"), ("dci_d_q75", "DCI q75"), ("f1", "F1"),
                   ("active_columns", "active"), ("collapse_rate", "collapsed"))


def method_table(per_rho: dict[float, dict[str, float]]) -> list[str]:
    """Markdown lines: one row per ρ, medians and quartiles over data sets, the collapse rate."""
    cols = [(k, t) for k, t in SUMMARY_COLUMNS if any(k in v for v in per_rho.values())]
    return md_table(["ρ", *(t for _, t in cols)], [[r, *(v.get(k, float("nan")) for k, _ in cols)]
                                                   for r, v in per_rho.items()])


def selection_lines(rows: list[dict[str, Any]], fraction: float) -> list[str]:
    """Markdown lines: for each ``beta_grid`` model, how often each β was chosen over the data sets."""
    lines = []
    for method in dict.fromkeys(r["method"] for r in rows if "selection" in r):
        chosen = Counter(r["selection"]["beta"] for r in rows if r["method"] == method and "selection" in r)
        lines += [f"{method}: β chosen per data set by the held-out MSE of {fraction:g} of its training half (fig. 3's "
                  "β-VAE at its best β; the paper does not say on which rows): "
                  + ", ".join(f"β = {b:g} on {n}" for b, n in sorted(chosen.items())) + " data sets.", ""]
    return lines


def run_sparse_vae_experiments(params: Params) -> dict[str, Any]:
    """Aggregate the ``sparse_vae_fit`` cells and the ``sparse_vae_real`` fits into
    ``reports/sparse_vae_experiments/`` (summaries, claims, figures, README, fidelity table)."""
    from priorlab.studies.sparse_vae_experiments.fidelity import fidelity_markdown
    from priorlab.studies.sparse_vae_experiments.real import run_real

    study = params.sparse_vae_study
    OUT.mkdir(parents=True, exist_ok=True)
    claims: list[Claim] = []
    variant: list[Claim] = []
    t0 = time.perf_counter()
    rows, heat, summary = [], {}, {}
    if study.models:
        rows, heat = study_rows(params)
        summary = summarise(rows)
        sparse, deep = claim_models(params, study.models, "paper")
        if sparse and deep:
            claims = decide_claims(rows, sparse, deep)
        sparse_c, deep_c = claim_models(params, study.variant_models, "released_code")
        if sparse_c and deep_c:
            variant = decide_claims(rows, sparse_c, deep_c)  # on the data sets they share
        if heat:
            heatmap(heat)
        write_recovery_table(summary, OUT / "recovery_vs_rho.csv")  # data plots of dvc.yaml (`dvc plots diff`)
    real = run_real(params, real_fits())
    claims += real.pop("claims")
    print(f"{NAME}: {time.perf_counter() - t0:.0f} s", flush=True)  # the log, not the outputs: reruns are byte-identical
    lines = [f"# {TITLE}", "", f"Profile `{params.profile}`. Synthetic claims: the sparse VAE vs the `vae`-kind "
             "baselines (VAE, β-VAE) with the paper's loss scaling, decided on medians over data sets; the released "
             "code's scaling and VSC are trained on the first "
             f"{study.variant_datasets_per_rho} data sets per ρ and shown beside them; PCA and FactorAnalysis are in "
             "the tables only. Every deep model: the same nets, the same raw input, the Inverse-Gamma σ_j "
             "(`gaussian_ig`). What produced each number, setting by setting against the paper and the released "
             "code: [`fidelity.md`](fidelity.md). Medians per ρ: `recovery_vs_rho.csv` (`dvc plots diff`).", ""]
    for method, per_rho in summary.items():
        spec = params.models.get(method)
        scaling = f" (`loss_scaling: {loss_scaling_of(spec)}`)" if spec is not None and spec.kind in ("vae", "sparse_vae") \
            else ""
        lines += [f"## {method}{scaling}", ""] + method_table(per_rho) + [""]
    lines += selection_lines(rows, study.validation_fraction)
    if variant:
        lines += ["## The same claims with the released code's loss scaling (shown, not deciding)", ""] + \
            claims_table([c.to_dict() for c in variant]) + [""]
    lines += real.pop("lines") + claims_table([c.to_dict() for c in claims])
    (OUT / "README.md").write_text("\n".join(lines) + "\n")
    (OUT / "fidelity.md").write_text(fidelity_markdown(params))
    result = {"title": TITLE, "paper": PAPER, "claims": [c.to_dict() for c in claims], "rows": rows,
              "released_code_claims": [c.to_dict() for c in variant],
              "summary": {m: {str(r): v for r, v in s.items()} for m, s in summary.items()}, **real}
    write_json(OUT / "summary.json", result)
    return result
