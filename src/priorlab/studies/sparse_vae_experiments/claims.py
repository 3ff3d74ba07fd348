"""Paper 003's claims, decided from the study's rows (no I/O): the synthetic ones of fig. 2–4 on the
medians over data sets (:func:`decide_claims`, the models that decide them: :func:`claim_models`) and
the real-data ones of tables 1a and 4 paired by split (:func:`decide_real_claims`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from priorlab.config import Params
from priorlab.config.models import loss_scaling_of
from priorlab.studies.claims import Claim, fmt
from priorlab.studies.criteria import criterion
from priorlab.studies.intervals import bootstrap, paired_difference


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


AS_WRITTEN, AS_RELEASED = "as written", "as released"
"""The two objectives every synthetic claim is decided under (issue 42): the paper's (``loss_scaling:
paper``) and the released code's (``released_code``, with its σ_j and θ treatment)."""


def decide_claims(rows: list[dict[str, Any]], sparse: str, deep_baselines: list[str], random_state: int = 0,
                  subject: str = "") -> list[Claim]:
    """The synthetic claims (criteria ``003.mse``, ``003.dci``, ``003.support_f1``,
    ``003.active_columns``): per ρ a percentile-bootstrap interval over data sets of the medians;
    ``subject`` names the objective (:data:`AS_WRITTEN`, :data:`AS_RELEASED`)."""
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
                                    f"medians over {n} data sets — {measured('mse')}", subject=subject),
        criterion("003.dci").decide([(f"ρ={r:g}", _median_gap(rows, sparse, deep_baselines, r, "dci_d", False,
                                                             random_state)) for r in rhos],
                                    f"medians over {n} data sets — {measured('dci_d')}", subject=subject),
        criterion("003.support_f1").decide(
            [(f"ρ={r:g}", median("f1", r)) for r in rhos],
            f"median F1 {fmt([np.median(list(_by_seed(rows, sparse, r, 'f1').values())) for r in rhos])}",
            subject=subject),
        criterion("003.active_columns").decide(
            [(f"ρ={r:g}", median("active_columns", r)) for r in rhos],
            "median active columns "
            f"{fmt([np.median(list(_by_seed(rows, sparse, r, 'active_columns').values())) for r in rhos], 2)}",
            subject=subject),
    ]


def claim_models(params: Params, names: list[str], scaling: str) -> tuple[str | None, list[str]]:
    """The first ``sparse_vae`` entry of ``names`` with ``loss_scaling`` = ``scaling`` and the
    ``vae``-kind entries with it (the deep baselines of the claims)."""
    same = [m for m in names if params.models[m].kind in ("sparse_vae", "vae")
            and loss_scaling_of(params.models[m]) == scaling]
    sparse = next((m for m in same if params.models[m].kind == "sparse_vae"), None)
    return sparse, [m for m in same if params.models[m].kind == "vae"]


def best_claim(rows: list[dict[str, Any]], sparse: str, key: str, criterion_key: str,
               outside: tuple[str, ...] = ()) -> Claim:
    """The sparse VAE against every other method (but ``outside``, our additions the paper's table
    lacks): per method the paired-by-split difference of ``key`` (criterion ``criterion_key``)."""
    by = {}
    for r in rows:
        by.setdefault(r["method"], {})[r["split"]] = r[key]
    others = [m for m in by if m != sparse and m not in outside]
    splits = sorted(by[sparse])
    parts = [(m, paired_difference([by[sparse][s] for s in splits], [by[m][s] for s in splits])) for m in others]
    measured = (", ".join(f"{m} {fmt(np.mean(list(v.values())))}" for m, v in by.items())
                + f" (mean of {len(splits)} splits)")
    return criterion(criterion_key).decide(parts, measured)


def decide_real_claims(ml_rows: list[dict[str, Any]], sc_rows: list[dict[str, Any]],
                       ml_sparse: str | None, sc_sparse: str | None) -> list[Claim]:
    """Tables 1a and 4 (criteria ``003.movielens_*``, ``003.single_cell_accuracy``), paired by split."""
    claims = []
    if ml_sparse and ml_rows:
        claims += [best_claim(ml_rows, ml_sparse, k, f"003.movielens_{k}") for k in ("nll", "recall", "ndcg")]
    if sc_sparse and sc_rows:  # table 4 has no PCA: ours, in the table only
        claims.append(best_claim(sc_rows, sc_sparse, "accuracy", "003.single_cell_accuracy", outside=("PCA",)))
    return claims


def first_sparse(params: Params, models: list[str]) -> str | None:
    return next((m for m in models if params.models[m].kind == "sparse_vae"), None)
