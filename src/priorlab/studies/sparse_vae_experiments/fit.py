"""Paper 003's study models, trained from scratch by the shared trainer and scored: the in-memory data
sets, the nets of a study model, the fit, the score of each (ρ, data set, method) row, and the
``sparse_vae_fit`` stage — one cell per ρ of ``sparse_vae_study.rhos`` (every data set and method at
that ρ: a synthetic model trains in about as long as a stage process takes to start) — which writes
``models/sparse_vae_experiments/rho-<ρ>/`` (each deep model's ``<seed>-<method>.pt`` and ``rows.json``)
and ``metrics/sparse_vae_experiments/rho-<ρ>/<method>.json``.  The ``sparse_vae_experiments`` stage aggregates
the cells (:mod:`.sparse_vae_experiments`); the real-data models are fitted by :mod:`.sparse_vae_real`."""

from __future__ import annotations

import dataclasses
import shutil
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from priorlab import paths
from priorlab.config import ModelParams, Params, ParamsError, SetupParams
from priorlab.config.models import loss_scaling_of
from priorlab.config.slices import check_slice, entries
from priorlab.data.sparse_synthetic import make_sparse_synthetic
from priorlab.data.store import in_memory
from priorlab.io import write_json, write_json_folder
from priorlab.studies.cells import Cell
from priorlab.studies.sparse_vae_experiments import NAME

SUPPORT_FRACTION = 0.1  # linear baselines: a loading counts when ≥ this share of its column's max


def setup_for(study, likelihood: str = "gaussian", scaling: str = "paper") -> SetupParams:
    """The nets of a study model: the MLP of ``hidden``. ``likelihood`` gaussian: σ_j² with the
    Inverse-Gamma prior for every model (see :mod:`.sparse_vae_experiments`), its MAP in closed form
    (``gaussian_ig``) or, for a model of ``loss_scaling: released_code``, learned as the released code
    learns it (``gaussian_ig_released``); else as named."""
    if likelihood == "gaussian":
        likelihood = "gaussian_ig_released" if scaling == "released_code" else "gaussian_ig"
    return SetupParams(dataset="synthetic", latent_dim=study.latent_dim, hidden=list(study.hidden),
                       likelihood=likelihood, obs_std=1.0, learn_obs_std=False)


def fit_deep(name: str, spec: ModelParams, study, data, seed: int, likelihood: str = "gaussian"):
    """The study model ``name`` (spec ``spec``) trained from scratch on ``data`` with ``study.train``
    (seed ``seed``); ``study`` also gives ``latent_dim`` and ``hidden``."""
    from priorlab.phases import (  # lazy: +19 modules, ~41 ms at import priorlab.studies.sparse_vae_experiments.fit
        fingerprint, fit_phase, new_model)

    opt = dataclasses.replace(study.train, seed=seed)
    model = new_model(setup_for(study, likelihood, loss_scaling_of(spec)), spec, data.obs_shape, seed)
    ckpt = paths.CHECKPOINTS / NAME / f"{data.name}-{name}.pt"
    fit_phase(model, data, opt, checkpoint=ckpt, live_dir=None, fingerprint=fingerprint(
        NAME, spec.record(), dataclasses.asdict(opt), data.name, likelihood, list(study.hidden), study.latent_dim),
        device=torch.device("cpu"), desc=f"{NAME}/{data.name}")
    return model.eval()


def reconstruct(model, x: np.ndarray) -> np.ndarray:
    """The decoder mean at the encoder's code of each row of ``x`` (float64)."""
    with torch.no_grad():
        return model.decode_mean(model.represent(torch.from_numpy(x))).double().numpy()


def choose_beta(grid: list[float], x_train: np.ndarray, fraction: float, seed: int,
                score: Callable[[float, np.ndarray, np.ndarray], float]) -> tuple[float, dict[str, float], int]:
    """A β-VAE "with best performing β" chosen without the test rows: ``score(β, rest, validation)`` of
    every β of ``grid`` (fitted on ``x_train`` less a seeded ``fraction`` of its rows, scored on those
    rows: lower is better); the lowest wins (ties: the smaller β).  Also every member's score, by β,
    and how many rows were held out."""
    order = np.random.RandomState(seed).permutation(len(x_train))
    n_val = max(1, int(round(fraction * len(x_train))))
    val, rest = x_train[order[:n_val]], x_train[order[n_val:]]
    scores = {f"{b:g}": score(float(b), rest, val) for b in grid}
    return float(min(grid, key=lambda b: (scores[f"{b:g}"], b))), scores, n_val


def select_beta(name: str, spec: ModelParams, study, d: dict, seed: int) -> tuple[ModelParams, dict[str, Any]]:
    """Fig. 3's β-VAE at its best β of ``study.beta_grid[name]`` on data set ``d``, by the held-out MSE
    of the validation rows (fig. 3's measure, :func:`choose_beta`): the spec at that β and the selection."""

    def score(beta: float, rest: np.ndarray, val: np.ndarray) -> float:
        data = in_memory(f"rho{d['rho']:g}-{seed}-validation", {"x_train": rest, "x_test": val})
        model = fit_deep(f"{name}-beta{beta:g}", dataclasses.replace(spec, beta=beta), study, data, seed)
        return float(np.mean((reconstruct(model, val) - val) ** 2))

    beta, scores, n_val = choose_beta(study.beta_grid[name], d["x_train"], study.validation_fraction, seed, score)
    return dataclasses.replace(spec, beta=beta), {"beta": beta, "validation_mse": scores, "validation_rows": n_val}


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


def dci_d(codes: np.ndarray, z: np.ndarray, z_train: np.ndarray, study, seed: int) -> float:
    """DCI disentanglement of the held-out ``codes`` against the held-out true ``z``: regression on the
    continuous z (``dci_mode: regression``) or classification of z binned at the training quantiles.
    The importance matrix is fitted on all held-out points (D depends on it only)."""
    from priorlab.metrics.dci import (
        dci, dci_regression)  # lazy: sklearn + scipy + pandas, ~1.8 s at import studies.sparse_vae_experiments.fit

    if study.dci_mode == "regression":
        return float(dci_regression(codes, z, codes, z, random_state=seed)["disentanglement"])
    f = bin_factors(z_train, z, study.dci_bins)
    return float(dci(codes, f, codes, f, random_state=seed, backend=study.dci_backend)["disentanglement"])


def score_row(codes_te, recon_te, d: dict, study, seed: int) -> dict[str, Any]:
    return {"mse": float(np.mean((recon_te - d["x_test"]) ** 2)),
            "dci_d": dci_d(codes_te, d["sources_test"], d["sources_train"], study, seed)}


COLLAPSE_MSE = 3.0  # a fit collapsed: held-out MSE above this (the data's total variance is ≈ 30) ...
COLLAPSE_ACTIVE = 2  # ... or fewer active columns than the 2 true factors


def collapsed(row: dict[str, Any]) -> bool:
    """A deep model's fit collapsed (see the module doc); linear baselines never do."""
    return "active_columns" in row and (row["mse"] > COLLAPSE_MSE or row["active_columns"] < COLLAPSE_ACTIVE)


def deep_row(name: str, spec: ModelParams, study, d: dict, seed: int) -> tuple[dict[str, Any], Any]:
    """Train ``name`` on data set ``d`` and score it; returns the row and the fitted model."""
    from priorlab.metrics import (
        active_dims)  # lazy: sklearn + scipy + pandas, ~1.4 s at import priorlab.studies.sparse_vae_experiments.fit

    rho = d["rho"]
    data = in_memory(f"rho{rho:g}-{seed}", {"x_train": d["x_train"], "x_test": d["x_test"]})
    t0 = time.perf_counter()
    model = fit_deep(name, spec, study, data, seed)
    with torch.no_grad():
        cte = model.represent(torch.from_numpy(d["x_test"])).double().numpy()
    recon = reconstruct(model, d["x_test"])
    row = {"rho": rho, "seed": seed, "method": name, "kind": spec.kind, **score_row(cte, recon, d, study, seed)}
    if spec.kind == "sparse_vae":
        match = match_columns(cte, d["sources_test"])
        row.update(support_scores(model.ssl.p_star.numpy()[:, match] > 0.5, d["support"]))
        row["active_columns"] = int(model.active_columns().sum())
    else:
        row["active_columns"] = int(active_dims(cte))
    row["collapsed"] = collapsed(row)
    print(f"rho {rho:g} seed {seed} {name}: {time.perf_counter() - t0:.1f} s", flush=True)
    return row, (model, cte)


def linear_rows(study, d: dict, seed: int) -> list[dict[str, Any]]:
    """PCA and FactorAnalysis with ``latent_dim`` components on the training half, scored like the deep models."""
    from sklearn.decomposition import PCA, FactorAnalysis

    rows = []
    for label, est in (("PCA", PCA(study.latent_dim, random_state=seed)),
                       ("FactorAnalysis", FactorAnalysis(study.latent_dim, random_state=seed))):
        est.fit(d["x_train"].astype(np.float64))
        cte = est.transform(d["x_test"])
        recon = cte @ est.components_ + est.mean_
        match = match_columns(cte, d["sources_test"])
        cols = np.abs(est.components_.T[:, match])  # loadings [G, K] of the matched columns
        rows.append({"rho": d["rho"], "seed": seed, "method": label, "kind": "linear",
                     **score_row(cte, recon, d, study, seed),
                     **support_scores(cols >= SUPPORT_FRACTION * cols.max(0, keepdims=True), d["support"])})
    return rows


def rho_rows(params: Params, rho: float) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any]]:
    """Every (data set, method) row at ``rho``, in the study's order; the W of the cell's first sparse
    VAE (the heatmap's, when the cell is the first ρ); and the fitted deep models by ``<seed>-<method>``."""
    study = params.sparse_vae_study
    rows, heat, models = [], {}, {}
    for seed in range(max(study.datasets_per_rho, study.variant_datasets_per_rho)):
        d = {**make_sparse_synthetic(study.n, rho, study.noise_std, random_state=seed), "rho": rho}
        names = [*(study.models if seed < study.datasets_per_rho else []),
                 *(study.variant_models if seed < study.variant_datasets_per_rho else [])]
        for name in names:
            spec, selection = params.models[name], {}
            if name in study.beta_grid and seed < study.datasets_per_rho:
                spec, selection = select_beta(name, spec, study, d, seed)
            row, (model, cte) = deep_row(name, spec, study, d, seed)
            if selection:
                row["selection"] = selection
            if spec.kind == "sparse_vae" and not heat:
                heat = {"W": model.decoder.W.detach().numpy().copy(), "rho": rho, "support": d["support"],
                        "match": match_columns(cte, d["sources_test"])}
            rows.append(row)
            models[f"{seed}-{name}"] = model
        if seed < study.datasets_per_rho:
            rows += linear_rows(study, d, seed)
    return rows, heat, models


def cell_dir(rho: float) -> Path:
    """The cell of ``rho``, named as DVC names ``rho-${item}`` for a float of ``sparse_vae_study.rhos``."""
    return paths.MODELS / NAME / f"rho-{float(rho)!r}"


def cells(params: Params) -> list:
    """The synthetic benchmark's cells (:mod:`priorlab.studies.cells`): a ``sparse_vae_fit`` stage per ρ,
    each building its own data sets; cost: every model on every data set of that ρ."""
    study = params.sparse_vae_study
    if not study.models:
        return []
    per_rho = sum(params.model(m).step_cost for m in study.models) * study.datasets_per_rho + \
        sum(params.model(m).step_cost for m in study.variant_models) * study.variant_datasets_per_rho
    return [Cell(f"sparse_vae_fit@{float(rho)!r}", None, max(study.train.steps, 1) * per_rho) for rho in study.rhos]


SLICE = "sparse_vae_fit"  # its file of param_slices (priorlab.config.slices)


def param_slice(params: Params) -> dict:
    """What every ``sparse_vae_fit@<rho>`` reads of ``models``: the study's models and its variant arm's."""
    study = params.sparse_vae_study
    return {"models": entries(params.models, [*study.models, *study.variant_models])}


def run_sparse_vae_fit(params: Params, rho: str) -> Path:
    """``sparse_vae_fit@<rho>``: the cell of one ``sparse_vae_study.rhos`` value; writes its model folder
    atomically (a killed stage leaves none) and its metrics file."""
    from priorlab.phases import (  # lazy: +19 modules, ~41 ms at import priorlab.studies.sparse_vae_experiments.fit
        save_model)

    study = params.sparse_vae_study
    value = float(rho)
    if not study.models or value not in [float(r) for r in study.rhos]:
        raise ParamsError(f"sparse_vae_study has no cell at rho {rho!r} (rhos {study.rhos}"
                          f"{', no models: the study is off' if not study.models else ''})")
    if cell_dir(value).name != f"rho-{rho}":
        raise ParamsError(f"sparse_vae_study.rhos: write {rho!r} as a float ({value!r}): it names the cell's folder")
    check_slice(SLICE, param_slice(params))
    rows, heat, models = rho_rows(params, value)
    out = cell_dir(value)
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    for key, model in models.items():
        save_model(tmp / f"{key}.pt", model, {"cell": out.name, "model": key})
    write_json(tmp / "rows.json", {"rows": rows, "heat": {k: np.asarray(v).tolist() if k != "rho" else v
                                                          for k, v in heat.items()}})
    shutil.rmtree(out, ignore_errors=True)
    tmp.replace(out)
    write_json_folder(paths.METRICS / NAME / out.name, cell_metrics(rows))
    return out


def cell_metrics(rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """A ρ cell's metrics files for ``dvc metrics show / diff``, one per method (a row per cell and
    method), each with the same keys: the mean over the method's data sets of each score it has, and
    how many data sets; each data set's numbers are in the cell's ``rows.json``."""
    out: dict[str, dict[str, float]] = {}
    for method in dict.fromkeys(r["method"] for r in rows):
        mine = [r for r in rows if r["method"] == method]
        out[method] = {"datasets": len(mine), **{k: float(np.mean([r[k] for r in mine]))
                                                 for k in ("mse", "dci_d", "f1", "active_columns") if k in mine[0]}}
    return out
