"""Paper 001's experiments on trained factorial mixture prior VAEs (the ``fmvae_experiments`` stage).

* ELBO vs K (sec. 4.1, fig. 3): runs of group ``fmvae_experiments/elbo_vs_k`` (I = 1): the predictive bound
  eq. 11, its reconstruction term, KL[z] and KL[r] against log2 K over seeds, and the paper's
  claims tested on the numbers as measured (ELBO rises then saturates; KL[r] rises and KL[z]
  falls with K).
* Cluster figure (fig. 4): per mixture component, the mean and variance of decoded samples
  z ~ p(z | k) (eq. 10) and a few of them.
* Semi-supervised factors (sec. 4.2, group ``fmvae_experiments/semi_supervised``): held-out accuracy of the
  clamped factor's cluster assignment (from ``evaluate``) and a conditional-generation grid
  iterating the supervised k_0 with the other factors fixed per row.
* Factorial grid (fig. 8, group ``fmvae_experiments/factorial``, I = 2): decoded means over (k_1, k_2).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch
from scipy import stats

from priorlab import paths
from priorlab.studies.claims import Claim, claims_table, fmt, md_table
from priorlab.studies.runs import group_runs, load_trained, evaluation_file
from priorlab.studies.fmvae_experiments.supervised_ceiling import OUT_FILE as CEILING_FILE
from priorlab.studies.criteria import ACCURACY_GOAL, RELATIVE_GOAL, criterion
from priorlab.studies.intervals import Estimate, accuracy, mean_t, paired_difference, ratio, slope
from priorlab.studies.fmvae_experiments.supervised_ceiling import ceiling_for, relative_verdict
from priorlab.io import atomic_path, read_json, save_figure, write_json
from priorlab.plots.images import to_grid

NAME = "fmvae_experiments"  # stage, module and report folder
TITLE, PAPER = "Factorial mixture prior VAE (paper 001)", "001"
GROUPS = {key: f"{NAME}/{key}" for key in ("elbo_vs_k", "semi_supervised", "factorial")}
OUT = paths.experiment_dir(NAME)
SATURATION = 0.25  # "saturates": the last doubling gains at most this share of the total gain (001.elbo_saturates)


# --------------------------------------------------------------------------- ELBO vs K


def elbo_vs_k_frame(results: list[dict[str, Any]]) -> pd.DataFrame:
    """One row per run of the ELBO-vs-K group: K, seed and the eq. 11 terms (nats per test point)."""
    rows = []
    for r in results:
        extra = r.get("model_extras")
        if r.get("group") != GROUPS["elbo_vs_k"] or extra is None or len(extra["num_components"]) != 1:
            continue
        k = extra["num_components"][0]
        rows.append({"run": r["run"], "K": k, "log2K": float(np.log2(k)), "seed": r["seed"],
                     "elbo": r["test"]["elbo"], "log_lik": r["test"]["log_lik"], "kl_z": extra["kl_z"],
                     "kl_r": extra["kl_r"], "kl": r["test"]["kl"], "iw_log_likelihood": r["test"]["iw_log_likelihood"],
                     "components_used": extra["components_used"][0]})
    return pd.DataFrame(rows).sort_values(["K", "seed"]).reset_index(drop=True) if rows else pd.DataFrame()


def elbo_vs_k_summary(frame: pd.DataFrame) -> dict[str, Any]:
    """Seed means per K of the eq. 11 terms (the README's table and the summary JSON)."""
    mean = frame.groupby("K")[["elbo", "log_lik", "kl_z", "kl_r"]].mean()
    return {"K": [int(k) for k in mean.index], "seeds_per_K": [int(v) for v in frame.groupby("K").size()],
            **{f"mean_{c}": [round(float(v), 3) for v in mean[c]] for c in mean.columns}}


def elbo_vs_k_claims(frame: pd.DataFrame) -> list[Claim]:
    """The fig. 3 claims (criteria ``001.elbo_rises``, ``001.elbo_saturates``, ``001.kl_r_rises``,
    ``001.kl_z_falls``), the seed the unit: per seed the largest-K vs K = 1 ELBO difference, the
    last doubling's gain against 25 % of the total gain, and the slopes of KL[r], KL[z] on log2 K."""
    if frame.empty or frame["K"].nunique() < 3:
        return []
    ks = sorted(int(k) for k in frame["K"].unique())
    k1, prev, last = ks[0], ks[-2], ks[-1]
    wide = {c: frame.pivot(index="seed", columns="K", values=c).dropna() for c in ("elbo", "kl_r", "kl_z")}
    e = wide["elbo"]
    seeds = f"{len(e)} seeds"
    gain, last_gain = e[last] - e[k1], e[last] - e[prev]
    claims = [
        criterion("001.elbo_rises").decide([("", paired_difference(e[last], e[k1]))],
                                           f"K {ks}: mean ELBO {fmt(e.mean(), 2)} ({seeds})"),
        criterion("001.elbo_saturates").decide([("", mean_t(last_gain - SATURATION * gain))],
                                               f"last doubling {last_gain.mean():+.2f} of {gain.mean():+.2f} nats "
                                               f"({seeds})"),
    ]
    logk = np.log2(np.asarray(ks, float))
    for key, col in (("001.kl_r_rises", "kl_r"), ("001.kl_z_falls", "kl_z")):
        w = wide[col][ks]
        slopes = [slope(logk, row) for row in w.to_numpy(float)]
        claims.append(criterion(key).decide([("", mean_t(slopes))], f"{col.replace('_', '[')}] {fmt(w.mean(), 2)}; "
                                            f"slopes {fmt(slopes, 2)} per doubling"))
    return claims


def plot_elbo_vs_k(frame: pd.DataFrame, path: str | Path, title: str = "") -> Path:
    """Fig. 3: ELBO, reconstruction term, KL[z], KL[r] against log2 K (seed mean ± std, runs as dots)."""
    fig, axes = plt.subplots(1, 4, figsize=(13, 3))
    for ax, (col, label) in zip(axes, (("elbo", "test ELBO (eq. 11)"), ("log_lik", "E[log p(x|z)]"),
                                       ("kl_z", "KL[z]"), ("kl_r", "KL[r]"))):
        g = frame.groupby("log2K")[col]
        ax.errorbar(g.mean().index, g.mean(), yerr=g.std(ddof=1).fillna(0.0), marker="o", capsize=3)
        ax.scatter(frame["log2K"], frame[col], s=8, color="grey", alpha=0.6)
        ax.set_xlabel("log2 K")
        ax.set_title(label, fontsize=9)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    path = Path(path)
    save_figure(path, fig)
    return path


# --------------------------------------------------------------------------- sampling figures


@torch.no_grad()
def decoded_means(model, components: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Mean of p(x | z) for z ~ p(z | k) (sec. 2.6, eq. 10) at the given components [n, I] (-1 = draw k)."""
    z, _ = model.prior.sample(components.shape[0], generator, components)
    return model.likelihood.mean(model.decode(z.float()))


def top_components(model, factor: int, n: int) -> list[int]:
    """The ``n`` components of ``factor`` with the largest pseudo-counts (the most used ones)."""
    c = model.prior.pseudo_counts()[factor, : model.prior.num_components[factor]]
    return [int(k) for k in torch.argsort(c, descending=True)[:n]]


@torch.no_grad()
def plot_clusters(model, path: str | Path, n_components: int = 6, n_samples: int = 100, n_show: int = 5,
                  seed: int = 0, title: str = "") -> Path:
    """Fig. 4: per component of factor 0 (most used first): mean and variance of ``n_samples``
    decoded samples, then ``n_show`` of them (other factors' k drawn)."""
    g = torch.Generator().manual_seed(seed)
    rows = []
    ks = top_components(model, 0, n_components)
    for k in ks:
        comp = torch.full((n_samples, model.prior.num_factors), -1, dtype=torch.long)
        comp[:, 0] = k
        imgs = decoded_means(model, comp, g)
        var = imgs.var(0, keepdim=True)
        rows.append(torch.cat([imgs.mean(0, keepdim=True), var / var.max().clamp_min(1e-12), imgs[:n_show]]))
    grid = to_grid(torch.cat(rows), nrow=len(ks))
    fig, ax = plt.subplots(figsize=(1.0 * (n_show + 2), 1.0 * len(ks) + 0.4))
    ax.imshow(grid, cmap="gray", vmin=0, vmax=1, interpolation="nearest")
    ax.set_axis_off()
    ax.set_title(f"{title}: components {ks}: mean | variance (scaled) | samples", fontsize=8)
    path = Path(path)
    save_figure(path, fig)
    return path


@torch.no_grad()
def conditional_grid(model, factor: int, rows: int, generator: torch.Generator) -> torch.Tensor:
    """Sec. 4.2 / fig. 6: per row the other factors' (k, z) are drawn once; the columns iterate
    k of ``factor`` over all its components with z_factor ~ p(z | k).  Images [rows * K, C, H, W]."""
    K, D = model.prior.num_components[factor], model.prior.latent_dim
    base, _ = model.prior.sample(rows, generator)  # [rows, I*D]
    comp = torch.full((rows * K, model.prior.num_factors), -1, dtype=torch.long)
    comp[:, factor] = torch.arange(K).repeat(rows)
    z_k, _ = model.prior.sample(rows * K, generator, comp)
    z = base.repeat_interleave(K, 0).clone()
    z[:, factor * D : (factor + 1) * D] = z_k[:, factor * D : (factor + 1) * D]
    return model.likelihood.mean(model.decode(z.float()))


@torch.no_grad()
def factorial_grid(model, n_per_factor: int, n_samples: int, generator: torch.Generator) -> tuple[torch.Tensor, list, list]:
    """Fig. 8: for the ``n_per_factor`` most used k_1 and k_2, the mean over ``n_samples`` decoded
    conditional samples z ~ p(z | k_1, k_2).  Returns (images [n1 * n2, C, H, W], k_1 list, k_2 list)."""
    if model.prior.num_factors != 2:
        raise ValueError(f"the factorial grid needs I = 2 factors, got {model.prior.num_factors}")
    k1s, k2s = top_components(model, 0, n_per_factor), top_components(model, 1, n_per_factor)
    images = []
    for a in k1s:
        for b in k2s:
            comp = torch.tensor([[a, b]]).expand(n_samples, 2)
            images.append(decoded_means(model, comp, generator).mean(0))
    return torch.stack(images), k1s, k2s


def plot_grid(images: torch.Tensor, nrow: int, path: str | Path, title: str) -> Path:
    grid = to_grid(images, nrow=nrow)
    ncol = -(-len(images) // nrow)
    fig, ax = plt.subplots(figsize=(0.7 * ncol + 0.5, 0.7 * nrow + 0.5))
    ax.imshow(grid, cmap="gray", vmin=0, vmax=1, interpolation="nearest")
    ax.set_axis_off()
    ax.set_title(title, fontsize=8)
    path = Path(path)
    save_figure(path, fig)
    return path


# --------------------------------------------------------------------------- the stage


def semi_supervised_claims(semi: dict[str, dict[str, Any]], models: dict[str, str], n_test: int) -> list[Claim]:
    """Sec. 4.2 per semi-supervised model (its runs over seeds): the absolute criterion written first
    (``001.semi_supervised``: mean held-out accuracy, seed spread + test-set binomial) and the
    relative one (``001.semi_supervised_relative``: accuracy / supervised ceiling, untestable when the
    ceiling did not plateau)."""
    by_model: dict[str, list[str]] = {}
    for run in semi:
        by_model.setdefault(models[run], []).append(run)
    claims = []
    for runs in by_model.values():
        r0 = semi[runs[0]]
        subject = f"{r0['supervised_factor']}, {r0['labelled_fraction']:.0%} labels"
        accs = [semi[r]["heldout_accuracy"] for r in runs if semi[r]["heldout_accuracy"] is not None]
        acc = accuracy(accs, n_test)
        runs_text = f"{len(accs)} seeds: {fmt(accs)}"
        claims.append(criterion("001.semi_supervised").decide([("", acc)] if accs else [], runs_text, subject=subject))
        c, plateaued, c_n = r0.get("ceiling"), r0.get("ceiling_plateaued"), r0.get("ceiling_n_test")
        rel = criterion("001.semi_supervised_relative")
        if c is None or not accs:
            claims.append(rel.decide([], f"{runs_text}; no supervised ceiling", subject=subject))
            continue
        ceil = Estimate(c, c, c, 1, "binomial", float(np.sqrt(c * (1 - c) / c_n)))
        failed = "" if plateaued else f"the ceiling {c:.3f} did not plateau (stopped by its step cap)"
        claims.append(rel.decide([("", ratio(acc, ceil))], f"{runs_text}; ceiling {c:.3f} on {c_n} test points",
                                 failed, subject=subject))
    return claims


def semi_supervised_entry(params, name: str, r: dict[str, Any], ceilings: dict[str, Any]) -> dict[str, Any]:
    """Accuracy, both criteria and the supervised ceilings (all resolutions) of a semi-supervised run."""
    extra = r["model_extras"]
    acc, factor = extra.get("heldout_accuracy"), extra.get("supervised_factor")
    found = ceiling_for(ceilings, params.run(name).setup, factor)
    native = found["resolutions"][found["native"]] if found else None
    return {"supervised_factor": factor, "heldout_accuracy": acc, "goal": ACCURACY_GOAL,
            "reached": acc is not None and acc >= ACCURACY_GOAL, "labelled_fraction": r["model_params"]["labelled_fraction"],
            "delta": r["model_params"]["delta"], "ceiling": native["accuracy"] if native else None,
            "ceiling_capped": bool(native and native["stopped"] == "max_steps"),
            "ceiling_plateaued": bool(native and native["stopped"] == "plateau"),
            "ceiling_n_test": native["n_test"] if native else None,
            "ceilings": {res: e["accuracy"] for res, e in found["resolutions"].items()} if found else {},
            **relative_verdict(acc, native["accuracy"] if native else None)}


def semi_supervised_table(semi: dict[str, Any]) -> list[str]:
    """Markdown: per run the accuracy, the ceilings per resolution, the share and both verdicts."""
    res = sorted({k for r in semi.values() for k in r["ceilings"]}, key=int)
    rows = [[f"`{run}`", r["supervised_factor"], f"{r['labelled_fraction']:.0%}", r["heldout_accuracy"],
             *[r["ceilings"].get(k, "–") for k in res], "–" if r["share"] is None else f"{r['share']:.1%}",
             "yes" if r["reached"] else "no", {True: "yes", False: "no", None: "–"}[r["relative_reached"]]]
            for run, r in semi.items()]
    return md_table(["run", "factor", "labels", "held-out accuracy", *[f"ceiling {k}×{k}" for k in res],
                     "share of own ceiling", f"≥ {ACCURACY_GOAL:.0%} (absolute, written first)",
                     f"≥ {RELATIVE_GOAL:.0%} of ceiling (issue 10)"], rows)


def write_fmvae_readme(summary: dict[str, Any], frame: pd.DataFrame, path: Path) -> Path:
    """``reports/fmvae_experiments/README.md``: the claims, the ELBO-vs-K table and the figures."""
    lines = ["# Factorial mixture prior VAE experiments (paper 001)", "",
             f"Generated by the `{NAME}` stage (`priorlab.studies.{NAME}`). "
             "ELBO terms are the predictive bound of eq. 11 in nats per test image.", "",
             "## Paper claims at this profile's scale", "", *(claims_table(summary["claims"]) or ["_none tested._"]), ""]
    if not frame.empty:
        agg = frame.groupby("K").agg(seeds=("seed", "size"), elbo=("elbo", "mean"), elbo_std=("elbo", "std"),
                                     log_lik=("log_lik", "mean"), kl_z=("kl_z", "mean"), kl_r=("kl_r", "mean"),
                                     iw=("iw_log_likelihood", "mean"), used=("components_used", "mean"))
        rows = [[int(k), int(r.seeds), float(r.elbo), float(np.nan_to_num(r.elbo_std)), float(r.log_lik),
                 float(r.kl_z), float(r.kl_r), float(r.iw), float(r.used)] for k, r in agg.iterrows()]
        lines += ["## ELBO vs K (fig. 3)", "",
                  *md_table(["K", "seeds", "ELBO", "ELBO std", "E log p(x|z)", "KL[z]", "KL[r]", "L_k", "components used"],
                            rows), "", "![ELBO vs K](elbo_vs_k.png)", "", "![clusters](clusters.png)", ""]
    if summary.get("semi_supervised"):
        lines += ["## Semi-supervised factors against their supervised ceiling (issue 10)", "",
                  "Ceiling: the run's encoder with a linear softmax head trained on all training labels "
                  "(`supervised_ceiling` stage; rule: " + summary.get("ceiling_rule", "not measured") + "); "
                  "the share is taken of the ceiling at the run's own resolution (MNIST: 28×28).", "",
                  *semi_supervised_table(summary["semi_supervised"]), "",
                  "Both criteria are decided over seeds with their intervals in the claims table above (point "
                  "values per run here).  The absolute one was written first and gives the headline verdict; the "
                  "relative one (issue 10) is untestable against a ceiling that did not plateau.", ""]
    for run in summary.get("semi_supervised", {}):
        lines += [f"## Semi-supervised factor (sec. 4.2): `{run}`", "", f"![conditional grid](conditional_grid_{run}.png)", ""]
    for run, r in summary.get("factorial", {}).items():
        lines += [f"## Factorial grid (fig. 8): `{run}`", "", f"components used per factor: {r['components_used']}", "",
                  f"![factorial grid](factorial_grid_{run}.png)", ""]
    with atomic_path(path, suffix=".md") as tmp:
        tmp.write_text("\n".join(lines))
    return path


def run_fmvae_experiments(params) -> dict[str, Any]:
    """``fmvae_experiments``: tables, claims and figures of paper 001 into ``reports/fmvae_experiments/``
    (``summary.json`` with the title and claims the report gathers)."""
    runs = group_runs(params, *GROUPS.values())
    results = [read_json(evaluation_file(params, name)) for name in runs]
    summary: dict[str, Any] = {"title": TITLE, "paper": PAPER, "runs": sorted(runs)}
    seed = params.evaluate.seed
    OUT.mkdir(parents=True, exist_ok=True)
    frame = elbo_vs_k_frame(results)
    if not frame.empty:
        frame.to_csv(OUT / "elbo_vs_k.csv", index=False)
        summary["elbo_vs_k"] = elbo_vs_k_summary(frame)
        plot_elbo_vs_k(frame, OUT / "elbo_vs_k.png", title=f"ELBO vs K ({params.profile} profile)")
        largest = frame[frame["seed"] == frame["seed"].min()].sort_values("K").iloc[-1]["run"]
        plot_clusters(load_trained(params, largest)[0], OUT / "clusters.png", seed=seed, title=largest)
    semi = {}
    ceilings = read_json(CEILING_FILE) if CEILING_FILE.is_file() else {}
    for r in results:
        name = r["run"]
        if r["group"] == GROUPS["semi_supervised"]:
            semi[name] = semi_supervised_entry(params, name, r, ceilings)
            model, _ = load_trained(params, name)
            imgs = conditional_grid(model, 0, 6, torch.Generator().manual_seed(seed))
            plot_grid(imgs, 6, OUT / f"conditional_grid_{name}.png",
                      f"{name}: columns k_0 = 0..{model.prior.num_components[0] - 1} (supervised), rows: other factors fixed")
        elif r["group"] == GROUPS["factorial"]:
            model, _ = load_trained(params, name)
            n = min(8, *model.prior.num_components)
            imgs, k1s, k2s = factorial_grid(model, n, 50, torch.Generator().manual_seed(seed))
            plot_grid(imgs, n, OUT / f"factorial_grid_{name}.png", f"{name}: rows k_1 {k1s}, columns k_2 {k2s}")
            summary.setdefault("factorial", {})[name] = {"k1": k1s, "k2": k2s,
                                                          "components_used": r["model_extras"]["components_used"]}
    if semi:
        summary["semi_supervised"] = semi
        summary["ceiling_rule"] = ceilings.get("rule", "not measured")
    claims = elbo_vs_k_claims(frame) + semi_supervised_claims(semi, {r: params.run(r).model for r in semi},
                                                             params.evaluate.n_eval)
    summary["claims"] = [c.to_dict() for c in claims]
    write_json(OUT / "summary.json", summary)
    write_fmvae_readme(summary, frame, OUT / "README.md")
    return summary
