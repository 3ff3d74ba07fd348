"""Paper 003's report (the ``sparse_vae_experiments`` stage, :func:`run_sparse_vae_experiments`): the
``sparse_vae_fit`` cells and the ``sparse_vae_real`` rows read (:mod:`.aggregate`), the claims decided
(:mod:`.claims`), then the W heatmap (fig. 4), the README tables (fig. 2–4, tables 1a, 3a, 4),
``fidelity.md`` and ``summary.json``."""

from __future__ import annotations

import dataclasses
import time
from collections import Counter
from typing import Any

import matplotlib.pyplot as plt
import numpy as np

from priorlab import paths
from priorlab.config import Params
from priorlab.config.models import loss_scaling_of
from priorlab.io import read_json, save_figure, write_json
from priorlab.studies.claims import Claim, claims_table, link_diagnosis, md_table
from priorlab.studies.sparse_vae_experiments import NAME, PAPER, TITLE
from priorlab.studies.sparse_vae_experiments.aggregate import (read_movielens_arms, real_fits, study_rows, summarise,
                                                               write_recovery_table)
from priorlab.studies.sparse_vae_experiments.claims import (AS_RELEASED, AS_WRITTEN, claim_models, decide_claims,
                                                             decide_real_claims, first_sparse)
from priorlab.studies.sparse_vae_experiments.diagnosis import (ML_RECORD, RECORD, diagnosed, diagnosis_markdown,
                                                               movielens_markdown)
from priorlab.studies.sparse_vae_experiments.real import TOP_MOVIES, mean_std

OUT = paths.experiment_dir(NAME)


def heatmap(heat: dict[str, Any]) -> None:
    fig, axes = plt.subplots(1, 2, figsize=(6, 3.5))
    w = np.abs(heat["W"][:, heat["match"]])
    for ax, img, title in ((axes[0], heat["support"].astype(float), "true support"),
                           (axes[1], w / max(w.max(), 1e-12), f"|W| sparse VAE (matched, ρ={heat['rho']:g})")):
        ax.imshow(img, cmap="Greys", vmin=0, vmax=1, aspect="auto")
        ax.set(title=title, xlabel="factor", ylabel="feature", xticks=[0, 1], yticks=range(img.shape[0]))
    save_figure(OUT / "w_heatmap.png", fig)


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


def pm(stats: dict[str, float], key: str) -> str:
    """``mean ± std`` of ``key`` in a :func:`.real.mean_std` entry."""
    return f"{stats[key]:.3f} ± {stats[key + '_std']:.3f}"


def run_real(params: Params, fitted: dict[str, Any]) -> dict[str, Any]:
    """Both real-data studies from the ``sparse_vae_real`` stage's rows (:func:`.real.real_rows`): rows,
    summaries, topics, claims and the report lines."""
    study = params.sparse_vae_study
    ml_rows, topics, sc_rows = fitted["movielens_rows"], fitted["topics"], fitted["single_cell_rows"]
    ml, sc = mean_std(ml_rows, ("nll", "recall", "ndcg")), mean_std(sc_rows, ("accuracy",))
    claims = decide_real_claims(ml_rows, sc_rows, first_sparse(params, study.movielens.models),
                                first_sparse(params, study.single_cell.models))
    lines: list[str] = []
    if ml:
        lines += [f"## MovieLens (table 1a): {study.movielens.splits} splits, G = {study.movielens.n_items}, "
                  f"multinomial likelihood", ""] + md_table(
            ["method", "NLL", f"Recall@{study.movielens.recall_k}", f"NDCG@{study.movielens.ndcg_k}"],
            [[m, *(pm(v, k) for k in ("nll", "recall", "ndcg"))] for m, v in ml.items()]) + [""]
        chosen = [r for r in ml_rows if "selection" in r]
        if chosen:
            lines += [f"β chosen per split on held-out NLL of {study.movielens.validation_fraction:g} of the training "
                      "rows (table 1: \"the result with best performing β\"; the paper does not say on which rows): "
                      + "; ".join(f"{r['method']} split {r['split']}: β = {r['selection']['beta']:g} ("
                                  + ", ".join(f"{b}: {v:.1f}" for b, v in r["selection"]["validation_nll"].items())
                                  + ")" for r in chosen), ""]
    if topics:
        lines += [f"Top {TOP_MOVIES} movies by |w_jk| per active column ({topics['method']}, split {topics['split']}; "
                  "table 3a):", ""] + md_table(["column", "movies"], [
            [k, "; ".join(t)] for k, t in zip(topics["columns"], topics["movies"])]) + [""]
    if sc:
        lines += [f"## Single cell (table 4, PBMC): {study.single_cell.splits} splits, "
                  f"{study.single_cell.preprocess} preprocessing, held-out cell-type accuracy", ""] + md_table(
            ["method", "accuracy"], [[m, pm(v, "accuracy")] for m, v in sc.items()]) + [""]
    return {"movielens": {"rows": ml_rows, "summary": ml, "topics": topics},
            "single_cell": {"rows": sc_rows, "summary": sc}, "claims": claims, "lines": lines}


def objective_arms(params: Params) -> dict[str, tuple[str, list[str]]]:
    """Per objective that decides the synthetic claims (*as written*: ``models`` with ``loss_scaling:
    paper``; *as released*: ``variant_models`` with ``released_code``), its sparse VAE and deep baselines;
    an objective without both is left out."""
    study, out = params.sparse_vae_study, {}
    for names, scaling, subject in ((study.models, "paper", AS_WRITTEN), (study.variant_models, "released_code", AS_RELEASED)):
        sparse, deep = claim_models(params, names, scaling)
        if sparse and deep:
            out[subject] = (sparse, deep)
    return out


def sparse_vae_diagnosis(params: Params, summary: dict[str, Any]) -> str | None:
    """Paper 003's part of the ``diagnosis`` stage (issue 43): its failing synthetic claims beside the
    released code's run on the same data sets (``reports/sparse_vae_released_code_cpu.json``), and its
    failing MovieLens claims with the ``sparse_vae_ablation`` arms and the released code's fits on the same
    folds (``reports/sparse_vae_released_code_movielens_cpu.json``); None when neither can be written."""
    records, study = summary["claims"], params.sparse_vae_study
    parts = []
    arms = objective_arms(params)
    if study.models and len(arms) == 2:
        if (paths.REPORTS / RECORD).is_file():
            rows, _ = study_rows(params)
            parts.append(diagnosis_markdown(rows, read_json(paths.REPORTS / RECORD), records,
                                            (arms[AS_WRITTEN][0], arms[AS_WRITTEN][1][0]),
                                            (arms[AS_RELEASED][0], arms[AS_RELEASED][1][0])))
        else:
            parts.append(f"# Paper 003: why its claims fail here (diagnosis)\n\n`reports/{RECORD}` (the released "
                         "code's run on the same data sets) is missing: the synthetic claims are not diagnosed.\n")
    sparse_ml, ml_rows = first_sparse(params, study.movielens.models), summary.get("movielens", {}).get("rows", [])
    ml_record = read_json(paths.REPORTS / ML_RECORD) if (paths.REPORTS / ML_RECORD).is_file() else None
    vae_ml = next((m for m in study.movielens.models if params.models[m].kind == "vae" and params.models[m].beta == 1.0),
                  None)  # the plain VAE, what the released code's VAE is set beside
    ml_lines = movielens_markdown(ml_rows, read_movielens_arms(params), records, dataclasses.asdict(study.movielens),
                                  sparse_ml, ml_record, vae_ml) if sparse_ml and ml_rows else []  # arms read only with rows
    if ml_lines:
        parts.append(("" if parts else "# Paper 003: why its claims fail here (diagnosis)\n\n") + "\n".join(ml_lines) + "\n")
    return "\n".join(parts) if parts else None


def run_sparse_vae_experiments(params: Params) -> dict[str, Any]:
    """Aggregate the ``sparse_vae_fit`` cells and the ``sparse_vae_real`` fits into
    ``reports/sparse_vae_experiments/`` (summaries, claims, figures, README, fidelity table)."""
    from priorlab.studies.sparse_vae_experiments.fidelity import (
        fidelity_markdown)  # lazy: +1 module, ~5 ms at import priorlab.studies.sparse_vae_experiments.report

    study = params.sparse_vae_study
    OUT.mkdir(parents=True, exist_ok=True)
    claims: list[Claim] = []
    t0 = time.perf_counter()
    rows, heat, summary = [], {}, {}
    if study.models:
        rows, heat = study_rows(params)
        summary = summarise(rows)
        for subject, (sparse, deep) in objective_arms(params).items():  # each decides on its own data sets
            claims += decide_claims(rows, sparse, deep, subject=subject)
        if heat:
            heatmap(heat)
        write_recovery_table(summary, OUT / "recovery_vs_rho.csv")  # data plots of dvc.yaml (`dvc plots diff`)
    real = run_real(params, real_fits())
    claims += real.pop("claims")
    # the log, not the outputs: reruns are byte-identical
    print(f"{NAME}: {time.perf_counter() - t0:.0f} s", flush=True)
    lines = [f"# {TITLE}", "", f"Profile `{params.profile}`. Every synthetic claim is decided twice, with equal "
             f"weight, on medians over data sets: *{AS_WRITTEN}* — the sparse VAE vs the `vae`-kind baselines of "
             f"`models` with the paper's objective (`loss_scaling: paper`, σ_j² at its MAP after every step: "
             f"`gaussian_ig`), {study.datasets_per_rho} data sets per ρ — and *{AS_RELEASED}* — those of "
             "`variant_models` with the released code's objective (`released_code`: log σ_j learned by Adam from "
             "the data's std, `gaussian_ig_released`; θ ~ U(0, 1)), on the first "
             f"{study.variant_datasets_per_rho} data sets per ρ. VSC is trained beside them; PCA and FactorAnalysis "
             "are in the tables only. Every deep model: the same nets and the same raw input. What produced each "
             "number, setting by setting against the paper and the released code: [`fidelity.md`](fidelity.md). "
             "Medians per ρ: `recovery_vs_rho.csv` (`dvc plots diff`).", ""]
    for method, per_rho in summary.items():
        spec = params.models.get(method)
        scaling = (f" (`loss_scaling: {loss_scaling_of(spec)}`)"
                   if spec is not None and spec.kind in ("vae", "sparse_vae") else "")
        lines += [f"## {method}{scaling}", ""] + method_table(per_rho) + [""]
    lines += selection_lines(rows, study.validation_fraction)
    records = link_diagnosis([c.to_dict() for c in claims], NAME, diagnosed)
    lines += real.pop("lines") + claims_table(records)
    (OUT / "README.md").write_text("\n".join(lines) + "\n")
    (OUT / "fidelity.md").write_text(fidelity_markdown(params))
    result = {"title": TITLE, "paper": PAPER, "claims": records, "rows": rows,
              "summary": {m: {str(r): v for r, v in s.items()} for m, s in summary.items()}, **real}
    write_json(OUT / "summary.json", result)
    return result
