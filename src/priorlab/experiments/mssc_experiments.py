"""Paper 000's study (the ``mssc_experiments`` stage): max-rule vs linear spike-and-slab sparse coding
on the bars test and on natural-image patches, trained in this stage.

The grid is ``mssc_study`` of the params (:class:`~priorlab.config.MsscStudyParams`): every
``models`` entry (kinds ``mssc`` / ``linear_ssc``) on every ``bars`` data set entry (occluding and
linearly superposed bars), once per seed: the seed shifts the entry's data seed and seeds the
model (W initialisation, sampler), and the model runs ``iterations`` full-batch EM iterations
(:class:`~priorlab.models.mssc.SparseCodingModel.train_step`).  In-process, not as ``runs:``
entries: a bars model trains in seconds, while four per-run DVC stages per model would spend
several seconds each on process start-up and imports; joblib runs the models on ``n_jobs``
processes (every model is seeded on its own, so the rows equal the serial ones).

Measured per model: bars recovery (:func:`~priorlab.data.bars.bars_recovery`, Hungarian matching,
correlation ≥ ``threshold``), active latents per training point (latents non-zero in the posterior
samples at T = 1, averaged over samples) against the true number of bars.  Figures: learned W vs
the true bars, the recovery table (README), inferred vs true sparsity, patch dictionaries of both
models.  The claim is decided by :func:`recovery_claim`, whose criterion was fixed before any
number existed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import torch

from priorlab import paths
from priorlab.config import BarsParams, ImagePatchesParams, ModelParams, Params, SetupParams
from priorlab.experiments.claims import Claim, claims_table, md_table
from priorlab.io import save_figure, write_json

NAME = "mssc_experiments"  # stage, module and report folder
TITLE, PAPER = "Max-rule vs linear spike-and-slab sparse coding: bars test and image patches (paper 000)", "000"
OUT = paths.experiment_dir(NAME)
CLAIM_RATE = 0.9  # the goal: max rule recovers all bars in ≥ 90 % of runs on occluding bars
LABELS = {"mssc": "max rule", "linear_ssc": "linear"}


def in_memory(name: str, arrays: dict[str, np.ndarray]):
    """A :class:`~priorlab.data.store.Dataset` of freshly built vector arrays (no store round trip)."""
    from priorlab.data.store import Dataset

    return Dataset(name=name, arrays=arrays, manifest={"observation_kind": "vector"})


def train_em(spec: ModelParams, data, latent_dim: int, iterations: int, seed: int):
    """A sparse-coding model of ``spec`` with ``latent_dim`` latents, seeded with ``seed``, after
    ``iterations`` full-batch EM steps on the training rows of ``data``; returns (model, last logs)."""
    from priorlab.models import build_model
    from priorlab.models.protocol import StepContext

    torch.manual_seed(seed)
    model = build_model(SetupParams(dataset=data.name, latent_dim=latent_dim), spec, data.obs_shape)
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


def bars_run(params: Params, bars: str, model: str, seed: int) -> dict[str, Any]:
    """Train ``model`` on data set entry ``bars`` with its seed shifted by ``seed``; score recovery."""
    with one_thread():
        return _bars_run(params, bars, model, seed)


def _bars_run(params: Params, bars: str, model: str, seed: int) -> dict[str, Any]:
    from priorlab.data.bars import bar_matrix, bars_recovery
    from priorlab.data.store import build_arrays

    t0, c0 = time.perf_counter(), time.process_time()
    dp: BarsParams = params.datasets[bars]
    arrays = build_arrays(dataclasses.replace(dp, seed=dp.seed + seed))
    data = in_memory(bars, arrays)
    W_true = bar_matrix(dp.R)
    m, logs = train_em(params.models[model], data, W_true.shape[1], params.mssc_study.iterations, seed)
    rec = bars_recovery(m.W.numpy(), W_true, params.mssc_study.threshold)
    samples = m.posterior_samples(data.prepare(data.x("train")))
    active = (samples != 0).sum(-1).double().mean(1).numpy()
    true_active = (arrays["sources_train"] != 0).sum(1)
    return {"bars": bars, "variant": dp.variant, "model": model, "kind": params.models[model].kind, "seed": seed,
            "recovered": rec["recovered"], "n_recovered": rec["n_recovered"],
            "min_correlation": float(rec["correlations"].min()), "sigma2": float(m.sigma2), "pi": float(m.pi),
            "log_joint": logs["log_joint"], "W": m.W.numpy().tolist(), "assignment": rec["assignment"].tolist(),
            "sparsity": sparsity_by_count(true_active, active), "train_s": time.perf_counter() - t0,
            "cpu_s": time.process_time() - c0}


def sparsity_by_count(true_active: np.ndarray, inferred: np.ndarray) -> dict[str, float]:
    """Mean inferred active latents per point, grouped by the true number of bars (as string keys)."""
    return {str(int(k)): float(inferred[true_active == k].mean()) for k in np.unique(true_active)}


def recovery_table(rows: list[dict]) -> dict[tuple[str, str], dict[str, float]]:
    """(model, variant) → recovery rate, runs, mean bars recovered."""
    out: dict[tuple[str, str], dict[str, float]] = {}
    for r in rows:
        out.setdefault((r["model"], r["variant"]), {"n": 0, "recovered": 0, "bars": 0.0})
        e = out[(r["model"], r["variant"])]
        e["n"] += 1
        e["recovered"] += int(r["recovered"])
        e["bars"] += r["n_recovered"]
    for e in out.values():
        e["rate"], e["mean_bars"] = e["recovered"] / e["n"], e["bars"] / e["n"]
    return out


def recovery_claim(rows: list[dict], kinds: dict[str, str]) -> Claim:
    """Criterion (fixed before any number existed): on occluding bars, the max-rule model's
    recovery rate (all bars matched at the threshold) is ≥ 90 % and higher than the linear model's."""
    crit = f"occluding bars: max-rule recovery rate ≥ {CLAIM_RATE:.0%} and > the linear model's rate"
    table = recovery_table(rows)
    rate = {kinds[m]: e["rate"] for (m, v), e in table.items() if v == "occlusion"}
    n = {kinds[m]: e["n"] for (m, v), e in table.items() if v == "occlusion"}
    claim = "the max-rule model recovers the occluding bars (and the linear model does worse)"
    if "mssc" not in rate or "linear_ssc" not in rate:
        return Claim(f"{PAPER} bars test", claim, crit, "max-rule or linear runs on occluding bars missing", None)
    measured = (f"max rule {rate['mssc']:.0%} of {n['mssc']} runs, linear {rate['linear_ssc']:.0%} "
                f"of {n['linear_ssc']} runs")
    ok = rate["mssc"] >= CLAIM_RATE and rate["mssc"] > rate["linear_ssc"]
    return Claim(f"{PAPER} bars test", claim, crit, measured, bool(ok))


# --------------------------------------------------------------------------- figures


def _tiles(ax_row, fields: np.ndarray, shape: tuple[int, int], title: str | None = None) -> None:
    vmax = float(np.abs(fields).max()) or 1.0
    for ax, f in zip(ax_row, fields):
        ax.imshow(f.reshape(shape), cmap="RdBu_r" if f.min() < 0 else "gray", vmin=-vmax if f.min() < 0 else 0,
                  vmax=vmax)
        ax.set_xticks([]), ax.set_yticks([])
    if title:
        ax_row[0].set_ylabel(title, fontsize=7, rotation=0, ha="right", va="center")


def plot_bars_w(rows: list[dict], R: int, path: Path) -> None:
    """True bars, then for every (model, variant) the learned W of its first seed, matched to the bars."""
    from priorlab.data.bars import bar_matrix

    W_true = bar_matrix(R)
    firsts = {}
    for r in rows:
        firsts.setdefault((r["model"], r["variant"]), r)
    fig, axes = plt.subplots(1 + len(firsts), W_true.shape[1], figsize=(W_true.shape[1] * 0.8, (1 + len(firsts)) * 0.9))
    axes = np.atleast_2d(axes)
    _tiles(axes[0], W_true.T, (R, R), "truth")
    for row, ((m, v), r) in zip(axes[1:], firsts.items()):
        W = np.asarray(r["W"])[:, r["assignment"]].T
        _tiles(row, W, (R, R), f"{m}\n{v} bars\nseed {r['seed']}: {r['n_recovered']}/{W_true.shape[1]}")
    fig.suptitle("learned W (columns matched to the true bars) vs ground truth", fontsize=8)
    save_figure(path, fig)


def plot_sparsity(rows: list[dict], path: Path) -> None:
    """Inferred active latents per data point vs the true number of bars (mean over seeds)."""
    fig, axes = plt.subplots(1, 2, figsize=(8, 3.2), sharey=True)
    variants = sorted({r["variant"] for r in rows})
    for ax, v in zip(np.atleast_1d(axes), variants):
        for m in dict.fromkeys(r["model"] for r in rows):
            sel = [r["sparsity"] for r in rows if r["model"] == m and r["variant"] == v]
            ks = sorted({int(k) for s in sel for k in s})
            ax.plot(ks, [np.mean([s[str(k)] for s in sel if str(k) in s]) for k in ks], "o-", label=m)
        top = max(int(k) for r in rows for k in r["sparsity"])
        ax.plot([0, top], [0, top], "k:", lw=0.8, label="inferred = true")
        ax.set_title(f"{v} bars", fontsize=9), ax.set_xlabel("true number of bars")
    np.atleast_1d(axes)[0].set_ylabel("inferred active latents"), np.atleast_1d(axes)[0].legend(fontsize=7)
    save_figure(path, fig)


def plot_dictionaries(dicts: dict[str, np.ndarray], patch_size: int, path: Path) -> None:
    """Learned fields of each model on the patches (ON − OFF as a P x P image), by usage order."""
    from priorlab.data.patches import on_off_to_image

    H = max(W.shape[1] for W in dicts.values())
    cols = min(H, 16)
    rows_per = -(-H // cols)
    fig, axes = plt.subplots(rows_per * len(dicts), cols, figsize=(cols * 0.6, rows_per * len(dicts) * 0.7))
    axes = np.atleast_2d(axes)
    for i, (m, W) in enumerate(dicts.items()):
        imgs = on_off_to_image(W.T, patch_size)
        for j in range(rows_per * cols):
            ax = axes[i * rows_per + j // cols, j % cols]
            ax.set_xticks([]), ax.set_yticks([])
            if j < len(imgs):
                v = float(np.abs(imgs[j]).max()) or 1.0
                ax.imshow(imgs[j], cmap="RdBu_r", vmin=-v, vmax=v)
        axes[i * rows_per, 0].set_ylabel(m, fontsize=7, rotation=0, ha="right", va="center")
    fig.suptitle("fields W_h on DoG-filtered patches (ON − OFF); red = ON", fontsize=8)
    save_figure(path, fig)


def field_stats(W: np.ndarray, patch_size: int) -> dict[str, float]:
    """Crude shape statistics of fields (ON − OFF images), means over fields: the share of a field's
    energy in its 25 % strongest pixels (localisation) and the anisotropy ``1 - λ_min/λ_max`` of the
    energy's second moments (0 = round / globular, 1 = elongated / edge-like)."""
    from priorlab.data.patches import on_off_to_image

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


def patches_run(params: Params, model: str) -> dict[str, Any]:
    """Dictionaries learned on natural-image patches (one torch thread, restored after)."""
    with one_thread():
        return _patches_run(params, model)


def _patches_run(params: Params, model: str) -> dict[str, Any]:
    from priorlab.data.store import build_arrays

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
            "train_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0}


# --------------------------------------------------------------------------- stage


def run_all(jobs: list, n_jobs: int) -> list:
    """``fn(*args)`` for every ``(fn, args)`` of ``jobs`` on ``n_jobs`` processes, results in order."""
    if n_jobs == 1:
        return [fn(*args) for fn, args in jobs]
    from joblib import Parallel, delayed

    return Parallel(n_jobs=n_jobs)(delayed(fn)(*args) for fn, args in jobs)


def write_report(params: Params, rows: list[dict], patches: list[dict], claims: list[Claim],
                 out: Path) -> None:
    study = params.mssc_study
    if not study.bars:
        (out / "README.md").write_text(f"# {TITLE}\n\nProfile `{params.profile}`: the study is off "
                                       "(`mssc_study.bars` is empty).\n")
        return
    lines = [f"# {TITLE}", "", f"Profile `{params.profile}`, {len(study.seeds)} seeds per cell, "
             f"{study.iterations} full-batch EM iterations per model ({study.n_jobs} processes, one thread each; "
             "wall times in the stage's log and `reports/bench.json`).", ""]
    for name in study.bars:
        d = params.datasets[name]
        lines.append(f"- data `{name}`: {d.variant} bars, R = {d.R}, N = {d.n_train}, slab N({d.slab_mu}, "
                     f"{d.slab_std}²), noise std {d.noise_std}")
    for name in study.models:
        lines.append(f"- model `{name}`: `{params.models[name]}`")
    table = recovery_table(rows)
    lines += ["", "## Bars recovery", "", f"All 2R bars matched one-to-one with correlation ≥ {study.threshold}.", ""]
    lines += md_table(["model", "variant", "runs", "recovery rate", "mean bars recovered"],
                      [[m, v, e["n"], f"{e['rate']:.0%}", e["bars"] / e["n"]] for (m, v), e in table.items()])
    lines += ["", "![learned W](bars_w.png)", "", "## Inferred sparsity", "",
              "![sparsity](sparsity.png)", ""]
    if patches:
        dp = params.datasets[study.patches]
        lines += ["## Natural-image patches", "",
                  f"`{study.patches}`: {dp.n_train} patches {dp.patch_size}x{dp.patch_size}, preprocessing "
                  f"`{dp.preprocess}` (see `priorlab.data.patches`), H = {study.patch_latents}, "
                  f"{study.patch_iterations} EM iterations.", ""]
        lines += md_table(["model", "σ²", "π", "energy in top 25 % pixels", "anisotropy"],
                          [[p["model"], p["sigma2"], p["pi"], p["energy_top25"], p["anisotropy"]] for p in patches])
        lines += ["", "Energy share ~0.25 = spread over the patch (globular/noisy); near 1 = localised. "
                  "Anisotropy 0 = round, 1 = elongated (edge-like). Judge the shapes from the figure.", "",
                  "![dictionaries](dictionaries.png)", ""]
    lines += ["## Claims", ""] + claims_table([c.to_dict() for c in claims])
    (out / "README.md").write_text("\n".join(lines) + "\n")


def run_mssc_experiments(params: Params, out: Path = OUT) -> dict[str, Any]:
    """``mssc_experiments``: train and score the ``mssc_study`` grid; write ``reports/mssc_experiments/`` (``out``)."""
    t0 = time.perf_counter()
    study = params.mssc_study
    jobs = [(bars_run, (params, b, m, s)) for b in study.bars for m in study.models for s in study.seeds]
    if study.bars and study.patches:
        jobs += [(patches_run, (params, m)) for m in study.models]
    results = run_all(jobs, study.n_jobs)
    rows = [r for r in results if "bars" in r]
    patches = [r for r in results if "bars" not in r]
    kinds = {m: params.models[m].kind for m in study.models}
    claims = [recovery_claim(rows, kinds)] if rows else []
    wall = time.perf_counter() - t0
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if rows:
        plot_bars_w(rows, params.datasets[study.bars[0]].R, out / "bars_w.png")
        plot_sparsity(rows, out / "sparsity.png")
    if patches:
        plot_dictionaries({p["model"]: np.asarray(p["W"]) for p in patches},
                          params.datasets[study.patches].patch_size, out / "dictionaries.png")
    print(f"{NAME}: {wall:.0f} s wall, {sum(r['cpu_s'] for r in results):.0f} CPU s in the model fits", flush=True)
    write_report(params, rows, patches, claims, out)
    table = recovery_table(rows)
    summary = {"title": TITLE, "paper": PAPER, "claims": [c.to_dict() for c in claims], "profile": params.profile,
               "n_jobs": study.n_jobs,
               "recovery": [{"model": m, "variant": v, **e} for (m, v), e in table.items()],
               "runs": [{k: v for k, v in r.items() if k not in ("W", "train_s", "cpu_s")} for r in rows],
               "patches": [{k: v for k, v in p.items() if k not in ("W", "train_s", "cpu_s")} for p in patches]}
    write_json(out / "summary.json", summary)
    return summary
