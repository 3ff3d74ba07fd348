"""Paper 003's synthetic recovery study (the ``sparse_vae_experiments`` stage): sparse VAE vs VAE,
β-VAE, VSC, PCA and FactorAnalysis on the §2.2 benchmark as the factor correlation ρ grows (fig. 2–4).
The same stage runs the MovieLens and single-cell experiments (:mod:`.sparse_vae_real`).

The grid is ``sparse_vae_study`` (:class:`~priorlab.config.SparseVaeStudyParams`): per ρ,
``datasets_per_rho`` data sets (seed d draws data set d; the models are seeded with d too), every
``models`` entry trained from scratch by the shared trainer, and scikit-learn PCA / FactorAnalysis
fitted on the training half. In-process, not as ``runs:`` entries: each model is a few seconds
of training on 500 × 7 numbers, far less than the start-up of four per-run DVC stages.

Measured on the held-out half: MSE of the reconstruction at the posterior mean (PCA / FA: their
projection), DCI disentanglement on all held-out points with the true z binned into ``dci_bins``
training-quantile bins (the authors scored 16 points), and, for the sparse VAE and the linear
baselines, the recovered support of W against the true one (features 1–3 ← z1, 4–6 ← z2, 7 ← both):
estimated columns are matched to the true factors by the Hungarian rule on |corr(code, z)|;
sparse VAE support = p*_jk > 0.5, linear support = |loading| ≥ 0.1 · the column's max; precision,
recall, F1 over the 7 × 2 entries; active columns = columns with some p* > 0.5 (paper: 2 of 5).
Likelihoods: sparse VAE ``gaussian_ig`` (σ_j MAP, App. C.2); VAE / β-VAE Gaussian with learned
per-feature σ_j (Adam, as the authors' baselines); VSC (kind ``vsc``) likewise, trained from scratch
with the spike warm-up off (λ = 1). Claims: :func:`decide_claims`, criteria fixed before any number
existed; their deep baselines are the ``vae``-kind entries (VSC's numbers are in the tables only).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import torch

from priorlab import paths
from priorlab.config import ModelParams, Params, SetupParams
from priorlab.experiments.claims import Claim, claims_table, fmt, md_table
from priorlab.io import save_figure, write_json

NAME = "sparse_vae_experiments"  # stage, module and report folder
TITLE, PAPER = "Sparse VAE: synthetic recovery, MovieLens and single cell (paper 003)", "003"
OUT = paths.experiment_dir(NAME)
SUPPORT_FRACTION = 0.1  # linear baselines: a loading counts when ≥ this share of its column's max
F1_GOAL = 0.8  # support recovery criterion (fixed before the numbers)


def in_memory(name: str, arrays: dict[str, np.ndarray]):
    from priorlab.data.store import Dataset

    return Dataset(name=name, arrays=arrays, manifest={"observation_kind": "vector"})


def setup_for(spec: ModelParams, study, likelihood: str = "gaussian") -> SetupParams:
    """The nets of a study model: the MLP of ``hidden``. ``likelihood`` gaussian: ``gaussian_ig``
    for the sparse VAE, Gaussian with learned σ_j otherwise (see the module doc); else as named."""
    sparse = spec.kind == "sparse_vae"
    if likelihood == "gaussian":
        likelihood = "gaussian_ig" if sparse else "gaussian"
    return SetupParams(dataset="synthetic", latent_dim=study.latent_dim, hidden=list(study.hidden),
                       likelihood=likelihood, obs_std=1.0, learn_obs_std=not sparse)


def match_columns(codes: np.ndarray, z: np.ndarray) -> np.ndarray:
    """For each true factor l, the code column k with the Hungarian-maximal total |corr(code_k, z_l)|."""
    from scipy.optimize import linear_sum_assignment

    with np.errstate(invalid="ignore", divide="ignore"):  # a constant code column: correlation 0
        c = np.nan_to_num(np.corrcoef(codes.T, z.T)[: codes.shape[1], codes.shape[1]:])
    rows, cols = linear_sum_assignment(-np.abs(c))
    out = np.empty(z.shape[1], dtype=int)
    out[cols] = rows
    return out


def support_scores(estimated: np.ndarray, true: np.ndarray) -> dict[str, float]:
    """Precision, recall, F1 of a boolean support against the true one (0 when undefined)."""
    tp = float(np.sum(estimated & true))
    prec = tp / max(float(estimated.sum()), 1.0)
    rec = tp / max(float(true.sum()), 1.0)
    return {"precision": prec, "recall": rec, "f1": 2 * prec * rec / (prec + rec) if prec + rec > 0 else 0.0}


def bin_factors(z_train: np.ndarray, z: np.ndarray, bins: int) -> np.ndarray:
    """Integer factors: each column of ``z`` binned at the training quantiles (``bins`` bins)."""
    edges = [np.quantile(z_train[:, k], np.linspace(0, 1, bins + 1)[1:-1]) for k in range(z.shape[1])]
    return np.stack([np.searchsorted(e, z[:, k]) for k, e in enumerate(edges)], 1).astype(np.int64)


def dci_d(codes: np.ndarray, z: np.ndarray, z_train: np.ndarray, bins: int, seed: int, backend: str = "gbt") -> float:
    """DCI disentanglement of the held-out ``codes`` against the held-out true ``z`` (binned at the
    training quantiles): the importance matrix is fitted on all held-out points (D depends on it only)."""
    from priorlab.metrics.dci import dci

    f = bin_factors(z_train, z, bins)
    return float(dci(codes, f, codes, f, random_state=seed, backend=backend)["disentanglement"])


def fit_deep(name: str, spec: ModelParams, study, data, seed: int, likelihood: str = "gaussian"):
    """The study model ``name`` (spec ``spec``) trained from scratch on ``data`` with ``study.train``
    (seed ``seed``); ``study`` also gives ``latent_dim`` and ``hidden``."""
    from priorlab.models import build_model
    from priorlab.pipeline import fingerprint
    from priorlab.train import fit

    opt = dataclasses.replace(study.train, seed=seed)
    torch.manual_seed(seed)
    model = build_model(setup_for(spec, study, likelihood), spec, data.obs_shape)
    model.bind_data(data)
    ckpt = paths.CHECKPOINTS / NAME / f"{data.name}-{name}.pt"
    fit(model, model.training_set(data), opt, checkpoint=ckpt, live_dir=None, fingerprint=fingerprint(
        NAME, spec.record(), dataclasses.asdict(opt), data.name, likelihood, list(study.hidden), study.latent_dim),
        desc=f"{NAME}/{data.name}")
    return model.to("cpu").eval()


def score_row(codes_te, recon_te, d: dict, study, seed: int) -> dict[str, Any]:
    return {"mse": float(np.mean((recon_te - d["x_test"]) ** 2)),
            "dci_d": dci_d(codes_te, d["sources_test"], d["sources_train"], study.dci_bins, seed, study.dci_backend)}


def study_rows(params: Params) -> tuple[list[dict[str, Any]], dict[str, np.ndarray]]:
    """Every (ρ, data set, method) row, and the W of the first sparse VAE at the smallest ρ (heatmap)."""
    from sklearn.decomposition import PCA, FactorAnalysis

    from priorlab.data.sparse_synthetic import make_sparse_synthetic

    study = params.sparse_vae_study
    rows, heat = [], {}
    for rho in study.rhos:
        for seed in range(study.datasets_per_rho):
            d = make_sparse_synthetic(study.n, rho, study.noise_std, random_state=seed)
            data = in_memory(f"rho{rho:g}-{seed}", {"x_train": d["x_train"], "x_test": d["x_test"]})
            for name in study.models:
                spec = params.models[name]
                t0 = time.perf_counter()
                model = fit_deep(name, spec, study, data, seed)
                with torch.no_grad():
                    xte = torch.from_numpy(d["x_test"])
                    cte = model.represent(xte).double().numpy()
                    recon = model.decode_mean(model.represent(xte)).double().numpy()
                row = {"rho": rho, "seed": seed, "method": name, "kind": spec.kind,
                       **score_row(cte, recon, d, study, seed)}
                print(f"rho {rho:g} seed {seed} {name}: {time.perf_counter() - t0:.1f} s", flush=True)
                if spec.kind == "sparse_vae":
                    p_star = model.ssl.p_star.numpy()
                    match = match_columns(cte, d["sources_test"])
                    row.update(support_scores(p_star[:, match] > 0.5, d["support"]))
                    row["active_columns"] = int(model.active_columns().sum())
                    if not heat:
                        heat = {"W": model.decoder.W.detach().numpy().copy(), "match": match, "rho": rho,
                                "support": d["support"]}
                rows.append(row)
            for label, est in (("PCA", PCA(study.latent_dim, random_state=seed)),
                               ("FactorAnalysis", FactorAnalysis(study.latent_dim, random_state=seed))):
                est.fit(d["x_train"].astype(np.float64))
                cte = est.transform(d["x_test"])
                recon = cte @ est.components_ + est.mean_
                loadings = est.components_.T  # [G, K]
                match = match_columns(cte, d["sources_test"])
                cols = np.abs(loadings[:, match])
                row = {"rho": rho, "seed": seed, "method": label, "kind": "linear",
                       **score_row(cte, recon, d, study, seed),
                       **support_scores(cols >= SUPPORT_FRACTION * cols.max(0, keepdims=True), d["support"])}
                rows.append(row)
    return rows, heat


def summarise(rows: list[dict[str, Any]]) -> dict[str, dict[float, dict[str, float]]]:
    """method → ρ → mean / std of every numeric score."""
    out: dict[str, dict[float, dict[str, float]]] = {}
    for method in dict.fromkeys(r["method"] for r in rows):
        out[method] = {}
        for rho in dict.fromkeys(r["rho"] for r in rows):
            sel = [r for r in rows if r["method"] == method and r["rho"] == rho]
            keys = [k for k in ("mse", "dci_d", "precision", "recall", "f1", "active_columns") if k in sel[0]]
            out[method][rho] = {**{k: float(np.mean([r[k] for r in sel])) for k in keys},
                                **{f"{k}_std": float(np.std([r[k] for r in sel])) for k in keys}}
    return out


RHO_SCORES = ("mse", "dci_d", "precision", "recall", "f1", "active_columns")  # columns of recovery_vs_rho.csv


def recovery_table(summary: dict[str, dict[float, dict[str, float]]]) -> tuple[list[str], list[list[float]]]:
    """``recovery_vs_rho.csv``, the data plots of fig. 2–4 that ``dvc plots diff`` overlays across
    commits: one row per ρ, one column ``<score>_<method>`` per score a method has (the mean over data
    sets of :func:`summarise`; ``f1`` etc. only for the sparse VAE and the linear baselines)."""
    rhos = sorted({r for per_rho in summary.values() for r in per_rho})
    cols = [(k, m) for k in RHO_SCORES for m, per_rho in summary.items() if any(k in v for v in per_rho.values())]
    rows = [[rho, *(summary[m].get(rho, {}).get(k, float("nan")) for k, m in cols)] for rho in rhos]
    return ["rho", *(f"{k}_{m}" for k, m in cols)], rows


def write_recovery_table(summary, path) -> None:
    header, rows = recovery_table(summary)
    np.savetxt(path, np.reshape(np.asarray(rows, float), (-1, len(header))), "%.10g", ",",
               header=",".join(header), comments="")


def decide_claims(summary, sparse: str, deep_baselines: list[str], latent_dim: int) -> list[Claim]:
    """The paper's claims on the synthetic data; criteria fixed before the numbers existed."""
    rhos = list(summary[sparse])
    need = max(1, len(rhos) - 1)  # all but (at most) one ρ
    claims = []
    wins = [all(summary[sparse][r]["mse"] < summary[b][r]["mse"] for b in deep_baselines) for r in rhos]
    claims.append(Claim(
        f"{PAPER} fig. 3", "the sparse VAE has lower held-out MSE than the VAE and β-VAE",
        f"mean held-out MSE of the sparse VAE below every deep baseline's at ≥ {need} of {len(rhos)} ρ",
        "; ".join(f"ρ={r:g}: " + ", ".join(f"{m} {summary[m][r]['mse']:.3f}" for m in [sparse, *deep_baselines])
                  for r in rhos), sum(wins) >= need))
    wins = [all(summary[sparse][r]["dci_d"] > summary[b][r]["dci_d"] for b in deep_baselines) for r in rhos]
    claims.append(Claim(
        f"{PAPER} fig. 4", "the sparse VAE is more disentangled (DCI) than the VAE and β-VAE as ρ grows",
        f"mean DCI disentanglement of the sparse VAE above every deep baseline's at ≥ {need} of {len(rhos)} ρ",
        "; ".join(f"ρ={r:g}: " + ", ".join(f"{m} {summary[m][r]['dci_d']:.3f}" for m in [sparse, *deep_baselines])
                  for r in rhos), sum(wins) >= need))
    f1 = [summary[sparse][r]["f1"] for r in rhos]
    active = [summary[sparse][r]["active_columns"] for r in rhos]
    claims.append(Claim(
        f"{PAPER} §4, fig. 2", f"the sparse VAE recovers the support of W and uses 2 of K = {latent_dim} columns",
        f"mean support F1 ≥ {F1_GOAL} at every ρ and mean active columns within [1.5, 2.5] at every ρ",
        f"F1 {fmt(f1)}; active columns {fmt(active, 2)}",
        all(v >= F1_GOAL for v in f1) and all(1.5 <= a <= 2.5 for a in active)))
    return claims


def heatmap(heat: dict[str, Any]) -> None:
    fig, axes = plt.subplots(1, 2, figsize=(6, 3.5))
    w = np.abs(heat["W"][:, heat["match"]])
    for ax, img, title in ((axes[0], heat["support"].astype(float), "true support"),
                           (axes[1], w / max(w.max(), 1e-12), f"|W| sparse VAE (matched, ρ={heat['rho']:g})")):
        ax.imshow(img, cmap="Greys", vmin=0, vmax=1, aspect="auto")
        ax.set(title=title, xlabel="factor", ylabel="feature", xticks=[0, 1], yticks=range(img.shape[0]))
    save_figure(OUT / "w_heatmap.png", fig)


def run_sparse_vae_experiments(params: Params) -> dict[str, Any]:
    """Train and score the synthetic study; write ``reports/sparse_vae_experiments/``."""
    study = params.sparse_vae_study
    OUT.mkdir(parents=True, exist_ok=True)
    claims: list[Claim] = []
    t0 = time.perf_counter()
    rows, heat, summary = [], {}, {}
    if study.models:
        rows, heat = study_rows(params)
        summary = summarise(rows)
        sparse = [m for m in study.models if params.models[m].kind == "sparse_vae"]
        deep = [m for m in study.models if params.models[m].kind == "vae"]
        if sparse and deep:
            claims = decide_claims(summary, sparse[0], deep, study.latent_dim)
        if heat:
            heatmap(heat)
        write_recovery_table(summary, OUT / "recovery_vs_rho.csv")  # data plots of dvc.yaml (`dvc plots diff`)
    from priorlab.experiments.sparse_vae_real import run_real

    real = run_real(params)
    claims += real.pop("claims")
    print(f"{NAME}: {time.perf_counter() - t0:.0f} s", flush=True)  # the log, not the outputs: reruns are byte-identical
    lines = [f"# {TITLE}", "", f"Profile `{params.profile}`. Synthetic claims: sparse VAE vs the "
             "`vae`-kind baselines (VAE, β-VAE); VSC, PCA and FactorAnalysis are in the tables only. The means per ρ "
             "are also in `recovery_vs_rho.csv` (data plots of `dvc.yaml`: `dvc plots diff`).", ""]
    for method, per_rho in summary.items():
        lines += [f"## {method}", ""] + md_table(
            ["ρ", *per_rho[next(iter(per_rho))].keys()], [[r, *v.values()] for r, v in per_rho.items()]) + [""]
    lines += real.pop("lines") + claims_table([c.to_dict() for c in claims])
    (OUT / "README.md").write_text("\n".join(lines) + "\n")
    result = {"title": TITLE, "paper": PAPER, "claims": [c.to_dict() for c in claims], "rows": rows,
              "summary": {m: {str(r): v for r, v in s.items()} for m, s in summary.items()}, **real}
    write_json(OUT / "summary.json", result)
    return result
