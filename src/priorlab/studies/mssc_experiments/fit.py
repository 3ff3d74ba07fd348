"""The cells of paper 000's study.  ``mssc_fit`` (``matrix`` over ``mssc_study.models`` × ``mssc_study.bars``):
one model on one bars data set entry at every seed (the seed shifts the entry's data seed and seeds the
model: W initialisation, sampler), ``iterations`` full-batch EM iterations each
(:class:`~priorlab.models.mssc.SparseCodingModel.train_step`); ``mssc_patches`` (one per model): its
dictionary on the ``patches`` entry.  A cell groups the seeds because a bars model trains in a second or
two, less than a stage process takes to start; it is one bars entry, not all, so that a cell stays
within a few minutes on the cpu profile and a new bars entry adds cells without rerunning the others.
Writes ``models/mssc_experiments/<model>/<bars>/`` (``<seed>.pt``, ``rows.json``) with
``metrics/mssc_experiments/<model>-<bars>.json``, and ``models/mssc_experiments/<model>/patches/``
(``model.pt``, ``rows.json``); the ``mssc_experiments`` stage aggregates them (:mod:`.aggregate`, :mod:`.report`).

Measured per run: bars recovery (:func:`~priorlab.data.bars.bars_recovery`, Hungarian matching,
correlation ≥ ``threshold``), active latents per training point (latents non-zero in the posterior
samples at T = 1, averaged over samples) against the true number of bars.
"""

from __future__ import annotations

import contextlib
import dataclasses
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from priorlab import paths
from priorlab.config import BarsParams, ImagePatchesParams, ModelParams, Params, ParamsError, SetupParams
from priorlab.config.slices import check_slice, entries
from priorlab.data.patches import on_off_to_image
from priorlab.data.store import build_arrays, in_memory
from priorlab.io import write_json
from priorlab.studies.cells import Cell
from priorlab.studies.mssc_experiments import NAME


def train_em(spec: ModelParams, data, latent_dim: int, iterations: int, seed: int, start=None):
    """A sparse-coding model of ``spec`` with ``latent_dim`` latents, seeded with ``seed``, after
    ``iterations`` full-batch EM steps on the training rows of ``data``, started at Θ ``start``
    (:class:`~priorlab.models.sparse_coding.SparseCodingParams`; None: the data-driven initialisation);
    returns (model, last logs)."""
    from priorlab.models.protocol import (  # lazy: +14 modules, ~26 ms at import priorlab.studies.mssc_experiments.fit
        StepContext)
    from priorlab.phases import new_model  # lazy: +19 modules, ~39 ms at import priorlab.studies.mssc_experiments.fit

    model = new_model(SetupParams(dataset=data.name, latent_dim=latent_dim), spec, data.obs_shape, seed)
    if start is not None:
        model.start_at(start)
    model.bind_data(data)
    ts = model.training_set(data)
    batch = ts.batch(torch.arange(len(ts)))
    logs: dict[str, float] = {}
    for step in range(iterations):
        logs = model.train_step(batch, step, StepContext(None))
    return model, logs


@contextlib.contextmanager
def one_thread():
    """Small models: one torch thread (2 workers share the 2 cores); the caller's setting is restored."""
    before = torch.get_num_threads()
    try:
        yield
    finally:
        torch.set_num_threads(before)


def generating_theta(dp: BarsParams):
    """The parameters Θ the bars entry ``dp`` is drawn with (:mod:`priorlab.data.bars`): the 0/1 bars,
    the noise variance, each bar's probability and its slab (a zero variance floored at 1e-6, as Θ needs
    positive variances)."""
    from priorlab.data.bars import bar_matrix  # lazy: scipy, ~404 ms at import priorlab.studies.mssc_experiments.fit
    from priorlab.models.sparse_coding import (
        SparseCodingParams)  # lazy: +15 modules, ~36 ms at import priorlab.studies.mssc_experiments.fit

    W = torch.as_tensor(bar_matrix(dp.R), dtype=torch.float64)
    fixed = dp.intensity == "fixed"
    return SparseCodingParams(W, max(dp.noise_std ** 2, 1e-6), dp.bar_prob or 2.0 / W.shape[1],
                              1.0 if fixed else dp.slab_mu, 1e-6 if fixed else max(dp.slab_std ** 2, 1e-6))


def bars_run(params: Params, bars: str, model: str, seed: int, *, iterations: int | None = None,
             start: str = "random", model_seed_offset: int = 0) -> tuple[dict[str, Any], Any]:
    """Train ``model`` on data set entry ``bars`` with its seed shifted by ``seed`` for ``iterations``
    EM iterations (None: the study's), from a random start (the model seeded with ``seed +
    model_seed_offset``) or from the generating Θ (``start="truth"``); score recovery.  Returns the
    run's row and the fitted model."""
    with one_thread():
        return _bars_run(params, bars, model, seed, iterations or params.mssc_study.iterations, start,
                         model_seed_offset)


def _bars_run(params: Params, bars: str, model: str, seed: int, iterations: int, start: str,
              model_seed_offset: int) -> tuple[dict[str, Any], Any]:
    from priorlab.data.bars import (  # lazy: scipy, ~404 ms at import priorlab.studies.mssc_experiments.fit
        bar_matrix, bars_recovery)

    t0, c0 = time.perf_counter(), time.process_time()
    dp: BarsParams = params.datasets[bars]
    arrays = build_arrays(dataclasses.replace(dp, seed=dp.seed + seed))
    data = in_memory(bars, arrays)
    W_true = bar_matrix(dp.R)
    m, logs = train_em(params.models[model], data, W_true.shape[1], iterations, seed + model_seed_offset,
                       generating_theta(dp) if start == "truth" else None)
    rec = bars_recovery(m.W.numpy(), W_true, params.mssc_study.threshold)
    samples = m.posterior_samples(data.prepare(data.x("train")))
    active = (samples != 0).sum(-1).double().mean(1).numpy()
    true_active = (arrays["sources_train"] != 0).sum(1)
    return {"bars": bars, "variant": dp.variant, "model": model, "kind": params.models[model].kind, "seed": seed,
            "recovered": rec["recovered"], "n_recovered": rec["n_recovered"],
            "min_correlation": float(rec["correlations"].min()), "sigma2": float(m.sigma2), "pi": float(m.pi),
            "log_joint": logs["log_joint"], "W": m.W.numpy().tolist(), "assignment": rec["assignment"].tolist(),
            "sparsity": sparsity_by_count(true_active, active), "train_s": time.perf_counter() - t0,
            "cpu_s": time.process_time() - c0}, m


def sparsity_by_count(true_active: np.ndarray, inferred: np.ndarray) -> dict[str, float]:
    """Mean inferred active latents per point, grouped by the true number of bars (as string keys)."""
    return {str(int(k)): float(inferred[true_active == k].mean()) for k in np.unique(true_active)}


def field_stats(W: np.ndarray, patch_size: int) -> dict[str, float]:
    """Crude shape statistics of fields (ON − OFF images), means over fields: the share of a field's
    energy in its 25 % strongest pixels (localisation) and the anisotropy ``1 - λ_min/λ_max`` of the
    energy's second moments (0 = round / globular, 1 = elongated / edge-like)."""
    imgs = on_off_to_image(W.T, patch_size)
    loc, aniso = [], []
    yy, xx = np.mgrid[:patch_size, :patch_size]
    for img in imgs:
        e = img.ravel() ** 2
        if e.sum() == 0:
            continue
        loc.append(float(np.sort(e)[::-1][: max(1, e.size // 4)].sum() / e.sum()))
        w = e.reshape(img.shape) / e.sum()
        my, mx = (w * yy).sum(), (w * xx).sum()
        c = np.array([[(w * (yy - my) ** 2).sum(), (w * (yy - my) * (xx - mx)).sum()],
                      [(w * (yy - my) * (xx - mx)).sum(), (w * (xx - mx) ** 2).sum()]])
        ev = np.linalg.eigvalsh(c)
        aniso.append(float(1 - ev[0] / ev[1]) if ev[1] > 0 else 0.0)
    return {"energy_top25": float(np.mean(loc)), "anisotropy": float(np.mean(aniso))}


def patches_run(params: Params, model: str) -> tuple[dict[str, Any], Any]:
    """The dictionary ``model`` learns on natural-image patches (one torch thread, restored after):
    its row and the fitted model."""
    with one_thread():
        return _patches_run(params, model)


def _patches_run(params: Params, model: str) -> tuple[dict[str, Any], Any]:
    t0, c0 = time.perf_counter(), time.process_time()
    study = params.mssc_study
    dp: ImagePatchesParams = params.datasets[study.patches]
    data = in_memory(study.patches, build_arrays(dp))
    m, logs = train_em(params.models[model], data, study.patch_latents, study.patch_iterations, dp.seed)
    samples = m.posterior_samples(data.prepare(data.x("train")))
    usage = (samples != 0).double().mean((0, 1)).numpy()
    order = np.argsort(-usage)
    W = m.W.numpy()[:, order]
    return {"model": model, "W": W.tolist(), "usage": usage[order].tolist(), "sigma2": float(m.sigma2),
            "pi": float(m.pi), "log_joint": logs["log_joint"], **field_stats(W, dp.patch_size),
            "train_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0}, m


def cell_dir(model: str, part: str) -> Path:
    """A cell's model folder: ``part`` is a bars entry (``mssc_fit``) or ``patches`` (``mssc_patches``)."""
    return paths.MODELS / NAME / model / part


DROP = ("train_s", "cpu_s")  # the log, not the outputs: reruns are byte-identical


def _write_cell(out: Path, fill) -> None:
    """Write a cell folder atomically: ``fill(tmp)`` writes into a temporary sibling that replaces
    ``out`` only when it is complete (a killed stage leaves no cell)."""
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    fill(tmp)
    shutil.rmtree(out, ignore_errors=True)
    tmp.replace(out)


def _report(label: str, rows: list[dict]) -> None:
    print(f"{label}: {sum(r['train_s'] for r in rows):.0f} s wall, {sum(r['cpu_s'] for r in rows):.0f} CPU s "
          "in the fits", flush=True)


def cells(params: Params) -> list:
    """The study's cells (:mod:`priorlab.studies.cells`), each building its own data: an ``mssc_fit`` stage
    per model and bars data set (EM iterations x seeds), an ``mssc_patches`` stage per model, an
    ``mssc_ablation`` stage per diagnosis arm."""
    study = params.mssc_study
    out = []
    for model in study.models:
        out += [Cell(f"mssc_fit@{model}-{bars}", None, float(study.iterations * len(study.seeds))) for bars in study.bars]
        out.append(Cell(f"mssc_patches@{model}", None, float(max(study.patch_iterations, 1) if study.patches else 1)))
    out += [Cell(f"mssc_ablation@{name}", None, float(max(arm.iterations, 1) * max(len(arm.seeds), 1)))
            for name, arm in study.ablations.items()]
    return out


def run_mssc_fit(params: Params, model: str, bars: str) -> Path:
    """``mssc_fit@<model>-<bars>``: every seed of one ``mssc_study.models`` entry on one bars entry;
    writes its model folder atomically and its metrics file."""
    from priorlab.phases import save_model  # lazy: +19 modules, ~39 ms at import priorlab.studies.mssc_experiments.fit

    study = params.mssc_study
    if model not in study.models or bars not in study.bars:
        raise ParamsError(f"mssc_study has no cell {model}-{bars} (models {study.models}, bars {study.bars}"
                          f"{': the study is off' if not study.bars else ''})")
    rows = []

    def fill(tmp: Path) -> None:
        for seed in study.seeds:
            row, fitted = bars_run(params, bars, model, seed)
            save_model(tmp / f"{seed}.pt", fitted, {"bars": bars, "model": model, "seed": seed})
            rows.append(row)
        _report(f"{model} on {bars}", rows)
        write_json(tmp / "rows.json", {"rows": [{k: v for k, v in r.items() if k not in DROP} for r in rows]})

    out = cell_dir(model, bars)
    _write_cell(out, fill)
    write_json(paths.METRICS / NAME / f"{model}-{bars}.json", cell_metrics(rows))
    return out


def cell_metrics(rows: list[dict[str, Any]]) -> dict[str, float]:
    """A cell's headline numbers for ``dvc metrics show / diff`` (the same keys in every cell's file, so
    the table has a row per cell; each seed's numbers are in the cell's ``rows.json``): the rate of seeds
    that recovered every bar, and the means over seeds of bars recovered, σ² and π, the median of the
    smallest bar correlation."""
    return {"seeds": len(rows), "all_recovered_rate": float(np.mean([bool(r["recovered"]) for r in rows])),
            "n_recovered_mean": float(np.mean([r["n_recovered"] for r in rows])),
            "min_correlation_median": float(np.median([r["min_correlation"] for r in rows])),
            "sigma2_mean": float(np.mean([r["sigma2"] for r in rows])), "pi_mean": float(np.mean([r["pi"] for r in rows]))}


def ablation_dir(name: str) -> Path:
    """An ``mssc_study.ablations`` arm's folder (``rows.json``): under ``models/diagnosis/``, outside the
    study's folder, so deciding the claim never waits for an arm (the ``diagnosis`` stage reads it)."""
    return paths.ablation_dir(NAME, name)


def run_mssc_ablation(params: Params, ablation: str) -> Path:
    """``mssc_ablation@<name>``: one ``mssc_study.ablations`` arm at each of its seeds; writes its rows
    (W included, no model files) atomically."""
    study = params.mssc_study
    if ablation not in study.ablations:
        raise ParamsError(f"mssc_study.ablations has no entry {ablation!r} (entries: {sorted(study.ablations)})")
    a = study.ablations[ablation]
    rows = []

    def fill(tmp: Path) -> None:
        tmp.mkdir(parents=True)
        for seed in study.ablation_seeds(ablation):
            row, _ = bars_run(params, a.bars, a.model, seed, iterations=a.iterations, start=a.start,
                              model_seed_offset=a.model_seed_offset)
            rows.append({**row, "ablation": ablation, "start": a.start, "iterations": a.iterations})
        _report(f"ablation {ablation} ({a.model} on {a.bars}, start {a.start})", rows)
        write_json(tmp / "rows.json", {"rows": [{k: v for k, v in r.items() if k not in DROP} for r in rows]})

    out = ablation_dir(ablation)
    _write_cell(out, fill)
    return out


PATCHES_SLICE = "mssc_patches"  # its file of param_slices (priorlab.config.slices)


def patches_param_slice(params: Params) -> dict:
    """What every ``mssc_patches@<model>`` reads of ``datasets``: the ``patches`` entry (none when off;
    DVC cannot track a key named by a value that may be empty)."""
    patches = params.mssc_study.patches
    return {"datasets": entries(params.datasets, [patches] if patches else [])}


def run_mssc_patches(params: Params, model: str) -> Path:
    """``mssc_patches@<model>``: the dictionary one ``mssc_study.models`` entry learns on the ``patches``
    entry (none when ``patches`` is empty: its rows.json says so); writes its model folder atomically."""
    from priorlab.phases import save_model  # lazy: +19 modules, ~39 ms at import priorlab.studies.mssc_experiments.fit

    study = params.mssc_study
    if model not in study.models:
        raise ParamsError(f"mssc_study has no model {model!r} (models {study.models})")
    check_slice(PATCHES_SLICE, patches_param_slice(params))

    def fill(tmp: Path) -> None:
        patches = []
        if study.patches:
            patch, fitted = patches_run(params, model)
            save_model(tmp / "model.pt", fitted, {"patches": study.patches, "model": model})
            patches.append(patch)
            _report(f"{model} on {study.patches}", patches)
        write_json(tmp / "rows.json", {"patches": [{k: v for k, v in p.items() if k not in DROP} for p in patches]})

    out = cell_dir(model, "patches")
    _write_cell(out, fill)
    return out
