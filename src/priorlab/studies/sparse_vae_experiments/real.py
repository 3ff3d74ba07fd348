"""Paper 003's real-data experiments, fitted and scored by the ``sparse_vae_real`` stage (reported by
``sparse_vae_experiments``, :func:`.report.run_real`): MovieLens (table 1a: held-out NLL, Recall@5,
NDCG@10; table 3a: top movies per factor) and single-cell cell-type prediction (table 4, on scanpy's
PBMC 68k reduced instead of Zeisel).

Both run ``splits`` disjoint held-out folds of rows (split s: fold s of one permutation drawn with
``FOLD_SEED`` cut into round(1 / test_fraction) blocks; models seeded with s);
every ``models`` entry is trained from scratch in-process by the shared trainer (seconds each at
the cpu scale), scikit-learn NMF (C.3: ``alpha`` on W and H; sklearn ≥ 1.0 spells it
``alpha_W = alpha_H``) is fitted on the training rows.  A ``beta_grid`` entry (MovieLens only) is
table 1's "β-VAE with best performing β": its β is chosen per split on validation rows carved from
the training rows (:func:`select_beta`), never on the test rows.

MovieLens protocol (Liang et al. 2018, "strong generalisation"): held-out users only. NLL: the
multinomial negative log-likelihood of each held-out user's whole row, −Σ_j x_j log p_j with p
= softmax(decoder(encoder mean of the row)) (no multinomial coefficient, as Liang et al.), mean
over users; NMF: p = the row's reconstruction normalised to sum 1 (floored at 1e-10). Ranking: for
each held-out user with ≥ 5 items, a random ``foldin_fraction`` of the items is the input
(fold-in), the rest (int((1 − f) n)) is scored; the fold-in items are excluded from the ranking.
Likelihood: multinomial (softmax over the G movies, table 6). Every model of a comparison sees the
same encoder input (validated): the 0/1 row, or with ``encoder_input: row_normalised`` the row divided
by its sum (the released code feeds every model these rows; the paper does not say).

Single cell: the ``n_items`` most variable genes of the training cells; ``preprocess`` quantile
(C.1's quantile normalisation to the training cells' reference; Gaussian likelihood as table 6:
``gaussian_ig`` for the sparse VAE, learned σ_j otherwise) or counts (multinomial). The factors
(encoder mean; NMF's H; PCA's scores) of training cells fit a multinomial logistic regression
(``metrics.probe_accuracy``: standardised inputs, lbfgs) on the cell types, scored on the held-out
cells; the cell types are never seen by the factor models.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import torch

from priorlab.config import ModelParams, Params, ParamsError, SparseVaeRealParams
from priorlab.config.slices import check_slice, entries
from priorlab import paths
from priorlab.studies.sparse_vae_experiments import NAME
from priorlab.studies.sparse_vae_experiments.fit import choose_beta, fit_deep, in_memory
from priorlab.io import write_json, write_json_folder
from priorlab.models.protocol import ElboModel
from priorlab.studies.cells import Cell

TOP_MOVIES = 4  # table 3a
FOLD_SEED = 0  # the one permutation whose blocks are the held-out folds (issue 42: disjoint test rows)
MIN_FOLDIN_ITEMS = 5  # Liang et al.: users with fewer items are not split
NLL_FLOOR = 1e-10


# --- protocol pieces (pure numpy, tested) ------------------------------------------------------

def foldin_split(x: np.ndarray, fraction: float, rng: np.random.RandomState) -> tuple[np.ndarray, np.ndarray]:
    """Split each row's positive items: a random ``fraction`` stays as input (fold-in), the other
    int((1 − fraction) · n) are held out; rows with fewer than 5 items keep all of them."""
    foldin, heldout = (x > 0).astype(np.float32), np.zeros(x.shape, dtype=np.float32)
    for u in range(x.shape[0]):
        items = np.flatnonzero(x[u] > 0)
        if len(items) < MIN_FOLDIN_ITEMS:
            continue
        n_out = int((1.0 - fraction) * len(items) + 1e-9)  # Liang et al.'s int(0.2 n), exact for 1 − 0.8
        out = rng.choice(items, size=n_out, replace=False)
        foldin[u, out], heldout[u, out] = 0.0, 1.0
    return foldin, heldout


def multinomial_nll(x: np.ndarray, log_p: np.ndarray) -> float:
    """Mean over rows of −Σ_j x_j log p_j (the multinomial NLL without the coefficient)."""
    return float(np.mean(-(np.asarray(x, np.float64) * log_p).sum(1)))


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """Row-wise log-probabilities of decoder logits over the G items (the multinomial's)."""
    return logits - np.logaddexp.reduce(logits, axis=1, keepdims=True)


def normalised_log(recon: np.ndarray) -> np.ndarray:
    """log of a non-negative reconstruction normalised per row (NMF's p), floored at 1e-10."""
    p = np.maximum(np.asarray(recon, np.float64), 0.0)
    p = p / np.maximum(p.sum(1, keepdims=True), NLL_FLOOR)
    return np.log(np.maximum(p, NLL_FLOOR))


def top_items(W: np.ndarray, names: np.ndarray, columns: np.ndarray, n: int = TOP_MOVIES) -> list[list[str]]:
    """For each column k in ``columns``: the names of the ``n`` rows with the largest |W_jk|."""
    return [[str(names[j]) for j in np.argsort(-np.abs(W[:, k]), kind="stable")[:n]] for k in columns]


def mean_std(rows: list[dict[str, Any]], keys: tuple[str, ...]) -> dict[str, dict[str, float]]:
    """method → {key: mean, key_std: std} over the splits."""
    out: dict[str, dict[str, float]] = {}
    for method in dict.fromkeys(r["method"] for r in rows):
        sel = [r for r in rows if r["method"] == method]
        out[method] = {**{k: float(np.mean([r[k] for r in sel])) for k in keys},
                       **{f"{k}_std": float(np.std([r[k] for r in sel])) for k in keys}}
    return out


# --- models -------------------------------------------------------------------------------------

def _decode_logits(model, x: np.ndarray) -> np.ndarray:
    """Decoder output (logits over the G items) at the encoder mean of ``x``."""
    if not isinstance(model, ElboModel):
        raise TypeError(f"{type(model).__name__} has no decoder to score items with")
    with torch.no_grad():
        return model.decode(model.represent(torch.from_numpy(x.astype(np.float32)))).double().numpy()


def _nmf(study: SparseVaeRealParams, seed: int):
    from sklearn.decomposition import NMF

    return NMF(study.latent_dim, init="nndsvda", alpha_W=study.nmf_alpha, alpha_H="same",
               max_iter=500, random_state=seed)


def select_beta(params: Params, study: SparseVaeRealParams, name: str, x_train: np.ndarray, split: int,
                label: str, likelihood: str) -> tuple[ModelParams, dict[str, Any]]:
    """Table 1's β-VAE "with best performing β", chosen without the test rows: every β of
    ``study.beta_grid[name]`` is fitted (seed ``split``) on the training rows less a seeded
    ``validation_fraction`` of them and scored by the multinomial NLL of those held-out rows (the
    table's measure); the lowest wins (ties: the smaller β).  The spec at that β, and every member's score."""

    def score(beta: float, rest: np.ndarray, val: np.ndarray) -> float:
        data = in_memory(f"{label}-{split}-validation", {"x_train": rest.astype(np.float32),
                                                          "x_test": val.astype(np.float32)})
        spec = dataclasses.replace(params.models[name], beta=beta)
        logits = _decode_logits(fit_deep(f"{name}-beta{beta:g}", spec, study, data, split, likelihood), val)
        return multinomial_nll(val, log_softmax(logits))

    best, scores, n_val = choose_beta(study.beta_grid[name], x_train, study.validation_fraction, split, score)
    return (dataclasses.replace(params.models[name], beta=best),
            {"beta": best, "validation_nll": scores, "validation_rows": n_val})


def _fit_models(params: Params, study: SparseVaeRealParams, x_train, x_test, split: int, label: str, likelihood: str,
                keep: bool = True):
    """Yield (name, kind, fitted model, selection) for every study model on the training rows (a
    ``beta_grid`` model at the β :func:`select_beta` picks; ``selection`` says which, else empty); with
    ``keep`` each model is kept as ``models/sparse_vae_experiments/real/<label>-<split>-<name>.pt`` (the
    stage's DVC output)."""
    from priorlab.phases import (  # lazy: +5 modules, ~19 ms at import priorlab.studies.sparse_vae_experiments.real
        save_model)

    data = in_memory(f"{label}-{split}", {"x_train": x_train.astype(np.float32), "x_test": x_test.astype(np.float32)})
    for name in study.models:
        spec, selection = params.models[name], {}
        if name in study.beta_grid:
            spec, selection = select_beta(params, study, name, x_train, split, label, likelihood)
        model = fit_deep(name, spec, study, data, split, likelihood)
        meta = {"data": label, "split": split, "model": spec.record(), "likelihood": likelihood}
        if keep:
            save_model(paths.MODELS / NAME / REAL_CELL / f"{label}-{split}-{name}.pt", model,
                       {**meta, "selection": selection} if selection else meta)
        yield name, spec.kind, model, selection


# --- MovieLens ----------------------------------------------------------------------------------

def movielens_rows(params: Params, study: SparseVaeRealParams | None = None,
                   keep: bool = True) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Per split and method: NLL, Recall@k, NDCG@k; and the sparse VAE's top movies (split 0).  ``study``:
    the MovieLens settings (None: ``sparse_vae_study.movielens``; a diagnosis arm passes its own, with
    ``keep=False``: no model files)."""
    from priorlab.data.movielens import (
        load_movielens)  # lazy: +3 modules, ~8 ms at import priorlab.studies.sparse_vae_experiments.real
    from priorlab.metrics import (
        ndcg_at_k, recall_at_k)  # lazy: sklearn + scipy + pandas, ~1.5 s at import studies.sparse_vae_experiments.real

    study = study or params.sparse_vae_study.movielens
    rows: list[dict[str, Any]] = []
    topics: dict[str, Any] = {}
    for split in range(study.splits):
        d = load_movielens(n_movies=study.n_items, min_user_positives=study.min_user_positives,
                           test_fraction=study.test_fraction, random_state=FOLD_SEED, fold=split)
        x_tr, x_te = d["x_train"].astype(np.float64), d["x_test"].astype(np.float64)
        foldin, heldout = foldin_split(x_te, study.foldin_fraction, np.random.RandomState(split))

        def score(method: str, kind: str, log_p: np.ndarray, rank: np.ndarray, selection=None) -> None:
            rows.append({"split": split, "method": method, "kind": kind, "n_train": int(x_tr.shape[0]),
                         "nll": multinomial_nll(x_te, log_p),
                         "recall": recall_at_k(rank, heldout, study.recall_k, exclude=foldin),
                         "ndcg": ndcg_at_k(rank, heldout, study.ndcg_k, exclude=foldin),
                         **({"selection": selection} if selection else {})})

        for name, kind, model, selection in _fit_models(params, study, x_tr, x_te, split, "movielens", "multinomial",
                                                        keep):
            score(name, kind, log_softmax(_decode_logits(model, x_te)), _decode_logits(model, foldin), selection)
            if kind == "sparse_vae":
                rows[-1]["active_columns"] = int(model.active_columns().sum())
            if kind == "sparse_vae" and not topics:
                W = model.decoder.W.detach().double().numpy()
                cols = np.flatnonzero(model.active_columns().numpy())
                topics = {"method": name, "split": split, "columns": cols.tolist(),
                          "movies": top_items(W, d["titles"], cols)}
        nmf = _nmf(study, split).fit(x_tr)
        score("NMF", "nmf", normalised_log(nmf.transform(x_te) @ nmf.components_),
              nmf.transform(foldin.astype(np.float64)) @ nmf.components_)
    return rows, topics


# --- single cell --------------------------------------------------------------------------------

def single_cell_split(study: SparseVaeRealParams, split: int) -> dict[str, np.ndarray]:
    """PBMC split ``split``: the most variable genes of the training cells, quantile-normalised
    (reference = training cells) or raw counts."""
    from priorlab.data.pbmc import (  # lazy: +3 modules, ~9 ms at import priorlab.studies.sparse_vae_experiments.real
        load_pbmc, quantile_normalise, quantile_reference, top_variable_features)

    d = load_pbmc(test_fraction=study.test_fraction, random_state=FOLD_SEED, fold=split)
    keep = top_variable_features(d["x_train"], min(study.n_items, d["x_train"].shape[1]))
    x_tr, x_te = d["x_train"][:, keep].astype(np.float64), d["x_test"][:, keep].astype(np.float64)
    if study.preprocess == "quantile":
        ref = quantile_reference(x_tr)
        x_tr, x_te = quantile_normalise(x_tr, ref), quantile_normalise(x_te, ref)
    return {"x_train": x_tr, "x_test": x_te, "y_train": d["y_train"], "y_test": d["y_test"]}


def single_cell_rows(params: Params) -> list[dict[str, Any]]:
    """Per split and method: held-out cell-type accuracy of the probe on the learned factors."""
    from sklearn.decomposition import PCA

    from priorlab.metrics import (
        probe_accuracy)  # lazy: sklearn + scipy + pandas, ~1.5 s at import priorlab.studies.sparse_vae_experiments.real

    study = params.sparse_vae_study.single_cell
    likelihood = "gaussian" if study.preprocess == "quantile" else "multinomial"
    rows: list[dict[str, Any]] = []
    for split in range(study.splits):
        d = single_cell_split(study, split)
        factors: list[tuple[str, str, np.ndarray, np.ndarray]] = []
        for name, kind, model, _ in _fit_models(params, study, d["x_train"], d["x_test"], split, "pbmc", likelihood):
            with torch.no_grad():
                rep = [model.represent(torch.from_numpy(d[k].astype(np.float32))).double().numpy()
                       for k in ("x_train", "x_test")]
            factors.append((name, kind, *rep))
        for label, est in (("NMF", _nmf(study, split)), ("PCA", PCA(study.latent_dim, random_state=split))):
            factors.append((label, label.lower(), est.fit_transform(d["x_train"]), est.transform(d["x_test"])))
        for name, kind, f_tr, f_te in factors:
            rows.append({"split": split, "method": name, "kind": kind,
                         "accuracy": probe_accuracy(f_tr, d["y_train"], f_te, d["y_test"], random_state=split)})
    return rows


# --- the stage ----------------------------------------------------------------------------------

REAL_CELL = "real"  # the sparse_vae_real stage's folder under models/sparse_vae_experiments/
SLICE, ABLATION_SLICE = "sparse_vae_real", "sparse_vae_ablation"  # their files of param_slices (config.slices)


def param_slice(params: Params) -> dict:
    """What ``sparse_vae_real`` reads of ``models``: the MovieLens and single-cell models."""
    sv = params.sparse_vae_study
    return {"models": entries(params.models, [*sv.movielens.models, *sv.single_cell.models])}


def ablation_param_slice(params: Params) -> dict:
    """What the ``sparse_vae_ablation@<arm>`` stages read of ``models``: every arm's models."""
    return {"models": entries(params.models, [m for arm in params.sparse_vae_study.movielens_ablations.values()
                                              for m in arm.models])}


def real_rows(params: Params) -> dict[str, Any]:
    """Both real-data studies' fits (each skipped when its ``models`` list is empty): the MovieLens
    rows and topics, the single-cell rows."""
    study = params.sparse_vae_study
    ml_rows, topics = movielens_rows(params) if study.movielens.models else ([], {})
    sc_rows = single_cell_rows(params) if study.single_cell.models else []
    return {"movielens_rows": ml_rows, "topics": topics, "single_cell_rows": sc_rows}


def cells(params: Params) -> list:
    """The real-data cells (:mod:`priorlab.studies.cells`): ``sparse_vae_real`` (MovieLens and PBMC, every
    model on every split) and a ``sparse_vae_ablation`` stage per MovieLens diagnosis arm."""
    sv = params.sparse_vae_study

    def cost(study) -> float:
        return sum(max(study.train.steps, 1) * study.splits * params.model(m).step_cost for m in study.models)

    out = []
    if sv.movielens.models or sv.single_cell.models:
        out.append(Cell("sparse_vae_real", None, cost(sv.movielens) + cost(sv.single_cell)))
    out += [Cell(f"sparse_vae_ablation@{name}", None, cost(arm)) for name, arm in sv.movielens_ablations.items()]
    return out


def run_sparse_vae_real(params: Params) -> Path:
    """``sparse_vae_real``: fit and score the real-data models; writes
    ``models/sparse_vae_experiments/real/`` (``rows.json`` and every fitted net) and
    ``metrics/sparse_vae_experiments/real/<study>-<method>.json`` (mean and std over the splits)."""
    import shutil

    check_slice(SLICE, param_slice(params))
    out = paths.MODELS / NAME / REAL_CELL
    shutil.rmtree(out, ignore_errors=True)  # only this run's nets
    rows = real_rows(params)
    write_json(out / "rows.json", rows)
    write_json_folder(paths.METRICS / NAME / REAL_CELL, real_metrics(rows))
    return out


def ablation_dir(name: str) -> Path:
    """A ``sparse_vae_study.movielens_ablations`` arm's folder (``rows.json``): under ``models/diagnosis/``,
    outside the study's folder, so deciding the claims never waits for an arm (the ``diagnosis`` stage reads it)."""
    return paths.ablation_dir(NAME, name)


def run_sparse_vae_ablation(params: Params, ablation: str) -> Path:
    """``sparse_vae_ablation@<name>``: one MovieLens diagnosis arm fitted and scored on the study's folds;
    writes its rows (no model files) to :func:`ablation_dir`."""
    arms = params.sparse_vae_study.movielens_ablations
    if ablation not in arms:
        raise ParamsError(f"sparse_vae_study.movielens_ablations has no entry {ablation!r} (entries: {sorted(arms)})")
    check_slice(ABLATION_SLICE, ablation_param_slice(params))
    rows, _ = movielens_rows(params, arms[ablation], keep=False)
    out = ablation_dir(ablation)
    write_json(out / "rows.json", {"movielens_rows": rows})
    return out


def real_metrics(rows: dict[str, Any]) -> dict[str, dict[str, float]]:
    """The real-data metrics files for ``dvc metrics show / diff``, one per study and method
    (``movielens-<method>``, ``single_cell-<method>``): each score's mean and std over the splits.  With
    both studies off, one file ``scored`` saying each scored 0 methods: the folder is never empty (git
    keeps no empty folder, and ``dvc metrics diff`` could not read HEAD's); it is written only then, so a
    group's ``dvc metrics show`` keeps its columns."""
    stats = {"movielens": mean_std(rows["movielens_rows"], ("nll", "recall", "ndcg")),
             "single_cell": mean_std(rows["single_cell_rows"], ("accuracy",))}
    files = {f"{study}-{method}": numbers for study, by_method in stats.items() for method, numbers in by_method.items()}
    return files or {"scored": {f"{study}_methods": 0.0 for study in stats}}
