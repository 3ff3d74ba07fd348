"""The cross-prior benchmark on paper 003's synthetic data (issue 45; the ``benchmark_synthetic`` stages):
every ``benchmark.priors`` entry on data sets with true factors *and* a true support (which features each
factor loads on), scored as paper 003's study scores its models — held-out MSE, DCI disentanglement,
active columns, support F1 where a model has a support (the sparse VAE's decoder masks), and whether the
fit collapsed.

The data sets and the training are ``sparse_vae_study``'s (:mod:`priorlab.studies.sparse_vae_experiments`):
data set ``i`` of a ρ is drawn from seed ``i``, a model trains from scratch at seed ``i`` with the study's
``train``, nets and likelihood, by the same function.  So a prior whose ``models`` settings equal a model
the study already fits on that data set is the same fit, and its row is read from that ``sparse_vae_fit``
cell (``origin`` names it) instead of trained again — the plan (``models/benchmark_plan/synthetic/<prior>.json``)
holds those rows, so a cell depends on its plan alone.  Each data set is an independent unit.

Writes ``models/benchmark_synthetic/<prior>/rows.json`` (a row per ρ and data set; no wall times).
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path
from typing import Any

from priorlab import paths
from priorlab.config import BenchmarkPriorParams, ModelParams, Params, ParamsError
from priorlab.config.models import loss_scaling_of
from priorlab.data.sparse_synthetic import make_sparse_synthetic
from priorlab.errors import UserError
from priorlab.io import as_read_back, read_json, write_json
from priorlab.studies.benchmark import NAME
from priorlab.studies.benchmark.fit import plan_dir, prior_spec
from priorlab.studies.intervals import Estimate, clopper_pearson, mean_t

SYNTHETIC = BenchmarkPriorParams.SYNTHETIC  # the setup_models key of this table

STAGE = f"{NAME}_synthetic"
SCORES = ("mse", "dci_d", "f1", "precision", "recall", "active_columns", "collapsed")
"""The scores a synthetic row keeps (paper 003's: :func:`~priorlab.studies.sparse_vae_experiments.fit.deep_row`)."""
TABLE = (("mse", "held-out MSE ↓", -1), ("dci_d", "DCI D ↑", 1), ("f1", "support F1 ↑", 1),
         ("active_columns", "active columns", 0), ("collapsed", "collapsed", -1))
"""The table's columns: (score, title, direction: +1 higher is better, −1 lower, 0 a property)."""


def cell_dir(prior: str) -> Path:
    return paths.MODELS / STAGE / prior


def plan_file(prior: str) -> Path:
    return plan_dir() / "synthetic" / f"{prior}.json"


def study_settings(params: Params) -> dict[str, Any]:
    """What a synthetic fit reads from ``sparse_vae_study``: the data, the nets, the training, the DCI."""
    study = params.sparse_vae_study
    return {"n": study.n, "noise_std": study.noise_std, "latent_dim": study.latent_dim, "hidden": list(study.hidden),
            "train": dataclasses.asdict(study.train), "dci_mode": study.dci_mode, "dci_bins": study.dci_bins,
            "dci_backend": study.dci_backend}


def study_method(params: Params, spec: ModelParams, seed: int) -> str | None:
    """The ``sparse_vae_study`` model that fits ``spec`` on data set ``seed`` of each of its ρ exactly as
    the benchmark would (the same settings, not chosen on a β grid), or None."""
    study = params.sparse_vae_study
    fitted = [*(m for m in study.models if seed < study.datasets_per_rho and m not in study.beta_grid),
              *(m for m in study.variant_models if seed < study.variant_datasets_per_rho)]
    target = dataclasses.replace(spec, warm_start="scratch").record()
    return next((m for m in fitted if dataclasses.replace(params.model(m), warm_start="scratch").record() == target),
                None)


def reused_rows(params: Params, prior: str) -> dict[str, dict[str, Any]]:
    """``"<ρ>/<seed>"`` → the row of paper 003's ``sparse_vae_fit`` cell that is this prior's fit on that
    data set (:func:`study_method`), its ``origin`` the stage; a ``ParamsError`` when that cell has not run."""
    from priorlab.studies.sparse_vae_experiments.fit import (
        cell_dir as study_cell)  # lazy: +7 modules, ~22 ms at import priorlab.studies.benchmark.synthetic

    study, bench = params.sparse_vae_study, params.benchmark.synthetic
    spec = prior_spec(params, prior, SYNTHETIC)
    out: dict[str, dict[str, Any]] = {}
    if not study.models:
        return out
    for rho in bench.rhos:
        if float(rho) not in [float(r) for r in study.rhos]:
            continue
        path = study_cell(float(rho)) / "rows.json"
        cell = None  # the cell's rows, read once, when some data set is read from it
        for seed in range(bench.datasets_per_rho):
            method = study_method(params, spec, seed)
            if method is None:
                continue
            if cell is None:
                if not path.is_file():
                    raise ParamsError(f"{path} is missing: sparse_vae_fit@{float(rho)!r} has not run (dvc repro runs it)")
                cell = read_json(path)["rows"]
            row = next(r for r in cell if r["seed"] == seed and r["method"] == method)
            out[f"{float(rho)!r}/{seed}"] = {**{k: row[k] for k in SCORES if k in row},
                                             "origin": f"sparse_vae_fit@{float(rho)!r}", "study_method": method}
    return out


def plan_record(params: Params, prior: str) -> dict[str, Any]:
    """Everything cell ``benchmark_synthetic@<prior>`` reads: the prior's settings, ``sparse_vae_study``'s
    data, nets and training, the ρ and data sets, and the rows it reads from paper 003's cells."""
    bench = params.benchmark
    return as_read_back({
        "prior": prior, "label": bench.label(prior), "model": bench.priors[prior].model_for(SYNTHETIC),
        "strength": bench.priors[prior].strength, "model_params": prior_spec(params, prior, SYNTHETIC).record(),
        "study": study_settings(params), "rhos": [float(r) for r in bench.synthetic.rhos],
        "datasets_per_rho": bench.synthetic.datasets_per_rho, "reuse": reused_rows(params, prior),
        "profile": params.profile})


def plan_records(params: Params) -> dict[str, dict[str, Any]]:
    """The synthetic cells' plan files for ``benchmark_plan`` (keys relative to its folder)."""
    return {f"synthetic/{prior}": plan_record(params, prior) for prior in params.benchmark.priors}


def cell_rows(params: Params, prior: str) -> list[dict[str, Any]]:
    """The prior's row per (ρ, data set): read (:func:`reused_rows`) or trained and scored by paper 003's
    :func:`~priorlab.studies.sparse_vae_experiments.fit.deep_row`; one ``not_run`` row when its model
    cannot be built on these nets (e.g. an ISA layout of another latent size)."""
    from priorlab.models import build_model  # lazy: +13 modules, ~30 ms at import priorlab.studies.benchmark.synthetic
    from priorlab.studies.sparse_vae_experiments.fit import (
        deep_row, setup_for)  # lazy: +7 modules, ~22 ms at import priorlab.studies.benchmark.synthetic

    study, bench = params.sparse_vae_study, params.benchmark
    spec = prior_spec(params, prior, SYNTHETIC)
    base = {"prior": prior, "label": bench.label(prior), "model": bench.priors[prior].model_for(SYNTHETIC), "kind": spec.kind}
    try:
        build_model(setup_for(study, "gaussian", loss_scaling_of(spec)), spec, (7,))
    except (ValueError, ParamsError) as exc:
        print(f"{prior} on the synthetic data: not run ({exc})", flush=True)
        return [{**base, "rho": None, "seed": None, "origin": "not_run", "reason": str(exc)}]
    reuse = reused_rows(params, prior)
    rows = []
    for rho in bench.synthetic.rhos:
        for seed in range(bench.synthetic.datasets_per_rho):
            key = f"{float(rho)!r}/{seed}"
            if key in reuse:
                rows.append({**base, "rho": float(rho), "seed": seed, **reuse[key]})
                continue
            d = {**make_sparse_synthetic(study.n, float(rho), study.noise_std, random_state=seed), "rho": float(rho)}
            row, _ = deep_row(f"{NAME}-{prior}", spec, study, d, seed)
            rows.append({**base, "rho": float(rho), "seed": seed, **{k: row[k] for k in SCORES if k in row},
                         "origin": "trained"})
    return rows


def run_benchmark_synthetic(params: Params, prior: str) -> Path:
    """``benchmark_synthetic@<prior>``: the prior on every synthetic data set of the plan; its folder
    written atomically (a killed stage leaves none)."""
    if prior not in params.benchmark.priors:
        raise ParamsError(f"the benchmark has no prior {prior!r} (priors {sorted(params.benchmark.priors)})")
    plan = plan_file(prior)
    if not plan.is_file() or read_json(plan) != plan_record(params, prior):
        raise ParamsError(f"{plan} is missing or older than params.yaml or its inputs: run the benchmark_plan stage "
                          "first (dvc repro runs it)")
    out = cell_dir(prior)
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    write_json(tmp / "rows.json", {"rows": cell_rows(params, prior)})
    shutil.rmtree(out, ignore_errors=True)
    tmp.replace(out)
    return out


def read_rows(params: Params) -> list[dict[str, Any]]:
    """Every row of every ``benchmark_synthetic`` cell, priors in params order; a ``UserError`` naming the
    first cell that has not run or holds other data sets than ``benchmark.synthetic`` asks for."""
    bench = params.benchmark
    want = [(float(r), s) for r in bench.synthetic.rhos for s in range(bench.synthetic.datasets_per_rho)]
    rows = []
    for prior in bench.priors:
        path = cell_dir(prior) / "rows.json"
        if not path.is_file():
            raise UserError(f"{path} is missing: stage {STAGE}@{prior} has not run (dvc repro benchmark runs it)")
        cell = read_json(path)["rows"]
        have = [(r["rho"], r["seed"]) for r in cell]
        if have != want and have != [(None, None)]:
            raise UserError(f"{path} holds other data sets than benchmark.synthetic asks for: rerun {STAGE}@{prior} "
                            "(dvc repro benchmark)")
        rows += cell
    return rows


def estimates(rows: list[dict[str, Any]]) -> dict[tuple[float, str, str], Estimate]:
    """(ρ, prior, score) -> over the prior's data sets at that ρ (independent units): the mean with its t
    interval, the collapse rate with its exact (Clopper–Pearson) interval; a score some row lacks is left out."""
    groups: dict[tuple[float, str], list[dict[str, Any]]] = {}
    for r in rows:
        if r["origin"] != "not_run":
            groups.setdefault((r["rho"], r["prior"]), []).append(r)
    out = {}
    for (rho, prior), g in groups.items():
        for score, _, _ in TABLE:
            if not all(score in r for r in g):
                continue
            if score == "collapsed":
                out[(rho, prior, score)] = clopper_pearson(sum(bool(r[score]) for r in g), len(g))
            else:
                out[(rho, prior, score)] = mean_t([float(r[score]) for r in g])
    return out
