"""Paper 002's report: the Smiley correlation figures (fig. 3, 9), ELBO vs prior strength (fig. 1), spike
activation per class and conditional generation (fig. 5-7), ``README.md`` and ``summary.json``, and the
``vsc_experiments`` stage entry :func:`run_vsc_experiments` (aggregate -> claims -> report)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from priorlab import paths
from priorlab.config import Params
from priorlab.studies.claims import claims_table, link_diagnosis, md_table
from priorlab.io import atomic_path, save_figure, write_json
from priorlab.studies.runs import group_runs
from priorlab.studies.vsc_experiments import NAME, PAPER, TITLE
from priorlab.studies.vsc_experiments.aggregate import (DIAGNOSIS_GROUP, VALIDATION_SIZE, elbo_rows, elbo_table,
                                                        fashion_replicates, smiley_results, write_elbo_data_plots)
from priorlab.studies.vsc_experiments.claims import vsc_claims
from priorlab.studies.vsc_experiments.diagnosis import diagnosed, diagnosis_markdown
from priorlab.studies.vsc_experiments.scores import conditional_samples, spike_statistics

OUT_DIR = paths.experiment_dir(NAME)
FASHION_CLASSES = ("T-shirt", "trouser", "pullover", "dress", "coat", "sandal", "shirt", "sneaker", "bag", "boot")


def smiley_experiment(params: Params, out: Path, test_sets: dict[str, tuple] | None = None
                      ) -> tuple[list[str], dict]:
    """Fig. 3 / 9: correlation matrices and scores of every ``vsc_experiments/smiley`` run on the fresh
    test split and on each of ``test_sets`` (name -> (images, presence, sources), e.g. the authors'
    published set, :func:`priorlab.data.smiley.load_smiley_mat`; the stage passes none)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    test_sets = dict(test_sets or {})
    results, chosen_model, first_seed = smiley_results(params, test_sets)
    if not results:
        return [], {}
    ev = params.evaluate
    chosen = {d: next(run for run, r in results.items() if r["latent_dim"] == d and r["model"] == m)
              for d, m in chosen_model.items()}
    lines = ["## Smiley disentanglement (paper 002, fig. 3 and 9)", ""]
    spike_rows = [[run, r["latent_dim"], r["spikes"]["active_per_input"], r["spikes"]["always_active_dims"],
                   r["spikes"]["input_dependent_dims"], r["spikes"]["undecided_fraction"]]
                  for run, r in results.items() if "spikes" in r]
    if spike_rows:
        lines += ["VSC spikes on the fresh test split:", "",
                  *md_table(["run", "d", "active dims per image", "always active", "input-dependent (std > 0.1)",
                             "share of γ in (0.05, 0.95)"], spike_rows), ""]
    lines += [f"β-VAE β chosen per latent size by the best mean correlation contrast over seeds on a validation set "
              f"of {VALIDATION_SIZE} fresh smileys (paper D.2; not the test set): "
              + ", ".join(f"d={d}: {results[r]['label']}" for d, r in sorted(chosen.items())), ""]
    for name in ("fresh", *test_sets):
        lines += [f"### Test set: {name}", ""]
        dci = "dci" in ev.presence_aware()
        lines += [f"Presence-aware DCI (22 classifiers per model; no claim uses it) is computed on the fresh split "
                  f"for the runs of seed {first_seed} only (nan elsewhere)." if dci else
                  "Presence-aware DCI (22 classifiers per model; no claim uses it) is not computed at this profile "
                  "(`evaluate.presence_metrics`).", ""]
        rows = []
        for run, r in results.items():
            s = r[name]
            rows.append([run, r["label"], r["latent_dim"], s["contrast"], s["block_purity"], s["used_latents"],
                         s["active_dims"], s["mig"], *([s["dci"]["disentanglement"], s["dci"]["completeness"],
                                                        s["dci"]["informativeness_test"]] if dci else [])])
        lines += md_table(["run", "model", "d", "contrast", "block purity", "used latents", "active dims",
                            "PA-MIG", *(["PA-DCI D", "PA-DCI C", "PA-DCI I"] if dci else [])], rows) + [""]
        shown = [r for r in results if results[r]["seed"] == min(x["seed"] for x in results.values())
                 and (params.models[results[r]["model"]].kind != "vae" or results[r]["model"] in chosen_model.values())]
        dims = sorted({results[r]["latent_dim"] for r in shown})
        kinds = sorted({results[r]["label"].split(" ")[0] for r in shown})
        fig, axes = plt.subplots(len(kinds), len(dims), figsize=(4.5 * len(dims), 2.8 * len(kinds)), squeeze=False)
        for ax in axes.flat:
            ax.axis("off")
        for run in shown:
            r = results[run]
            ax = axes[kinds.index(r["label"].split(" ")[0]), dims.index(r["latent_dim"])]
            ax.axis("on")
            ax.imshow(r[name]["ordered"], cmap="gray", vmin=0, vmax=1, aspect="auto", interpolation="nearest")
            ax.set_title(f"{r['label']}, d={r['latent_dim']} (contrast {r[name]['contrast']:.2f})", fontsize=8)
            ax.set_xlabel("latent (ordered)", fontsize=7)
            ax.set_ylabel("source", fontsize=7)
        save_figure(out / f"smiley_correlation_{name}.png", fig)
        lines += [f"![correlation matrices, {name}](smiley_correlation_{name}.png)", ""]
    return lines, {"runs": run_summaries(results, ("fresh", *test_sets)),
                   "chosen_beta_vae": {str(d): m for d, m in chosen_model.items()}}


def run_summaries(results: dict[str, dict], sets: tuple[str, ...]) -> dict[str, dict]:
    """Per run its labels, spikes and scores per test set (the correlation matrix rounded; no figures)."""
    summary: dict[str, dict] = {}
    for run, r in results.items():
        summary[run] = {k: v for k, v in r.items() if not isinstance(v, dict)}
        if "spikes" in r:
            summary[run]["spikes"] = r["spikes"]
        for name in sets:
            s = r[name]
            summary[run][name] = {k: v for k, v in s.items() if k not in ("corr", "ordered")}
            summary[run][name]["corr"] = np.round(s["corr"], 4).tolist()
    return summary


def diagnosis_settings(params: Params, runs: dict[str, dict]) -> dict[str, Any]:
    """What the diagnosis compares with the paper: per family (the first VSC and β-VAE run of the Smiley
    group) the steps it runs (pre-training and joint, from the model's phases), batch, width, likelihood;
    and the joint steps of the diagnosis arm's runs."""
    def of(run: str) -> dict[str, Any]:
        spec = params.run(run)
        setup, model = params.setup(spec.setup), params.models[spec.model]
        pre = params.models[setup.pretrain_model].phase("pretrain", params.pretrain)
        joint = model.phase("train", params.train)
        return {"pretrain_steps": pre.steps, "train_steps": joint.steps, "batch_size": joint.batch_size,
                "hidden": setup.hidden, "likelihood": setup.likelihood,
                "warmup_ramp_steps": getattr(model, "warmup_ramp_steps", 0)}

    first = {fam: next((run for run, r in runs.items() if r["label"].split(" ")[0] == fam), None)
             for fam in ("VSC", "β-VAE")}
    arm = group_runs(params, DIAGNOSIS_GROUP)
    return {"vsc": of(first["VSC"]), "beta_vae": of(first["β-VAE"]),
            "arm_train_steps": params.models[params.run(arm[0]).model].phase("train", params.train).steps if arm else 0}


def elbo_experiment(params: Params, out: Path) -> tuple[list[str], dict]:
    """Fig. 1: test ELBO (mean ± std over seeds) against α (VSC) and β (β-VAE)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    table = elbo_table(params)
    if not table:
        return [], {}
    rows, data = elbo_rows(table)
    write_elbo_data_plots(out, data)
    fig, axes = plt.subplots(1, 2, figsize=(8, 3))
    for ax, (kind, xlabel) in zip(axes, (("VSC", "prior spike probability α"), ("β-VAE", "β"))):
        pts = sorted(data.get(kind, []))
        if pts:
            v, m, s = map(np.asarray, zip(*pts))
            ax.errorbar(v, m, yerr=np.nan_to_num(s), marker="o", capsize=3)
            ax.set_xscale("log")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("test ELBO (nats)")
        ax.set_title(kind)
    save_figure(out / "elbo_vs_prior_strength.png", fig)
    lines = ["## ELBO vs prior strength (paper 002, fig. 1; Fashion-MNIST)", "",
             "Test ELBO = E log p(x|z) − KL (the sparsity term of eq. 4 excluded), nats per image.", ""]
    lines += md_table(["model", "α or β", "seeds", "ELBO mean", "ELBO std"], rows)
    lines += ["", "![ELBO vs prior strength](elbo_vs_prior_strength.png) "
                  "(data: `elbo_vs_alpha.csv`, `elbo_vs_beta.csv`)", ""]
    return lines, {"rows": [{**dict(zip(("model", "value", "seeds", "mean", "std"), r)), "elbos": table[(r[0], r[1])]}
                            for r in rows]}


def fashion_experiment(params: Params, out: Path) -> tuple[list[str], dict]:
    """Fig. 5-7 from the ``vsc_experiments/elbo`` VSC run with the smallest α (paper D.3: α = 0.01)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from priorlab.plots.images import (  # lazy: matplotlib, ~547 ms at import priorlab.studies.vsc_experiments.report
        to_grid)

    run, replicates, fitted = fashion_replicates(params)
    if run is None:
        return [], {}
    model, data, gamma, act, sim = fitted[run]
    labels = data.labels("test")
    x = data.prepare(data.x("test"))
    spikes = spike_statistics(gamma)
    order = np.argsort(-act.mean(0))
    fig, ax = plt.subplots(figsize=(8, 2.6))
    ax.imshow(act[:, order], cmap="gray", vmin=0, vmax=1, aspect="auto", interpolation="nearest")
    ax.set_yticks(range(10), FASHION_CLASSES, fontsize=7)
    ax.set_xlabel("latent (by mean activation)")
    ax.set_title(f"{run}: mean spike probability per class")
    save_figure(out / "spike_per_class.png", fig)
    # fig. 6: conditional generation from one test image per class
    g = torch.Generator().manual_seed(params.evaluate.seed)
    tiles, n_active = [], []
    for c in range(10):
        idx = int(np.flatnonzero(labels == c)[0]) if np.any(labels == c) else 0
        samples, active = conditional_samples(model, x[idx : idx + 1], 7, g)
        tiles += [x[idx : idx + 1], samples]
        n_active.append(int(active.sum()))
    fig, ax = plt.subplots(figsize=(5, 7))
    ax.imshow(to_grid(torch.cat(tiles), nrow=10), cmap="gray", vmin=0, vmax=1)
    ax.axis("off")
    ax.set_title("input | 7 samples along its active dims", fontsize=8)
    save_figure(out / "conditional_generation.png", fig)
    # fig. 7: T-shirt vs shirt: shared and exclusive active dims
    feature_lines = []
    if np.any(labels == 0) and np.any(labels == 6):
        i0, i6 = int(np.flatnonzero(labels == 0)[0]), int(np.flatnonzero(labels == 6)[0])
        q = model.posterior(x[[i0, i6]]).base_dist
        act0, act6 = q.gamma[0] > 0.5, q.gamma[1] > 0.5
        shared = torch.nonzero(act0 & act6).flatten()[:2].tolist()
        only6 = torch.nonzero(act6 & ~act0).flatten()[:2].tolist()
        z0 = model.represent(x[[i0]])[0]
        z6 = model.represent(x[[i6]])[0]
        rows = []
        for d in shared:  # alter a shared dimension of the T-shirt's code
            zs = z0.repeat(7, 1)
            zs[:, d] = torch.linspace(-2.5, 2.5, 7)
            rows.append(model.likelihood.mean(model.decode(zs)))
        for d in only6:  # activate a shirt-only dimension in the T-shirt's code
            zs = z0.repeat(7, 1)
            zs[:, d] = torch.linspace(0, 1, 7) * z6[d] * 2
            rows.append(model.likelihood.mean(model.decode(zs)))
        if rows:
            fig, ax = plt.subplots(figsize=(5, 0.9 * len(rows) + 0.5))
            ax.imshow(to_grid(torch.cat(rows), nrow=len(rows)), cmap="gray", vmin=0, vmax=1)
            ax.axis("off")
            ax.set_title(f"T-shirt code: shared dims {shared} altered; shirt-only dims {only6} switched on", fontsize=7)
            save_figure(out / "feature_comparison.png", fig)
            feature_lines = ["![feature comparison](feature_comparison.png)", ""]
        counts = {"tshirt_active": int(act0.sum()), "shirt_active": int(act6.sum()), "shared": int((act0 & act6).sum())}
    else:
        counts = {}
    lines = [f"## Spike activation per class and conditional generation (paper 002, fig. 5-7; `{run}`)", "",
             "![mean spike probability per class](spike_per_class.png)", "",
             f"Cosine similarity of class activation patterns: T-shirt/shirt {sim[0, 6]:.3f}, "
             f"T-shirt/trouser {sim[0, 1]:.3f}, sneaker/boot {sim[7, 9]:.3f}, trouser/bag {sim[1, 8]:.3f}. "
             f"Active dims (γ > 0.5) of the conditioning images: {n_active}.", "",
             f"Spikes on the test set: {spikes['active_per_input']:.1f} active dims per image on average, "
             f"{spikes['always_active_dims']} dims active for every image, {spikes['input_dependent_dims']} dims "
             f"whose γ varies over images (std > 0.1), {spikes['undecided_fraction']:.1%} of γ in (0.05, 0.95).", "",
             "![conditional generation](conditional_generation.png)", "", *feature_lines]
    return lines, {"run": run, "replicates": replicates, "class_activation": np.round(act, 4).tolist(),
                   "similarity": np.round(sim, 4).tolist(),
                   "active_dims_conditioning": n_active, "tshirt_shirt": counts, "spikes": spikes}


def vsc_diagnosis(params: Params, summary: dict[str, Any]) -> str | None:
    """Paper 002's part of the ``diagnosis`` stage (issue 43): the failing Smiley claim of the study's
    ``summary`` explained from its Smiley runs and the runs of the diagnosis arm (group
    ``diagnosis/vsc_experiments/smiley``, scored here as the study scores its own)."""
    claims = summary["claims"]
    smiley = summary["smiley"]
    arm = run_summaries(smiley_results(params, {}, DIAGNOSIS_GROUP)[0], ("fresh",))
    return diagnosis_markdown(smiley["runs"], smiley["chosen_beta_vae"], arm, claims,
                              diagnosis_settings(params, smiley["runs"]))


def run_vsc_experiments(params: Params) -> Path:
    """``vsc_experiments`` stage: every VSC experiment whose runs exist; writes ``reports/vsc_experiments``
    (``README.md``, figures and ``summary.json`` with the title and claims the report gathers)."""
    out = OUT_DIR
    out.mkdir(parents=True, exist_ok=True)
    lines = ["# Variational Sparse Coding experiments", "",
             f"Generated by the `{NAME}` stage (`priorlab.studies.{NAME}`); definitions of every "
             "score are in that module's docstring.", ""]
    results: dict[str, Any] = {"title": TITLE, "paper": PAPER, "profile": params.profile}
    for name, fn in (("smiley", smiley_experiment), ("elbo", elbo_experiment), ("fashion", fashion_experiment)):
        part_lines, part = fn(params, out)
        if not part_lines:
            lines += [f"_{name}: no runs of this experiment in the profile._", ""]
        lines += part_lines
        results[name] = part
    claims = [c.to_dict() for c in vsc_claims(results["smiley"], results["elbo"], results["fashion"])]
    claims = results["claims"] = link_diagnosis(claims, NAME, diagnosed)
    lines[4:4] = ["## Paper claims at this profile's scale", "",
                  *(claims_table(claims) or ["_no claim could be tested: the profile has no runs of these groups._"]),
                  ""]
    write_json(out / "summary.json", results)
    path = out / "README.md"
    with atomic_path(path, suffix=".md") as tmp:
        tmp.write_text("\n".join(lines))
    return path
