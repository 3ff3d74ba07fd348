"""The ``benchmark`` stage: the cells' rows -> ``reports/benchmark/`` (README with a table per setup,
a dot plot per setup, the ELBO-vs-disentanglement trade-off, a summary paragraph generated from the
numbers, ``results.csv``) and ``metrics/benchmark/<setup>/<prior>.json`` (its means, for
``dvc metrics show metrics/benchmark``)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from priorlab import paths
from priorlab.config import Params
from priorlab.io import save_figure, write_json, write_json_folder
from priorlab.studies.benchmark import NAME, TITLE
from priorlab.studies.benchmark import synthetic
from priorlab.studies.benchmark.aggregate import SCORES, estimates, frame, not_run, present, read_rows
from priorlab.studies.benchmark.speed import read_speed, speed_row
from priorlab.studies.claims import md_table
from priorlab.studies.intervals import Estimate, clopper_pearson, mean_t

OUT = paths.REPORTS / NAME
SUMMARY_SCORES = ("elbo", "iw_ll", "mig", "dci_d", "factor_vae", "probe", "contrast")
"""The scores the generated paragraph speaks of (each with a direction)."""
TRADE_OFF_Y = ("mig", "dci_d", "probe", "contrast")
"""The trade-off plot's y axis per setup: the first of these the setup has."""


def digits(value: float) -> int:
    """Decimals that show a score's resolution: 1 for ELBO-sized numbers, 3 for rates."""
    return 1 if abs(value) >= 100 else 2 if abs(value) >= 10 else 3


def cell_text(est: Estimate | None) -> str:
    if est is None:
        return "—"
    return est.text(digits(est.value))


def speed_text(speed: dict[str, Any] | None, table: str, prior: str) -> str:
    """``12.3 (1.05×)``: seconds per 1,000 training steps and the ratio to the VAE row; — unmeasured."""
    row = speed_row(speed, table, prior)
    if row is None:
        return "—"
    ratio = f" ({row['ratio_to_vae']:.2f}×)" if "ratio_to_vae" in row else ""
    return f"{row['s_per_1000_steps']:.1f}{ratio}"


def speed_note(speed: dict[str, Any] | None) -> str:
    if speed is None:
        return ("Training cost: not measured for this profile (`make benchmark-speed` writes "
                "`reports/benchmark_speed/<profile>.json`).")
    return (f"Training cost (s / 1k steps): seconds per 1,000 training steps at the table's batch, and in brackets "
            f"the ratio to the VAE row, measured by `make benchmark-speed` on {speed['machine']} at {speed['threads']} "
            f"thread(s), the priors interleaved over {speed['rounds']} rounds of {speed['steps_per_round']} steps"
            + (f" (as many as fit in {speed['round_s']:g} s for a slower prior, at least one)" if "round_s" in speed else "")
            + " (the ratios are what carries to another machine; the evaluation is not included).")


def setup_table(params: Params, f: pd.DataFrame, est: dict, skipped: dict, setup: str,
                speed: dict[str, Any] | None = None) -> list[str]:
    """A setup's table: a row per prior (its n, every score's mean [95 % interval] and its measured
    training cost), a not-run prior with its reason."""
    g = f[f.setup == setup]
    scores = present(g)
    header = ["prior", "n", *[s.title + (" ↑" if s.better else "") for s in scores], "s / 1k steps"]
    rows = []
    for prior in params.benchmark.priors:
        label = params.benchmark.label(prior)
        if (setup, prior) in skipped:
            rows.append([label, 0, f"not run: {skipped[(setup, prior)]}", *[""] * len(scores)])
            continue
        n = int((g.prior == prior).sum())
        rows.append([label, n, *[cell_text(est.get((setup, prior, s.name))) for s in scores],
                     speed_text(speed, setup, prior)])
    return md_table(header, rows)


LIKELIHOOD_SCORES = ("elbo", "iw_ll")
"""The scores that estimate log p(x): compared only between priors whose ELBO lies below their IW bound."""


def not_bounds(est: dict, setup: str) -> list[str]:
    """The priors of ``setup`` whose mean test ELBO lies above their mean importance-weighted log p(x):
    a lower bound cannot exceed L_k (k >= 1) in expectation, so their ELBO does not bound the log-likelihood
    the others' bound (e.g. VSC's pseudo-input prior is selected by the input itself, eq. 3) and neither
    number is compared with theirs."""
    return [p for (s, p, name), e in est.items() if s == setup and name == "elbo"
            and (s, p, "iw_ll") in est and e.value > est[(s, p, "iw_ll")].value]


def best_and_ties(have: dict[str, Estimate], better: int = 1) -> tuple[str, list[str]]:
    """The prior with the best mean (``better``: +1 highest, -1 lowest) and those whose interval overlaps its
    interval (not separated from it at these n)."""
    best = max(have, key=lambda p: better * have[p].value)
    b = have[best]
    return best, [p for p, e in have.items() if p != best and e.high >= b.low and b.high >= e.low]


def summary_sentences(params: Params, est: dict, setup: str) -> list[str]:
    """Generated from the estimates: per directional score, the prior with the best mean and the priors
    whose interval overlaps its interval (not separated from it at these n), or that none does; the
    likelihood scores without the priors of :func:`not_bounds`, which a sentence names."""
    out = []
    titles = {s.name: s.title for s in SCORES}
    label = params.benchmark.label
    invalid = not_bounds(est, setup)
    if invalid:
        out.append(f"- {', '.join(label(p) for p in invalid)}: the test ELBO lies above the importance-weighted "
                   "log p(x), which a lower bound cannot in expectation, so neither is compared with the other "
                   "priors' below (the table shows both).")
    for score in SUMMARY_SCORES:
        have = {p: e for (s, p, name), e in est.items() if s == setup and name == score
                and not (score in LIKELIHOOD_SCORES and p in invalid)}
        if len(have) < 2:
            continue
        best, ties = best_and_ties(have)
        b = have[best]
        tail = (f"{', '.join(label(p) for p in ties)} {'is' if len(ties) == 1 else 'are'} not separated from it "
                f"(intervals overlap)" if ties else "every other prior's interval lies below it")
        out.append(f"- {titles[score]}: **{label(best)}** has the highest mean, {cell_text(b)}; {tail}.")
    sparse = {p: e for (s, p, name), e in est.items() if s == setup and name == "sparsity"}
    if sparse:
        top = max(sparse, key=lambda p: sparse[p].value)
        out.append(f"- The sparsest codes: **{label(top)}**, {sparse[top].value:.2f} of the coordinates of a code at "
                   f"most {params.benchmark.sparsity_threshold:g} in magnitude per input (least: "
                   f"{label(min(sparse, key=lambda p: sparse[p].value))}, {min(e.value for e in sparse.values()):.2f}).")
    return out


def plot_dots(params: Params, f: pd.DataFrame, setup: str, path: Path) -> Path:
    """One panel per score of the setup: a prior per row, its seeds as dots, their mean as a bar."""
    g = f[f.setup == setup]
    scores = present(g)
    priors = [p for p in params.benchmark.priors if (g.prior == p).any()]
    cols = min(4, len(scores))
    rows = math.ceil(len(scores) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 0.35 * len(priors) * rows + 1.2 * rows), squeeze=False)
    for ax, score in zip(axes.ravel(), scores):
        for i, prior in enumerate(priors):
            v = g.loc[g.prior == prior, score.name].to_numpy(dtype=float)
            ax.scatter(v, np.full(len(v), i), s=14, alpha=0.7)
            if len(v) and not np.isnan(v).all():
                ax.plot([np.nanmean(v)] * 2, [i - 0.3, i + 0.3], color="k", lw=1.5)
        ax.set_yticks(range(len(priors)), [params.benchmark.label(p) for p in priors], fontsize=7)
        ax.set_title(score.title + (" ↑" if score.better else ""), fontsize=8)
        ax.tick_params(axis="x", labelsize=7)
        ax.invert_yaxis()
    for ax in axes.ravel()[len(scores):]:
        ax.axis("off")
    fig.suptitle(f"{setup}: seeds as dots, their mean as a bar", fontsize=9)
    fig.tight_layout()
    save_figure(path, fig)
    return path


def plot_trade_off(params: Params, f: pd.DataFrame, path: Path) -> Path | None:
    """Test ELBO against a disentanglement score (or the probe / contrast where the data have no factors),
    a panel per setup, a colour per prior, seeds as dots."""
    panels = []
    for setup in params.benchmark.setups:
        g = f[f.setup == setup]
        y = next((s for s in TRADE_OFF_Y if s in g and g[s].notna().any()), None)
        if y is not None and g["elbo"].notna().any():
            panels.append((setup, g, y))
    if not panels:
        return None
    titles = {s.name: s.title for s in SCORES}
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.6), squeeze=False)
    for ax, (setup, g, y) in zip(axes[0], panels):
        for prior in params.benchmark.priors:
            h = g[g.prior == prior]
            if len(h):
                ax.scatter(h["elbo"], h[y], s=18, label=params.benchmark.label(prior))
        ax.set_xlabel("test ELBO (nats)")
        ax.set_ylabel(titles[y])
        ax.set_title(setup, fontsize=9)
    axes[0][-1].legend(fontsize=7, loc="best")
    fig.tight_layout()
    save_figure(path, fig)
    return path


def synthetic_section(params: Params, rows: list[dict[str, Any]], speed: dict[str, Any] | None = None) -> list[str]:
    """Paper 003's synthetic data: a table per ρ (a row per prior: its data sets, and each score's mean
    [95 % t interval], the collapse rate with its exact interval), and per ρ a generated sentence on the
    best held-out MSE, DCI and support F1 and which priors overlap the best."""
    bench, study = params.benchmark, params.sparse_vae_study
    t = study.train
    est = synthetic.estimates(rows)
    skipped = {r["prior"]: r["reason"] for r in rows if r["origin"] == "not_run"}
    read = sorted({r["origin"] for r in rows if r["origin"] not in ("trained", "not_run")})
    lines = ["## Paper 003's synthetic data (true factors and support)", "",
             f"Each data set: {study.n} points of 7 features from 2 correlated factors (correlation ρ) through a "
             f"sparse loading, noise std {study.noise_std:g}, a 50/50 split; data set i drawn from seed i, "
             f"{bench.synthetic.datasets_per_rho} per ρ (independent units). Every prior from scratch with "
             f"{study.latent_dim} latents, an MLP of {study.hidden}, a Gaussian likelihood whose variances the "
             f"model fits, {t.steps} steps of batch {t.batch_size} at learning rate {t.lr:g}: paper 003's study's "
             "settings, so a prior it already fits at equal settings is read from its cell"
             + (f" ({', '.join(f'`{o}`' for o in read)})" if read else "") + ". Scores as paper 003's study "
             "scores its models: held-out MSE, DCI D against the true factors, active columns, support F1 of "
             "the decoder masks (models with a support only), collapsed (MSE above 3 or fewer than 2 active "
             "columns). Cells: mean [95 % t interval] over the data sets; collapsed: share [exact interval]. "
             "Means include the collapsed fits (paper 003's claims use medians).", ""]
    for rho in bench.synthetic.rhos:
        rho = float(rho)
        header = ["prior", "n", *[title for _, title, _ in synthetic.TABLE], "s / 1k steps"]
        table = []
        for prior in bench.priors:
            if prior in skipped:
                table.append([bench.label(prior), 0, f"not run: {skipped[prior]}", *[""] * len(synthetic.TABLE)])
                continue
            cells = [est.get((rho, prior, score)) for score, _, _ in synthetic.TABLE]
            n = next((e.n for e in cells if e is not None), 0)
            table.append([bench.label(prior), n, *[cell_text(e) for e in cells], speed_text(speed, "synthetic", prior)])
        lines += [f"### ρ = {rho:g}", "", *md_table(header, table), ""]
        for score, title, better in synthetic.TABLE:
            have = {p: e for (r, p, name), e in est.items() if r == rho and name == score}
            if better == 0 or score == "collapsed" or len(have) < 2:
                continue
            best, ties = best_and_ties(have, better)
            b = have[best]
            tail = (f"{', '.join(bench.label(p) for p in ties)} {'is' if len(ties) == 1 else 'are'} not separated "
                    "from it" if ties else "every other prior is separated from it")
            lines.append(f"- {title.rstrip(' ↑↓')}: **{bench.label(best)}** is best, {cell_text(b)}; {tail}.")
        rates = {p: e for (r, p, name), e in est.items() if r == rho and name == "collapsed"}
        if rates:
            lines.append("- Collapsed fits: " + ", ".join(f"{bench.label(p)} {round(e.value * e.n)}/{e.n}"
                                                          for p, e in rates.items()) + ".")
        lines.append("")
    return lines


def sparse_coding_section(params: Params) -> list[str]:
    """The sparse coding models (fitted by EM, not by the shared trainer) in a table of their own, read
    from paper 000's ``mssc_fit`` / ``mssc_patches`` cells (no refitting): per bars condition, a row per
    model — runs that recover every bar with the exact interval, the mean bars recovered with its t
    interval over the runs (each its own data draw and start: independent), the fitted σ² and π
    (medians) — and the patch dictionaries' shape statistics (one run per model: no interval)."""
    from priorlab.studies.mssc_experiments.aggregate import (
        read_cells, recovery_table)  # lazy: +9 modules, ~25 ms at import priorlab.studies.benchmark.report

    study = params.mssc_study
    rows, patches = read_cells(params)
    recovery = recovery_table(rows)
    lines = ["## Sparse coding: max-rule and linear (paper 000's data)", "",
             "Fitted by sample-based EM, not by the shared trainer, so in a table of their own, read from paper "
             f"000's cells (`mssc_fit@<model>-<bars>`, `mssc_patches@<model>`): {study.iterations} EM iterations, "
             f"a run per seed of `mssc_study.seeds` (each its own data and start). A bar counts as recovered when a "
             f"column's correlation with it is at least {study.threshold:g}. Cells: share [exact interval], mean "
             "[95 % t interval]; σ² and π are medians over the runs. The log joints of the two models are of "
             "different models and are not compared.", ""]
    for bars in study.bars:
        table = []
        for model in study.models:
            e = recovery.get((model, bars))
            if e is None:
                continue
            found = mean_t([float(r["n_recovered"]) for r in rows if r["model"] == model and r["bars"] == bars])
            kind = next(r["kind"] for r in rows if r["model"] == model)
            table.append([model, kind, e["n"], cell_text(clopper_pearson(e["recovered"], e["n"])), found.text(2),
                          f"{e['sigma2']:.4f}", f"{e['pi']:.3f}"])
        variant = next((e["variant"] for (_, b), e in recovery.items() if b == bars), "")
        lines += [f"### {bars} ({variant}; its settings: `datasets.{bars}`)", "",
                  *md_table(["model", "kind", "runs", "every bar recovered ↑", "bars recovered ↑", "σ²", "π"], table), ""]
    if patches:
        lines += [f"### {study.patches} (one run per model)", "",
                  *md_table(["model", "σ²", "π", "energy in top 25 % pixels", "anisotropy"],
                            [[p["model"], f"{p['sigma2']:.4f}", f"{p['pi']:.3f}", f"{p['energy_top25']:.3f}",
                              f"{p['anisotropy']:.3f}"] for p in patches]), ""]
    return lines


def synthetic_metrics(params: Params, rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """``metrics/benchmark/synthetic_rho<ρ>/<prior>.json``: the mean of each synthetic score over the data sets."""
    out: dict[str, dict[str, float]] = {}
    for (rho, prior, name), e in synthetic.estimates(rows).items():
        out.setdefault(f"synthetic_rho{rho:g}/{prior}", {})[name] = round(e.value, 6)
    return out


def write_readme(params: Params, f: pd.DataFrame, rows: list[dict[str, Any]], devices: list[str], out: Path,
                 synthetic_rows: list[dict[str, Any]] | None = None) -> Path:
    bench = params.benchmark
    est = estimates(f)
    skipped = not_run(rows)
    speed = read_speed(params)
    t = bench.train
    lines = [f"# {TITLE}", "",
             f"Profile `{params.profile}`, device {', '.join(devices) or 'none'}. Every prior trained from scratch on "
             f"the same nets per setup, {t.steps} steps of batch {t.batch_size} at learning rate {t.lr:g} (Adam), "
             f"seeds {bench.seeds} (each its own initialisation and batches: independent units); scored on "
             f"{bench.evaluate.n_eval} test points (log p(x) with {bench.evaluate.iw_samples} importance samples), "
             f"the disentanglement metrics on {bench.evaluate.metric_num_train} / {bench.evaluate.metric_num_test} "
             "sampled points. Cells: mean [95 % t interval] over the seeds; ↑ = higher is better. Generated by the "
             "`benchmark` stage from the `benchmark` section of `params/studies.json` (`benchmark_fit@<prior>` cells).", "",
             speed_note(speed), "",
             "## The priors", ""]
    origin = f.groupby("prior")["origin"].agg(lambda o: sum(v != "trained" for v in o)) if len(f) else {}
    prior_rows = []
    for prior, entry in bench.priors.items():
        spec_rows = [r for r in rows if r["prior"] == prior]
        kind = spec_rows[0]["kind"] if spec_rows else ""
        reused = int(origin.get(prior, 0)) if len(f) else 0
        read_syn = sum(r["prior"] == prior and r["origin"].startswith("sparse_vae_fit@") for r in synthetic_rows or [])
        where = [f"{reused} read from paper 004's `isa_fit` cells" if reused else "",
                 f"{read_syn} synthetic read from paper 003's `sparse_vae_fit` cells" if read_syn else ""]
        models = f"`{entry.model}`" + "".join(f"; {where}: `{model}`" for where, model in entry.setup_models.items())
        prior_rows.append([bench.label(prior), models, kind,
                           "" if entry.strength is None else f"{entry.strength:g}",
                           "; ".join(w for w in where if w) + "; the others trained here" if any(where)
                           else "all trained here"])
    lines += md_table(["row", "models entry (another on a setup where its latent layout does not fit)", "kind",
                       "strength (β, TC weight or γ)", "models"], prior_rows)
    lines += ["", "Every entry is used as `params/models.json` defines it, trained from scratch (`warm_start: scratch`): the "
              "factorial mixture prior's GMM initialisation then fits the codes of an untrained encoder (paper 001 "
              "pretrains first), and VSC starts without its spike pre-training (paper 002 pre-trains). The models' own "
              "phase settings (`train_steps`, `train_phase`) are not applied: every prior gets the same steps and "
              "optimiser. A strength is a paper's default, not chosen on any data (no selection: no split is used "
              "to choose).", ""]
    for setup in bench.setups:
        s = next(r["setup_params"] for r in rows if r["setup"] == setup)
        lines += [f"## {setup}", "",
                  f"Data set `{s['dataset']}`, {s['latent_dim']} latents, {s['encoder']} encoder / {s['decoder']} "
                  f"decoder (hidden {s['hidden']}), {s['likelihood']} likelihood.", ""]
        lines += setup_table(params, f, est, skipped, setup, speed)
        if (f.setup == setup).any():
            lines += ["", f"![dots](dots_{setup}.png)", "", "What this shows (generated from the numbers above):", ""]
            lines += summary_sentences(params, est, setup) or ["- fewer than two priors ran here."]
        lines.append("")
    if synthetic_rows:
        lines += synthetic_section(params, synthetic_rows, speed)
    if params.mssc_study.models:
        lines += sparse_coding_section(params)
    if (out / "trade_off.png").is_file():
        lines += ["## The trade-off", "", "Test ELBO against disentanglement (or the probe or contrast where the data "
                  "set has no factors), seeds as dots:", "", "![trade-off](trade_off.png)", ""]
    lines += ["Adding a prior is one entry under `benchmark.priors` (a `models` entry, optionally a strength); "
              "`dvc repro benchmark` trains only its cell.", ""]
    path = out / "README.md"
    path.write_text("\n".join(lines))
    return path


METRIC_SCORES = ("elbo", "iw_ll", "active_dims", "sparsity", "mig", "dci_d", "sap", "modularity", "factor_vae",
                 "beta_vae", "probe", "contrast")
"""The scores of ``metrics/benchmark`` (the README's tables have every score): one screen of
``dvc metrics show metrics/benchmark``, a row per setup and prior."""


def metrics_files(params: Params, f: pd.DataFrame) -> dict[str, dict[str, float]]:
    """``metrics/benchmark/<setup>/<prior>.json``: each score of :data:`METRIC_SCORES` that every seed has,
    as the mean over the seeds."""
    est = estimates(f)
    return {f"{setup}/{prior}": {name: round(e.value, 6) for (s, p, name), e in est.items()
                                 if s == setup and p == prior and name in METRIC_SCORES}
            for setup in params.benchmark.setups for prior in params.benchmark.priors
            if any(s == setup and p == prior for s, p, _ in est)}


def run_benchmark(params: Params, out: Path = OUT) -> dict[str, Any]:
    """``benchmark``: aggregate the ``benchmark_fit`` cells into ``reports/benchmark/`` (``out``) and
    ``metrics/benchmark/``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.png"):
        old.unlink()  # a setup or plot of an earlier grid must not survive
    rows, devices = read_rows(params) if params.benchmark.priors else ([], [])
    syn = synthetic.read_rows(params) if params.benchmark.priors and params.benchmark.synthetic.rhos else []
    f = frame(rows)
    f.to_csv(out / "results.csv", index=False)
    for setup in params.benchmark.setups:
        if (f.setup == setup).any():
            plot_dots(params, f, setup, out / f"dots_{setup}.png")
    if len(f):
        plot_trade_off(params, f, out / "trade_off.png")
    write_readme(params, f, rows, devices, out, syn)
    write_json_folder(paths.METRICS / NAME, {**metrics_files(params, f), **synthetic_metrics(params, syn)})
    summary = {"title": TITLE, "profile": params.profile, "devices": devices, "rows": len(f),
               "synthetic_rows": sum(r["origin"] != "not_run" for r in syn),
               "not_run": [{"setup": s, "prior": p, "reason": r} for (s, p), r in not_run(rows).items()]
               + [{"setup": "synthetic", "prior": r["prior"], "reason": r["reason"]} for r in syn
                  if r["origin"] == "not_run"]}
    write_json(out / "summary.json", summary)
    return summary

