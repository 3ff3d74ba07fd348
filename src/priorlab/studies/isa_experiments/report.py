"""Paper 004's dSprites study (the ``isa_experiments`` stage): MIG vs β for β-VAE, β-TCVAE, ISA-VAE,
ISA-β-TCVAE and FactorVAE (vs γ).  The stage only aggregates: the models are trained and scored by the
``isa_fit`` stages (:mod:`.isa_fit`: one per ``isa_study.models`` entry and seed, every strength of its
grid), whose rows it reads (:func:`read_rows`).

The grid is ``isa_study`` of the params (:class:`~priorlab.config.IsaStudyParams`): every entry of
``isa_study.models`` at every strength of its grid (β of kind ``vae``; the TC weight of kind
``beta_tcvae``, as the paper's ISA-β-TCVAE weights TC with β; γ of kind ``factor_vae``) × seeds,
trained from scratch with ``isa_study.train`` and scored with ``isa_study.evaluate`` (every metric
of the registry: MIG, MIG without the shape factor, DCI, FactorVAE score, β-VAE score, SAP, and the
test reconstruction log-likelihood E_q log p(x|z)).

Figures: MIG vs strength per model (median, min-max over seeds; paper fig. 3), MIG vs
reconstruction (fig. 4), learned ISA exponents sorted per model (fig. 7), and latent-vs-factor
plots of the representative models (A.5's rule: the run closest, in Mahalanobis distance over
(MIG, reconstruction), to the mean of the upper half of MIG scores).  The claim is decided by
:func:`mig_claim` (criterion ``004.isa_mig`` of :mod:`priorlab.studies.criteria`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from priorlab import paths
from priorlab.config import Params
from priorlab.studies.claims import Claim, claims_table, fmt, md_table
from priorlab.studies.criteria import criterion
from priorlab.studies.intervals import welch_difference
from priorlab.errors import UserError
from priorlab.studies.isa_experiments.fit import (SCORES, StudyRun, cell_dir, cell_name, label,  # noqa: F401
                                            study_runs)
from priorlab.io import read_json, save_figure, write_json

NAME = "isa_experiments"  # stage, module and report folder
TITLE, PAPER = "ISA-VAE: Lp-nested prior vs β-VAE, β-TCVAE and FactorVAE on dSprites (paper 004)", "004"
OUT = paths.experiment_dir(NAME)
CLAIM_BETAS = (1.0, 2.0)
CLAIM_SCORE = "chen_mig_no_shape"  # the paper's MIG: Chen et al.'s estimator, dSprites' shape left out
LOW_MIG = 0.1  # the README says plainly when every run stays below this
# --------------------------------------------------------------------------- the claim


def mig_claim(frame: pd.DataFrame, beta_model: str = "β-VAE", isa_model: str = "ISA-VAE",
              betas=CLAIM_BETAS, score: str = CLAIM_SCORE, floor: str = "chen_floor") -> Claim:
    """"At equal β, ISA-VAE reaches higher MIG than β-VAE, most clearly at β ∈ {1, 2}" (sec. 4, fig. 3),
    decided by criterion ``004.isa_mig``: per β the difference of the two models' Chen MIG without shape
    over seeds (Welch); untestable when, at some claim β, neither model's median reaches the measured
    noise floor (the largest permutation floor, column ``floor``, of the runs at that β)."""
    crit = criterion("004.isa_mig")
    sub = frame[frame["label"].isin([beta_model, isa_model]) & frame["strength"].isin(betas)] if len(frame) else frame
    parts, texts, below = [], [], []
    for b in betas:
        at = sub[sub["strength"] == b]
        a = at[at["label"] == isa_model][score].to_numpy(float)
        c = at[at["label"] == beta_model][score].to_numpy(float)
        if not (len(a) and len(c)):
            return crit.decide([], f"no runs of both models at β = {b:g}")
        parts.append((f"β={b:g}", welch_difference(a, c)))
        noise = float(at[floor].max())
        texts.append(f"β={b:g}: ISA {fmt(a)} vs β-VAE {fmt(c)}, noise floor {noise:.3f}")
        if max(np.median(a), np.median(c)) <= noise:
            below.append(f"β={b:g} (medians {np.median(a):.3f}, {np.median(c):.3f} ≤ floor {noise:.3f})")
    failed = f"both medians at or below the noise floor at {', '.join(below)}" if below else ""
    return crit.decide(parts, "; ".join(texts), failed)


def representatives(frame: pd.DataFrame, score: str = CLAIM_SCORE, betas=CLAIM_BETAS) -> pd.DataFrame:
    """A.5's representative run of each model at each claim β (:func:`representative` on ``score``)
    beside the median over seeds: the paper reports the former, the claim decides on all runs."""
    rows = []
    at = frame[frame["strength"].isin(betas) & (frame["kind"] != "factor_vae")]  # β, not FactorVAE's γ
    for (lab, b), f in at.groupby(["label", "strength"], sort=False):
        rep = representative(f, score)
        rows.append({"model": lab, "β / γ": b, "representative run": rep["run"], f"{score} (representative)": rep[score],
                     f"{score} (median)": float(f[score].median()), "runs": len(f)})
    return pd.DataFrame(rows)


def representative(frame: pd.DataFrame, score: str = "mig") -> pd.Series:
    """A.5: the run nearest (Mahalanobis over MIG and reconstruction) to the mean of the runs in the
    upper 50% of MIG (``score``) scores, among the runs of one model (``frame``)."""
    top = frame[frame[score] >= frame[score].median()]
    pts = top[[score, "recon_log_lik"]].to_numpy(float)
    mean, var = pts.mean(0), pts.var(0) + 1e-12
    d = (((pts - mean) ** 2) / var).sum(1)  # diagonal covariance: the paper's "mean and variance"
    return top.iloc[int(np.argmin(d))]


# --------------------------------------------------------------------------- figures


def plot_mig_vs_strength(frame: pd.DataFrame, path: Path, score: str = "mig") -> Path:
    """MIG against β (γ for FactorVAE) per model: median over seeds, min-max band, runs as dots."""
    labels = list(dict.fromkeys(frame["label"]))
    if (frame["kind"] == "factor_vae").any():  # a γ panel beside the β one
        fig, axes = plt.subplots(1, 2, figsize=(10, 3.5), gridspec_kw={"width_ratios": [2, 1]})
        axes[1].set_xlabel("γ")
    else:
        fig, ax0 = plt.subplots(1, 1, figsize=(6.7, 3.5))
        axes = [ax0]
    for lab in labels:
        f = frame[frame["label"] == lab]
        ax = axes[1] if f["kind"].iloc[0] == "factor_vae" else axes[0]
        g = f.groupby("strength")[score]
        line = ax.plot(g.median().index, g.median(), marker="o", label=lab)[0]
        ax.fill_between(g.min().index, g.min(), g.max(), alpha=0.15, color=line.get_color())
        ax.scatter(f["strength"], f[score], s=8, color=line.get_color(), alpha=0.6)
    axes[0].set_xlabel("β")
    for ax in axes:
        ax.set_ylabel(score.replace("_", " "))
        if ax.lines:
            ax.legend(fontsize=8)
    fig.tight_layout()
    save_figure(path, fig)
    return path


def plot_mig_vs_reconstruction(frame: pd.DataFrame, path: Path) -> Path:
    """Every run: MIG against the test reconstruction log-likelihood (paper fig. 4)."""
    fig, ax = plt.subplots(figsize=(5.5, 4))
    for lab in dict.fromkeys(frame["label"]):
        f = frame[frame["label"] == lab]
        ax.scatter(f["recon_log_lik"], f["mig"], s=14, label=lab)
    ax.set_xlabel("E log p(x|z) (test, nats)")
    ax.set_ylabel("MIG")
    ax.legend(fontsize=8)
    fig.tight_layout()
    save_figure(path, fig)
    return path


def plot_factor_responses(row: pd.Series, factor_names, path: Path, max_latents: int = 6) -> Path:
    """A.5: the mean of each latent (rows: the most factor-dependent ones) against each factor's value
    (columns), for one run."""
    resp = [np.asarray(r, dtype=float) for r in row["responses"]]
    spread = np.nansum([np.nanvar(r, axis=1) for r in resp], axis=0)
    latents = np.argsort(-spread)[:max_latents]
    fig, axes = plt.subplots(len(latents), len(resp), figsize=(2.2 * len(resp), 1.3 * len(latents)), squeeze=False)
    for i, d in enumerate(latents):
        for k, r in enumerate(resp):
            axes[i, k].plot(r[d], lw=1)
            axes[i, k].tick_params(labelsize=6)
            if i == 0:
                axes[i, k].set_title(factor_names[k], fontsize=8)
        axes[i, 0].set_ylabel(f"z{d}", fontsize=8)
    fig.suptitle(f"{row['label']} ({row['run']}): mean code vs factor value", fontsize=9)
    fig.tight_layout()
    save_figure(path, fig)
    return path


def plot_exponents(frame: pd.DataFrame, path: Path) -> Path:
    """Histogram of the learned exponents, subspace exponents sorted p_1 < … < p_L per model (fig. 7)."""
    rows = [r for r in frame["exponents"] if r]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    if rows:
        sub = np.sort(np.array([r["p_sub"] for r in rows]), axis=1)
        lo, hi = min(sub.min(), min(r["p0"] for r in rows)), max(sub.max(), max(r["p0"] for r in rows))
        bins = np.linspace(lo - 1e-3, hi + 1e-3, 30)
        for j in range(sub.shape[1]):
            ax.hist(sub[:, j], bins=bins, alpha=0.5, label=f"p_{j + 1} (sorted)")
        ax.hist([r["p0"] for r in rows], bins=bins, histtype="step", color="k", label="p_0")
        ax.legend(fontsize=7)
    ax.set_xlabel("learned exponent")
    ax.set_ylabel("models")
    fig.tight_layout()
    save_figure(path, fig)
    return path


# --------------------------------------------------------------------------- data plots (dvc.yaml `plots:`)

STRENGTH_SCORES = ("chen_mig_no_shape", "mig", "mig_no_shape")  # the scores of the data plots


def strength_tables(frame: pd.DataFrame, scores=STRENGTH_SCORES) -> dict[str, pd.DataFrame]:
    """The data plots of fig. 3 that ``dvc plots diff`` overlays across commits: ``mig_vs_beta.csv``
    (the β grid of kinds ``vae`` and ``beta_tcvae``) and ``mig_vs_gamma.csv`` (the γ grid of kind
    ``factor_vae``), one row per strength, one column ``<score>_<models entry>`` per score and model:
    the median over seeds (as ``mig_vs_beta.png`` and the claim). A grid without runs has no file."""
    tables = {}
    for col, gamma in (("beta", False), ("gamma", True)):
        f = frame[(frame["kind"] == "factor_vae") == gamma]
        if f.empty:
            continue
        models = list(dict.fromkeys(f["model"]))
        med = f.astype({s: float for s in scores}).groupby(["strength", "model"])[list(scores)].median()
        med = med.unstack("model")
        table = pd.DataFrame({f"{s}_{m}": med[s, m] for s in scores for m in models})
        tables[f"mig_vs_{col}.csv"] = table.rename_axis(col).sort_index().reset_index()
    return tables


def write_strength_tables(frame: pd.DataFrame, out: Path) -> list[Path]:
    """Writes :func:`strength_tables` into ``out``; returns the files."""
    written = []
    for name, table in strength_tables(frame).items():
        table.to_csv(out / name, index=False, float_format="%.10g")
        written.append(out / name)
    return written


# --------------------------------------------------------------------------- the stage


RESULT_COLUMNS = ("run", "model", "label", "kind", "strength", "seed", *SCORES)
"""``results.csv``'s columns, in this order whether a row was just trained or read back from its
sorted-key cache after a kill (the same bytes either way)."""


def results_table(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.loc[:, list(RESULT_COLUMNS)]


def study_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    return pd.DataFrame(rows) if rows else pd.DataFrame(columns=["label", "kind", "strength", "seed", "mig"])


def write_report(params: Params, frame: pd.DataFrame, claims: list[Claim], device: str,
                 out: Path = OUT) -> Path:
    study = params.isa_study
    lines = [f"# {TITLE}", "", f"Profile `{params.profile}`, device `{device}`; generated by `stages/{NAME}.py`.", ""]
    if frame.empty:
        lines += ["The study is off in this profile (`isa_study.setup` is empty).", ""]
    else:
        s, mc, reps = params.setup(study.setup), study.mig_chen, representatives(frame)
        lines += [f"Setup `{study.setup}` ({s.encoder}/{s.decoder} nets, hidden {s.hidden}, {s.latent_dim} latents), "
                  f"{study.train.steps} steps of batch {study.train.batch_size} at lr {study.train.lr}, seeds "
                  f"{study.seeds}. The claim's metric is the paper's: Chen et al.'s MIG without shape "
                  f"(`chen_mig_no_shape`) on {mc.n_points} ground-truth points, {mc.n_samples} draws per entropy, "
                  f"with its noise floor (`chen_floor`: the same estimate with the factors permuted against the "
                  f"code, the largest of {mc.permutations} permutation(s) per run). The other metrics (`mig`: "
                  f"histogram MIG, shape included) on {study.evaluate.metric_num_train} / "
                  f"{study.evaluate.metric_num_test} points (DCI backend `{study.evaluate.dci_backend}`). "
                  f"{len(frame)} models (wall times: the stage's log and `reports/bench.json`; outputs carry none, "
                  "so reruns are byte-identical).", "",
                  "## Claims", "", *claims_table([c.to_dict() for c in claims]), "",
                  f"Largest Chen MIG without shape of any run: {frame[CLAIM_SCORE].max():.3f}; largest noise floor: "
                  f"{frame['chen_floor'].max():.3f} (the paper's representative models: MIG 0.14-0.48)."
                  + (" At this scale no model disentangles dSprites, so a verdict here says little about the "
                     "paper's regime; the paper profile runs the claim's core at the paper's settings on a GPU."
                     if frame[CLAIM_SCORE].max() < LOW_MIG else ""), "",
                  "A.5's representative run (of the upper half of the runs by MIG, the one nearest their mean over "
                  "MIG and reconstruction) beside the median over seeds, at the claim's β:", "",
                  *md_table(list(reps.columns), reps.values.tolist()), "",
                  "## Medians over seeds", ""]
        cols = [c for c in [CLAIM_SCORE, "chen_floor", "mig", "mig_no_shape", "dci_d", "factor_vae_score",
                            "beta_vae_score", "sap", "recon_log_lik"] if frame[c].notna().any()]  # scored ones
        med = frame.groupby(["label", "strength"], sort=False)[cols].median().reset_index()
        lines += md_table(["model", "β / γ", *cols], med.values.tolist()) + [""]
        exps = [(r["run"], r["exponents"]) for _, r in frame.iterrows() if r["exponents"]]
        if exps:
            lines += ["## Learned exponents", "", *md_table(["run", "p0", "p_1..p_L"],
                                                             [[n, fmt(e["p0"]), fmt(e["p_sub"])] for n, e in exps]), ""]
        lines += ["Figures: `chen_mig_no_shape_vs_beta.png` (the claim's metric), `mig_vs_beta.png`, "
                  "`mig_no_shape_vs_beta.png`, `mig_vs_reconstruction.png`, "
                  "`exponents.png`, `latents_<model>.png` (the representative run of each model, A.5's rule: "
                  "nearest, in Mahalanobis distance over MIG and reconstruction, to the mean of the upper half of MIG "
                  "scores); every run's scores in `results.csv`; the medians of Chen MIG without shape, MIG and MIG "
                  "without shape per strength in `mig_vs_beta.csv` / `mig_vs_gamma.csv` (data plots of `dvc.yaml`: `dvc plots diff`).",
                  ""]
    path = out / "README.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines))
    return path


def read_rows(params: Params) -> tuple[list[dict[str, Any]], list[str]]:
    """The rows of every run of the grid, in :func:`study_runs` order, from the ``isa_fit`` cells'
    ``rows.json``, and the devices the cells ran on; a ``UserError`` naming the first missing cell."""
    rows: dict[str, dict[str, Any]] = {}
    devices: set[str] = set()
    runs = study_runs(params) if params.isa_study.setup else []
    for run in runs:
        if run.name in rows:
            continue
        path = cell_dir(run.model, run.seed) / "rows.json"
        if not path.is_file():
            raise UserError(f"{path} is missing: stage isa_fit@{cell_name(run.model, run.seed)} has not run "
                            "(dvc repro isa_experiments runs it)")
        cell = read_json(path)
        devices.add(cell["device"])
        rows.update((r["run"], r) for r in cell["rows"])
    missing = [r.name for r in runs if r.name not in rows]
    if missing:
        raise UserError(f"run {missing[0]} is not in its cell's rows.json: rerun isa_fit "
                        f"(dvc repro isa_experiments)")
    return [rows[r.name] for r in runs], sorted(devices)


def run_isa_experiments(params: Params, out: Path = OUT) -> dict[str, Any]:
    """``isa_experiments``: aggregate the ``isa_fit`` cells of the ``isa_study`` grid into
    ``reports/isa_experiments/`` (``out``): the table, the claim, the figures and the README."""
    from priorlab.data.store import ground_truth

    study = params.isa_study
    rows, devices = read_rows(params)
    device = ", ".join(devices) or "none"
    frame = study_frame(rows)
    claims = [mig_claim(frame)] if rows else []
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if rows:
        gt = ground_truth(params.dataset_of(study.setup))
        results_table(frame).to_csv(out / "results.csv", index=False)
        write_strength_tables(frame, out)  # mig_vs_beta.csv, mig_vs_gamma.csv: data plots of dvc.yaml
        plot_mig_vs_strength(frame, out / "chen_mig_no_shape_vs_beta.png", CLAIM_SCORE)
        plot_mig_vs_strength(frame, out / "mig_vs_beta.png")
        plot_mig_vs_strength(frame, out / "mig_no_shape_vs_beta.png", "mig_no_shape")
        plot_mig_vs_reconstruction(frame, out / "mig_vs_reconstruction.png")
        plot_exponents(frame, out / "exponents.png")
        for lab, f in frame.groupby("label", sort=False):
            plot_factor_responses(representative(f, CLAIM_SCORE), list(gt.factor_names), out / f"latents_{f['model'].iloc[0]}.png")
    write_report(params, frame, claims, device, out)
    summary = {"title": TITLE, "paper": PAPER, "claims": [c.to_dict() for c in claims], "device": device,
               "profile": params.profile,
               "representatives": {lab: representative(f, CLAIM_SCORE)["run"] for lab, f in frame.groupby("label")} if rows else {},
               "runs": [{k: v for k, v in r.items() if k not in ("metrics", "responses")} for r in rows],
               "versions": rows[0]["metrics"]["versions"] if rows else {}}
    write_json(out / "summary.json", summary)
    return summary
