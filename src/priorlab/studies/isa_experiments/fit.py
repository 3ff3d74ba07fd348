"""One cell of paper 004's study grid (the ``isa_fit`` stage, ``matrix`` over ``isa_study.models`` ×
``isa_study.seeds``): one models entry at one seed, at every strength of its grid (β for kinds
``vae`` / ``beta_tcvae``, γ for ``factor_vae``), each trained from scratch with ``isa_study.train``
by the shared trainer (checkpoints, exact resume) and scored with ``isa_study.evaluate`` and with the
claim's metric, Chen et al.'s MIG and its permutation noise floor (``isa_study.mig_chen``).

A cell groups the strengths of one model and seed because a cpu-profile model trains in about as
long as a stage process takes to start and load dSprites (≈ 2 s of start-up per stage, measured in
``reports/bench.json``); on the paper profile a cell is 9 models of 20 epochs each.  Writes, per cell:

* ``models/isa_experiments/<model>-<seed>/`` (DVC cache): ``<strength>/model.pt`` and ``rows.json``,
  every strength's row (scores, learned exponents, latent-vs-factor responses) and the device;
* ``metrics/isa_experiments/<model>-<seed>/<beta or gamma>-<strength>.json`` (git): each strength's
  scalar scores, for ``dvc metrics show / diff`` (:func:`cell_metrics`: a row per run, a column per score).

The ``isa_experiments`` stage only aggregates the cells
(:func:`priorlab.studies.isa_experiments.aggregate.read_rows`).
"""

from __future__ import annotations

import dataclasses
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from priorlab import paths
from priorlab.config import ModelParams, Params, ParamsError
from priorlab.io import write_json, write_json_folder
from priorlab.metric_registry import lookup
from priorlab.priors.lp_nested import LpNestedPrior
from priorlab.studies.cells import Cell, step_cost
from priorlab.studies.isa_experiments import NAME

RESPONSE_POINTS = 3000  # ground-truth samples of the latent-vs-factor plots
SCORES = {"mig": "disentanglement.mig", "mig_no_shape": "disentanglement.mig_no_shape",
          "dci_d": "disentanglement.dci.disentanglement", "factor_vae_score":
          "disentanglement.factor_vae_score.eval_accuracy", "beta_vae_score":
          "disentanglement.beta_vae_score.eval_accuracy", "sap": "disentanglement.sap",
          "recon_log_lik": "test.log_lik", "elbo": "test.elbo", "chen_mig": "mig_chen.mig",
          "chen_mig_no_shape": "mig_chen.mig_no_shape", "chen_floor": "mig_chen.floor_no_shape"}


def label(spec: ModelParams) -> str:
    """The paper's name of a study model: by kind and prior."""
    isa = spec.prior.kind == "lp_nested"
    return {"vae": "ISA-VAE" if isa else "β-VAE", "beta_tcvae": "ISA-β-TCVAE" if isa else "β-TCVAE",
            "factor_vae": "ISA-FactorVAE" if isa else "FactorVAE"}[spec.kind]


@dataclasses.dataclass(frozen=True)
class StudyRun:
    model: str  # the models entry
    strength: float  # β (or γ for FactorVAE)
    seed: int
    spec: ModelParams  # the entry with the strength set

    @property
    def name(self) -> str:
        return f"{self.model}-{self.strength:g}-{self.seed}"

    @property
    def cell(self) -> str:
        return cell_name(self.model, self.seed)


def cell_name(model: str, seed: int) -> str:
    """The ``isa_fit`` matrix entry of a models entry and a seed (DVC names it ``isa_fit@<model>-<seed>``)."""
    return f"{model}-{int(seed)}"


def cell_dir(model: str, seed: int) -> Path:
    return paths.MODELS / NAME / cell_name(model, seed)


def cell_metrics_dir(model: str, seed: int) -> Path:
    return paths.METRICS / NAME / cell_name(model, seed)


def study_runs(params: Params) -> list[StudyRun]:
    """Every (model entry, strength, seed) of ``isa_study``, in params order."""
    study = params.isa_study
    out = []
    for m in study.models:
        spec = params.models[m]
        field = study.GRID[spec.kind]
        grid = study.gammas if spec.kind == "factor_vae" else study.betas
        for s in grid:
            for seed in study.seeds:
                out.append(StudyRun(m, float(s), int(seed), dataclasses.replace(spec, **{field: float(s)})))
    return out


def cell_runs(params: Params, model: str, seed: int) -> list[StudyRun]:
    """The runs of one cell, in :func:`study_runs` order; a ``ParamsError`` for a cell not in the grid."""
    study = params.isa_study
    if not study.setup or model not in study.models or int(seed) not in study.seeds:
        raise ParamsError(f"isa_study has no cell {cell_name(model, seed)!r} (models {study.models}, "
                          f"seeds {study.seeds}{', setup empty: the study is off' if not study.setup else ''})")
    return [r for r in study_runs(params) if r.model == model and r.seed == int(seed)]


def exponents(model) -> dict[str, Any] | None:
    """Learned (p0, p_1..p_L) of an Lp-nested prior, None for other priors."""
    if not isinstance(model.prior, LpNestedPrior):
        return None
    with torch.no_grad():
        p0, p_sub = model.prior.exponents()
    return {"p0": float(p0), "p_sub": [float(p) for p in p_sub]}


def factor_responses(represent, gt, n: int, seed: int) -> list[np.ndarray]:
    """Per factor k, the mean code of every latent at each of its values, ``[D, size_k]`` (A.5's
    latent-vs-factor plots, as Chen et al. 2018 draw them), from ``n`` seeded ground-truth samples."""
    f, x = gt.sample(n, np.random.RandomState(seed))
    codes = represent(x)
    return [np.stack([codes[f[:, k] == v].mean(0) if np.any(f[:, k] == v) else np.full(codes.shape[1], np.nan)
                      for v in range(size)], 1) for k, size in enumerate(gt.factor_sizes)]


def chen_scores(posterior, gt, p) -> dict[str, Any]:
    """The claim's metric (``isa_study.mig_chen``): Chen et al.'s MIG over all factors and without
    ``shape`` on ``p.n_points`` seeded ground-truth samples, and the noise floor without shape (the
    largest over ``p.permutations`` permutations of the factors against the code; all of them kept)."""
    from priorlab.metrics.mig_chen import (  # lazy: sklearn + scipy + pandas, ~1.7 s at import
        gaps, mutual_information, permutation_floor)

    rs = np.random.RandomState(p.seed)
    factors, x = gt.sample(p.n_points, rs)
    mu, logvar = posterior(x)
    out = mutual_information(mu, logvar, factors, n_samples=p.n_samples, random_state=rs)
    names = list(gt.factor_names)
    no_shape = (names.index("shape"),) if "shape" in names else ()
    floors = permutation_floor(out, mu, logvar, factors, p.permutations, p.n_samples, rs, no_shape)
    return {"mig": gaps(out)["mig"], "mig_no_shape": gaps(out, no_shape)["mig"], "floor_no_shape": max(floors),
            "floors_no_shape": floors, "mi": out["mi"].tolist(), "n_points": p.n_points, "n_samples": p.n_samples}


def train_and_score(params: Params, run: StudyRun, data, gt, device: torch.device) -> tuple[dict[str, Any], Any]:
    """Train one study model from scratch (resumable) and score it: its row of the study and the model."""
    from priorlab.evaluation import (  # lazy: +19 modules, ~39 ms at import priorlab.studies.isa_experiments.fit
        evaluate_model, posterior_function, representation_function)
    from priorlab.phases import (  # lazy: +22 modules, ~60 ms at import priorlab.studies.isa_experiments.fit
        fingerprint, fit_phase, new_model)

    study = params.isa_study
    opt = dataclasses.replace(study.train, seed=run.seed)
    fp = fingerprint(NAME, params.setup(study.setup).record(), run.spec.record(),
                     dataclasses.asdict(opt), data.manifest.get("arrays", {}))
    t0 = time.perf_counter()
    model = new_model(params.setup(study.setup), run.spec, data.obs_shape, run.seed)
    fit_phase(model, data, opt, checkpoint=paths.CHECKPOINTS / NAME / f"{run.name}.pt", live_dir=None, fingerprint=fp,
              device=device, desc=f"{NAME}/{run.name}")
    train_s = time.perf_counter() - t0
    result = evaluate_model(model, data, gt, study.evaluate, profile=params.profile, device=device)  # where it trained
    result["mig_chen"] = chen_scores(posterior_function(model, data.prepare, study.evaluate.batch_size), gt,
                                     study.mig_chen)
    row = {"run": run.name, "model": run.model, "label": label(run.spec), "kind": run.spec.kind,
           "strength": run.strength, "seed": run.seed, "train_s": round(train_s, 2),
           "eval_s": round(time.perf_counter() - t0 - train_s, 2), "exponents": exponents(model),
           "model_params": run.spec.record(), "metrics": result,
           "responses": [r.tolist() for r in factor_responses(
               representation_function(model, data.prepare, study.evaluate.batch_size), gt, RESPONSE_POINTS, run.seed)]}
    model.to("cpu")
    for key, dotted in SCORES.items():
        row[key] = lookup(result, dotted)
    return row, model


def cells(params: Params) -> list:
    """The study's cells (:mod:`priorlab.studies.cells`): an ``isa_fit`` stage per models entry and seed,
    reading the setup's data set; cost: every strength's training."""
    study = params.isa_study
    if not study.setup:
        return []
    costs: dict[str, float] = {}
    for run in study_runs(params):
        stage = f"isa_fit@{cell_name(run.model, run.seed)}"
        costs[stage] = costs.get(stage, 0.0) + max(study.train.steps, 1) * step_cost(params, study.setup, run.model)
    return [Cell(stage, params.setup(study.setup).dataset, cost) for stage, cost in costs.items()]


def run_isa_fit(params: Params, model: str, seed: str) -> Path:
    """``isa_fit@<model>-<seed>``: train and score the cell's runs; write its model folder (atomically:
    a killed stage leaves no folder) and its metrics file."""
    from priorlab.data.store import (  # lazy: +7 modules, ~20 ms at import priorlab.studies.isa_experiments.fit
        ground_truth)
    from priorlab.phases import (  # lazy: +22 modules, ~60 ms at import priorlab.studies.isa_experiments.fit
        load_setup_data, resolve_device, save_model)

    runs = cell_runs(params, model, int(seed))
    study = params.isa_study
    device = resolve_device(params.device)
    data = load_setup_data(params, study.setup)
    gt = ground_truth(params.dataset_of(study.setup))
    out = cell_dir(model, int(seed))
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    rows = []
    for run in runs:
        row, fitted = train_and_score(params, run, data, gt, device)
        save_model(tmp / f"{run.strength:g}" / "model.pt", fitted, {"run": run.name, "model": run.spec.record()})
        print(f"{run.name}: MIG {row['mig']:.3f}, Chen MIG w/o shape {row['chen_mig_no_shape']:.3f} "
              f"(floor {row['chen_floor']:.3f}), recon {row['recon_log_lik']:.1f} "
              f"({row['train_s']:.0f} s + {row['eval_s']:.0f} s)", flush=True)
        rows.append({k: v for k, v in row.items() if k not in ("train_s", "eval_s")})  # outputs carry no wall times
    write_json(tmp / "rows.json", {"device": str(device), "rows": rows})
    shutil.rmtree(out, ignore_errors=True)
    tmp.replace(out)
    write_json_folder(cell_metrics_dir(model, int(seed)), cell_metrics(rows))
    return out


def cell_metrics(rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """A cell's metrics files for ``dvc metrics show / diff``: one per strength (``beta-<β>`` or
    ``gamma-<γ>``), each with the scalar scores under the same keys (a row per run, a column per score)."""
    return {f"{'gamma' if r['kind'] == 'factor_vae' else 'beta'}-{r['strength']:g}":
            {k: r[k] for k in SCORES if r[k] is not None} for r in rows}
