"""The results report: ``reports/README.md`` generated from the metrics files (pandas)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from priorlab.config import Params
from priorlab.io import atomic_path

COLUMNS = {
    "test.elbo": "test ELBO",
    "test.log_lik": "E log p(x|z)",
    "test.kl": "KL",
    "test.iw_log_likelihood": "log p(x) (IW)",
    "active_dims": "active dims",
    "disentanglement.mig": "MIG",
    "disentanglement.dci.disentanglement": "DCI D",
    "disentanglement.dci.completeness": "DCI C",
    "disentanglement.dci.informativeness_test": "DCI I",
    "disentanglement.sap": "SAP",
    "disentanglement.modularity_explicitness.modularity": "modularity",
    "disentanglement.beta_vae_score.eval_accuracy": "β-VAE score",
    "disentanglement.factor_vae_score.eval_accuracy": "FactorVAE score",
}


def results_frame(results: list[dict[str, Any]]) -> pd.DataFrame:
    """One row per run with the headline metrics (flattened keys renamed per ``COLUMNS``)."""
    rows = []
    for r in results:
        flat = pd.json_normalize(r, sep=".").iloc[0].to_dict()
        row = {"group": r.get("group", ""), "setup": r["setup"], "model": r["model"],
               "β": r["model_params"]["beta"], "seed": r["seed"]}
        row.update({label: flat.get(key) for key, label in COLUMNS.items() if key in flat})
        rows.append(row)
    return pd.DataFrame(rows)


def summary_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """Mean ± std over seeds for every (setup, model)."""
    keys = ["group", "setup", "model", "β"]
    metrics = [c for c in frame.columns if c not in (*keys, "seed") and frame[c].notna().any()]
    grouped = frame.groupby(keys, sort=False)
    mean, std, n = grouped[metrics].mean(), grouped[metrics].std(ddof=1), grouped.size()
    out = mean.copy().astype(object)
    for c in metrics:
        out[c] = [
            None if pd.isna(m) else f"{m:.3f}" if k < 2 else f"{m:.3f} ± {s:.3f}"
            for m, s, k in zip(mean[c], std[c].fillna(0.0), n)
        ]
    out.insert(0, "seeds", n)
    return out.reset_index()


def settings_frame(params: Params) -> pd.DataFrame:
    rows = [("profile", params.profile), ("device", params.device)]
    for phase in ("pretrain", "train"):
        o = getattr(params, phase)
        rows.append((phase, f"{o.steps} steps, batch {o.batch_size}, Adam lr {o.lr}, KL warm-up {o.kl_warmup_steps}"))
    own = {name: m.train_steps for name, m in params.models.items()
           if m.train_steps and any(r.model == name for r in params.runs.values())}
    if own:
        rows.append(("train steps set per model", ", ".join(f"{name} {steps}" for name, steps in own.items())))
    for name, s in params.setups.items():
        d = params.datasets[s.dataset]
        rows.append((f"setup {name}", f"{d.kind} ({d.n_train} train / {d.n_test} test), {s.encoder}/{s.decoder} nets, "
                                      f"hidden {s.hidden}, latent {s.latent_dim}, {s.likelihood} likelihood"))
    e = params.evaluate
    rows.append(("evaluation", f"{e.n_eval} test points, L_k with k = {e.iw_samples}, active if Var > {e.active_threshold}; "
                               f"metrics on {e.metric_num_train} / {e.metric_num_test} sampled points, "
                               f"DCI backend {e.dci_backend}, {e.n_bins} bins"))
    return pd.DataFrame(rows, columns=["setting", "value"])


EXPERIMENT_SUMMARIES = {
    "sparse_coding/results.json": "Variational Sparse Coding (paper 002)",
    "fmvae/summary.json": "Factorial mixture prior VAE (paper 001)",
}
"""Experiment-stage summaries (relative to the report) whose ``claims`` the report gathers."""


def claims_section(root: Path) -> list[str]:
    """The paper claims of every experiment summary present under ``root``, one table per paper."""
    from priorlab.experiments.claims import claims_table
    from priorlab.io import read_json

    lines = []
    for rel, title in EXPERIMENT_SUMMARIES.items():
        f = root / rel
        if not f.is_file():
            continue
        claims = read_json(f).get("claims", [])
        lines += [f"### {title}", "", f"Details, figures and definitions: [{Path(rel).parent}/README.md]"
                  f"({Path(rel).parent}/README.md).", "", *(claims_table(claims) or ["_no claim tested._"]), ""]
    if not lines:
        return []
    return ["## Paper claims", "",
            "Each claim is decided on the numbers measured at this profile's scale, with the criterion shown; "
            "a **no** is a result, not a bug report. The `paper` profile (`make profile PROFILE=paper`, GPU) "
            "keeps the papers' settings.", "", *lines]


def write_report(params: Params, results: list[dict[str, Any]], path: str | Path) -> Path:
    """Write the Markdown report and ``results.csv`` beside it."""
    path = Path(path)
    frame = results_frame(results)
    versions = results[0].get("versions", {}) if results else {}
    lines = [
        "# Results",
        "",
        "Generated by the `report` stage from `metrics/*.json`; do not edit by hand.",
        "All likelihood terms are in nats per observation on the test split; metrics use the posterior mean.",
        "",
        "## Settings",
        "",
        settings_frame(params).to_markdown(index=False),
        "",
        *claims_section(path.parent),
        "## Summary (mean ± std over seeds)",
        "",
    ]
    summary = summary_frame(frame)
    for group, part in summary.groupby("group", sort=False):
        lines += [f"### {group}", "", part.drop(columns="group").dropna(axis=1, how="all").to_markdown(index=False), ""]
    lines += [
        "## Every run",
        "",
        frame.dropna(axis=1, how="all").to_markdown(index=False, floatfmt=".3f"),
        "",
        "## Figures",
        "",
    ]
    for r in results:
        run = r["run"]
        lines.append(f"- `{run}`: [curves](figures/{run}/curves.png), "
                     f"[reconstructions](figures/{run}/reconstructions.png), "
                     f"[traversals](figures/{run}/traversals.png)")
    lines += ["", "Library versions: " + ", ".join(f"{k} {v}" for k, v in sorted(versions.items())), ""]
    with atomic_path(path, suffix=".md") as tmp:
        tmp.write_text("\n".join(lines))
    with atomic_path(path.with_name("results.csv"), suffix=".csv") as tmp:
        frame.to_csv(tmp, index=False, float_format="%.6g")
    return path
