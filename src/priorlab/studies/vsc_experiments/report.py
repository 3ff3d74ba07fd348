"""Variational Sparse Coding experiments (paper 002): Smiley disentanglement (fig. 3, 9), ELBO vs
prior strength (fig. 1), spike activation per class (fig. 5), conditional generation (fig. 6, 7).

Runs are found by their ``group`` in ``runs:``:

* ``vsc_experiments/smiley``: VSC, β-VAE (a β grid) and β-TCVAE on Smiley setups of several latent sizes.
  Each model is encoded on the data set's freshly generated test split (the pipeline reads nothing
  else; ``python -m benchmarks.vsc_reference`` scores the trained runs on the authors' published set).
* ``vsc_experiments/elbo``: VSC over α and β-VAE over β on Fashion-MNIST (the test ELBO of each run's headline metrics, ``metrics/<group>/<run>.json``).

Definitions (all on the posterior mean, the framework's representation):

* source signal ``s_j = presence(group(j)) · v_j`` (the authors' ``S ∘ V``); correlation matrix
  ``A = |corr(s_j, z_d)|`` [18, D], shown with the paper's column ordering
  (``order_latents_by_source``: entries < 0.07 zeroed, latent → source maximising ``A_ij / mean_j A_ij``).
* contrast: ``correlation_contrast(A)``, the mean over sources of ``(top − second) / top``.
* block purity: over used latents (a non-zero column after thresholding), the mean share of the
  latent's column mass ``Σ_i A_id`` lying in the rows of the group of its assigned source (1 = the
  block-diagonal structure of fig. 3d).
* used latents: non-zero columns of the thresholded matrix (the paper's "exploited dimensions").
  Latents that are inactive on the test set (Var_x of the code ≤ ``evaluate.active_threshold``, the
  active-dims criterion) are zero columns: Pearson correlation is scale-free, so a VSC latent whose
  spike is off (codes γμ of order 1e-10) would otherwise still count as correlated.
* presence-aware MIG / DCI (:mod:`priorlab.metrics.presence`): 22 factors = 4 presence flags
  (scored on all points) + 18 binned sources, source ``j`` scored only on the points where its
  group is present (its value has no effect on the image otherwise).  MIG: per-factor gap on that
  subset, averaged; DCI: one classifier per factor on its subset, importance matrix [D, 22], D and
  C as usual, informativeness the mean test accuracy.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from priorlab import metrics, paths
from priorlab.config import Params
from priorlab.studies.claims import Claim, claims_table, fmt, md_table
from priorlab.studies.criteria import criterion
from priorlab.studies.intervals import mean_t, welch_difference
from priorlab.studies.runs import encode, group_runs, in_batches, load_trained, metrics_file
from priorlab.io import atomic_path, write_json
from priorlab.models.vsc import VSC

NAME = "vsc_experiments"  # stage, module and report folder
TITLE, PAPER = "Variational Sparse Coding (paper 002)", "002"
SMILEY_GROUP, ELBO_GROUP = f"{NAME}/smiley", f"{NAME}/elbo"
CORR_THRESHOLD = 0.07
OUT_DIR = paths.experiment_dir(NAME)
FASHION_CLASSES = ("T-shirt", "trouser", "pullover", "dress", "coat", "sandal", "shirt", "sneaker", "bag", "boot")


# --------------------------------------------------------------------------- Smiley metrics


def source_signals(presence: np.ndarray, sources: np.ndarray) -> np.ndarray:
    """``[N, 18]`` presence-gated source values (authors' ``S ∘ V``) from group presence ``[N, 4]``."""
    from priorlab.data.smiley import source_presence

    return source_presence(np.asarray(presence, dtype=bool)) * np.asarray(sources, dtype=np.float64)


def block_purity(corr: np.ndarray, assignment: np.ndarray, threshold: float = CORR_THRESHOLD) -> float:
    """Mean share of each used latent's correlation mass inside its assigned source's group rows."""
    from priorlab.data.smiley import GROUP_NAMES, GROUP_SOURCE_SLICES

    a = np.where(corr < threshold, 0.0, corr)
    group_of = np.empty(a.shape[0], dtype=np.int64)
    for g, name in enumerate(GROUP_NAMES):
        group_of[GROUP_SOURCE_SLICES[name]] = g
    used = np.flatnonzero(assignment >= 0)
    if used.size == 0:
        return 0.0
    shares = [a[group_of == group_of[assignment[d]], d].sum() / a[:, d].sum() for d in used]
    return float(np.mean(shares))


def source_correlation(codes: np.ndarray, presence: np.ndarray, sources: np.ndarray,
                       active_threshold: float) -> np.ndarray:
    """``A = |corr(s_j, z_d)|`` [18, D], latents inactive on these points (Var ≤ ``active_threshold``)
    as zero columns (fig. 3)."""
    corr = metrics.correlation_matrix(codes, source_signals(presence, sources))
    corr[:, codes.var(0) <= active_threshold] = 0.0
    return corr


def smiley_scores(codes: np.ndarray, presence: np.ndarray, sources: np.ndarray, n_bins: int = 20,
                  active_threshold: float = 0.01, dci_backend: str = "hist", seed: int = 0,
                  wanted: tuple[str, ...] = ("mig", "dci"), max_points: int | None = None,
                  n_jobs: int = 1) -> dict[str, Any]:
    """Correlation matrix and summaries on every point; presence-aware MIG / DCI on the first
    ``max_points`` (first half train, second test), only when named in ``wanted`` (the profile's
    ``evaluate.metrics``)."""
    from priorlab.data.smiley import SmileyData

    corr = source_correlation(codes, presence, sources, active_threshold)
    ordered = metrics.order_latents_by_source(corr, CORR_THRESHOLD)
    factors, mask = metrics.presence_aware_factors(presence, SmileyData().discretise_sources(sources))
    n = len(codes) if max_points is None else min(len(codes), max_points)
    codes, factors, mask = codes[:n], factors[:n], mask[:n]
    half = n // 2
    nan_dci = {"disentanglement": float("nan"), "completeness": float("nan"), "informativeness_test": float("nan")}
    return {
        "corr": corr,
        "ordered": ordered["matrix"],
        "contrast": metrics.correlation_contrast(corr),
        "block_purity": block_purity(corr, ordered["assignment"]),
        "used_latents": int((ordered["assignment"] >= 0).sum()),
        "active_dims": metrics.active_dims(codes, active_threshold),
        "mig": metrics.presence_aware_mig(codes, factors, mask, n_bins)["mig"] if "mig" in wanted else float("nan"),
        "dci": metrics.presence_aware_dci(codes[:half], factors[:half], mask[:half], codes[half:], factors[half:],
                                          mask[half:], seed, dci_backend, n_jobs) if "dci" in wanted else nan_dci,
    }


# --------------------------------------------------------------------------- experiments


def _label(params: Params, run: str) -> str:
    spec = params.models[params.run(run).model]
    if spec.kind == "vsc":
        return f"VSC α={spec.alpha:g}"
    if spec.kind == "beta_tcvae":
        return f"β-TCVAE β={spec.tc_weight:g}"
    return f"β-VAE β={spec.beta:g}"


VALIDATION_SIZE = 2000
VALIDATION_SEED_OFFSET = 104_729  # the validation smileys' seed: the data set's seed plus this


def validation_smileys(params: Params, run: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``VALIDATION_SIZE`` fresh smileys (uint8 images as the data stage stores them, presence,
    sources) drawn from the run's data set distribution with their own seed: the set β is chosen on."""
    from priorlab.data.smiley import sample_smiley

    spec = params.dataset_of(params.run(run).setup)
    images, presence, sources = sample_smiley(VALIDATION_SIZE, np.random.RandomState(spec.seed + VALIDATION_SEED_OFFSET),
                                              presence_prob=spec.presence_prob)
    return images, presence, sources


def smiley_experiment(params: Params, out: Path, test_sets: dict[str, tuple] | None = None
                      ) -> tuple[list[str], dict]:
    """Fig. 3 / 9: correlation matrices and scores of every ``vsc_experiments/smiley`` run on the fresh
    test split and on each of ``test_sets`` (name -> (images, presence, sources), e.g. the authors'
    published set, :func:`priorlab.data.smiley.load_smiley_mat`; the stage passes none)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from priorlab.io import save_figure

    runs = group_runs(params, SMILEY_GROUP, trained=True)
    if not runs:
        return [], {}
    ev = params.evaluate
    test_sets = dict(test_sets or {})
    results: dict[str, dict] = {}
    # β of the β-VAE per latent size (paper D.2): the best mean correlation contrast over seeds on a
    # validation set (fresh smileys drawn with their own seed), never on the test set the claims use
    val = validation_smileys(params, runs[0])
    val_contrast: dict[tuple[int, str], list[float]] = {}
    first_seed = min(params.run(run).seed for run in runs)
    for run in runs:
        model, data = load_trained(params, run)
        sets = {"fresh": (data.arrays["x_test"][:, 0], data.arrays["presence_test"].astype(bool),
                          data.arrays["sources_test"]), **test_sets}
        spec = params.run(run)
        results[run] = {"label": _label(params, run), "latent_dim": params.setup(spec.setup).latent_dim,
                        "model": spec.model, "seed": spec.seed}
        if isinstance(model, VSC):
            results[run]["spikes"] = spike_statistics(
                spike_probabilities(model, data.prepare(torch.as_tensor(sets["fresh"][0][:, None]))))
        for name, (images, presence, sources) in sets.items():
            x = data.prepare(torch.as_tensor(np.asarray(images)[:, None]))
            # presence-aware DCI (22 classifiers) on the fresh split only: on the authors' set the
            # correlation summaries and MIG (the paper's figure is a correlation matrix)
            # presence-aware DCI (22 classifiers, the stage's largest cost; no claim uses it) on the fresh
            # split of the first seed's runs only: on the authors' set the correlation summaries and MIG
            wanted = tuple(m for m in ev.presence_aware()
                           if m != "dci" or (name == "fresh" and spec.seed == first_seed))
            results[run][name] = smiley_scores(encode(model, x), presence, sources, ev.n_bins,
                                               ev.active_threshold, ev.dci_backend, ev.seed, wanted,
                                               2 * ev.metric_num_test, ev.n_jobs)
        if params.models[spec.model].kind == "vae":
            codes = encode(model, data.prepare(torch.as_tensor(val[0][:, None])))
            r = results[run]
            r["validation_contrast"] = metrics.correlation_contrast(
                source_correlation(codes, val[1], val[2], ev.active_threshold))
            val_contrast.setdefault((r["latent_dim"], r["model"]), []).append(r["validation_contrast"])
    chosen_model: dict[int, str] = {}
    for (d, m), v in sorted(val_contrast.items()):
        if d not in chosen_model or np.mean(v) > np.mean(val_contrast[(d, chosen_model[d])]):
            chosen_model[d] = m
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
    summary: dict[str, dict] = {}
    for run, r in results.items():
        summary[run] = {k: v for k, v in r.items() if not isinstance(v, dict)}
        if "spikes" in r:
            summary[run]["spikes"] = r["spikes"]
        for name in ("fresh", *test_sets):
            s = r[name]
            summary[run][name] = {k: v for k, v in s.items() if k not in ("corr", "ordered")}
            summary[run][name]["corr"] = np.round(s["corr"], 4).tolist()
    return lines, {"runs": summary, "chosen_beta_vae": {str(d): m for d, m in chosen_model.items()}}


def elbo_experiment(params: Params, out: Path) -> tuple[list[str], dict]:
    """Fig. 1: test ELBO (mean ± std over seeds) against α (VSC) and β (β-VAE)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from priorlab.io import read_json, save_figure

    runs = [r for r in group_runs(params, ELBO_GROUP, trained=True) if metrics_file(params, r).is_file()]
    if not runs:
        return [], {}
    table: dict[tuple[str, float], list[float]] = {}
    for run in runs:
        spec = params.models[params.run(run).model]
        key = ("VSC", spec.alpha) if spec.kind == "vsc" else ("β-VAE", spec.beta)
        table.setdefault(key, []).append(read_json(metrics_file(params, run))["elbo"])
    rows, data = [], {}
    for (kind, value), elbos in sorted(table.items()):
        e = np.asarray(elbos)
        std = float(e.std(ddof=1)) if len(e) > 1 else float("nan")
        rows.append([kind, value, len(e), float(e.mean()), std])
        data.setdefault(kind, []).append((value, float(e.mean()), std))
    fig, axes = plt.subplots(1, 2, figsize=(8, 3))
    for ax, (kind, xlabel, col) in zip(axes, (("VSC", "prior spike probability α", "alpha"), ("β-VAE", "β", "beta"))):
        pts = sorted(data.get(kind, []))  # elbo_vs_<col>.csv: data plots of dvc.yaml (`dvc plots diff`)
        np.savetxt(out / f"elbo_vs_{col}.csv", np.reshape(pts, (-1, 3)), "%.10g", ",",
                   header=f"{col},elbo_mean,elbo_std", comments="")
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
    lines += ["", "![ELBO vs prior strength](elbo_vs_prior_strength.png) (data: `elbo_vs_alpha.csv`, `elbo_vs_beta.csv`)", ""]
    return lines, {"rows": [{**dict(zip(("model", "value", "seeds", "mean", "std"), r)), "elbos": table[(r[0], r[1])]}
                            for r in rows]}


def spike_probabilities(model: VSC, x: torch.Tensor, batch: int = 500) -> np.ndarray:
    """γ(x) of the recognition model, ``[N, J]``."""
    return in_batches(model.spike_probabilities, x, batch)


def class_activations(gamma: np.ndarray, labels: np.ndarray, n_classes: int = 10) -> np.ndarray:
    """Mean spike probability γ per class ``[n_classes, J]`` (fig. 5)."""
    return np.stack([gamma[labels == c].mean(0) if np.any(labels == c) else np.zeros(gamma.shape[1])
                     for c in range(n_classes)])


def spike_statistics(gamma: np.ndarray, varies: float = 0.1) -> dict[str, float]:
    """How sparse and how input-dependent the spikes ``γ [N, J]`` are: the mean number of active
    dims per input (γ > 0.5), dims always active, dims whose γ varies over inputs (std > ``varies``),
    and the share of spikes undecided (0.05 < γ < 0.95)."""
    gamma = np.asarray(gamma, dtype=np.float64)
    return {"mean_gamma": float(gamma.mean()), "active_per_input": float((gamma > 0.5).sum(1).mean()),
            "always_active_dims": int((gamma.min(0) > 0.5).sum()),
            "input_dependent_dims": int((gamma.std(0) > varies).sum()),
            "undecided_fraction": float(((gamma > 0.05) & (gamma < 0.95)).mean())}


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / max(np.linalg.norm(a) * np.linalg.norm(b), 1e-12))


def class_similarity(act: np.ndarray) -> np.ndarray:
    """Cosine similarity of the classes' activation patterns ``[C, C]`` (fig. 5)."""
    return np.array([[_cosine(act[a], act[b]) for b in range(len(act))] for a in range(len(act))])


@torch.no_grad()
def conditional_samples(model, x: torch.Tensor, n: int, generator: torch.Generator, threshold: float = 0.5):
    """Fig. 6: encode one image; resample only its active dims (γ > threshold) from its selected prior slab."""
    q = model.posterior(x[:1]).base_dist
    p = model.prior_distribution(x[:1])
    u = int(p.weights[0].argmax())
    active = q.gamma[0] > threshold
    eps = torch.randn(n, q.gamma.shape[1], generator=generator)
    slab = p.loc_u[u] + torch.exp(0.5 * p.logvar_u[u]) * eps
    z = torch.where(active, slab, torch.zeros_like(slab))
    return model.likelihood.mean(model.decode(z)), active


def fashion_experiment(params: Params, out: Path) -> tuple[list[str], dict]:
    """Fig. 5-7 from the ``vsc_experiments/elbo`` VSC run with the smallest α (paper D.3: α = 0.01)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from priorlab.io import save_figure
    from priorlab.plots.images import to_grid

    vsc_runs = [r for r in group_runs(params, ELBO_GROUP, trained=True)
                if params.models[params.run(r).model].kind == "vsc"]
    if not vsc_runs:
        return [], {}
    run = min(vsc_runs, key=lambda r: (params.models[params.run(r).model].alpha, params.run(r).seed))
    replicates, fitted = {}, {}  # every seed of that model: the claims' units
    for other in vsc_runs:
        if params.run(other).model == params.run(run).model:
            m, d = load_trained(params, other)
            g_ = spike_probabilities(m, d.prepare(d.x("test")))
            a = class_activations(g_, d.labels("test"))
            sim_ = class_similarity(a)
            fitted[other] = (m, d, g_, a, sim_)
            replicates[other] = {"seed": params.run(other).seed, "spikes": spike_statistics(g_),
                                 "tshirt_shirt_minus_trouser": float(sim_[0, 6] - sim_[0, 1]),
                                 "sneaker_boot_minus_trouser_bag": float(sim_[7, 9] - sim_[1, 8])}
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



def _by_kind(smiley: dict, kind: str, chosen: dict[str, str]) -> dict[int, list[dict]]:
    """Fresh-test-set scores of one model family per latent size, one entry per seed (β-VAE: the β
    chosen on the validation set per size)."""
    out: dict[int, list[dict]] = {}
    for run, r in smiley.get("runs", {}).items():
        family = r["label"].split(" ")[0]
        if family == kind and (kind != "β-VAE" or chosen.get(str(r["latent_dim"])) == r["model"]):
            out.setdefault(int(r["latent_dim"]), []).append(
                {"run": run, **r["fresh"], **({"spikes": r["spikes"]} if "spikes" in r else {})})
    return dict(sorted(out.items()))


def _values(entries: list[dict], key: str) -> list[float]:
    return [float(e[key]) for e in entries]


def vsc_claims(smiley: dict, elbo: dict, fashion: dict) -> list[Claim]:
    """Paper 002's headline claims on the fresh Smiley test set and Fashion-MNIST, decided by the
    ``002.*`` criteria of :mod:`priorlab.studies.criteria` over seeds.  Contrast =
    :func:`priorlab.metrics.correlation_contrast`."""
    chosen = smiley.get("chosen_beta_vae", {})
    vsc, bvae, tc = (_by_kind(smiley, k, chosen) for k in ("VSC", "β-VAE", "β-TCVAE"))
    claims = []

    def sizes(d: dict) -> str:
        return ", ".join(f"d={k}: {fmt(_values(v, 'contrast'))}" for k, v in d.items())

    if len(vsc) >= 2:
        lo, hi = min(vsc), max(vsc)
        claims.append(criterion("002.vsc_contrast_kept").decide(
            [("", welch_difference(_values(vsc[hi], "contrast"), _values(vsc[lo], "contrast")))],
            f"VSC contrast {sizes(vsc)}; block purity " +
            ", ".join(f"d={k}: {fmt(_values(v, 'block_purity'))}" for k, v in vsc.items())))
        used = _values(vsc[hi], "used_latents")
        claims.append(criterion("002.vsc_used_latents").decide(
            [("", mean_t(used))], f"d={hi}: used latents {fmt(used, 0)}, active dims "
                                  f"{fmt(_values(vsc[hi], 'active_dims'), 0)}"))
    for key, name, fam in (("002.beta_vae_degrades", "β-VAE", bvae), ("002.beta_tcvae_degrades", "β-TCVAE", tc)):
        if len(fam) >= 2:
            lo, hi = min(fam), max(fam)
            claims.append(criterion(key).decide(
                [("", welch_difference(_values(fam[lo], "contrast"), _values(fam[hi], "contrast")))],
                f"{name} contrast {sizes(fam)}" + (f" (β per d: {chosen})" if name == "β-VAE" else "")))
    both = sorted(set(vsc) & set(bvae))
    if both:
        claims.append(criterion("002.vsc_beats_beta_vae").decide(
            [(f"d={d}", welch_difference(_values(vsc[d], "contrast"), _values(bvae[d], "contrast"))) for d in both],
            "; ".join(f"d={d}: {fmt(_values(vsc[d], 'contrast'))} vs {fmt(_values(bvae[d], 'contrast'))}"
                      for d in both)))
    rows = elbo.get("rows", [])
    for key, kind, sym in (("002.vsc_elbo_alpha", "VSC", "α"), ("002.beta_vae_elbo_beta", "β-VAE", "β")):
        pts = sorted((r["value"], r["elbos"]) for r in rows if r["model"] == kind)
        if len(pts) >= 2:
            high, low = (pts[-1][1], pts[0][1]) if kind == "VSC" else (pts[0][1], pts[-1][1])
            claims.append(criterion(key).decide(
                [("", welch_difference(high, low))],
                f"{sym} {[v for v, _ in pts]}: mean ELBO {fmt([np.mean(e) for _, e in pts], 2)}"))
    vsc_rows = sorted((r["value"], r["elbos"]) for r in rows if r["model"] == "VSC")
    bvae_m = [float(np.mean(r["elbos"])) for r in rows if r["model"] == "β-VAE"]
    if vsc_rows and len(bvae_m) >= 2:
        lo, span = min(bvae_m), max(bvae_m) - min(bvae_m)
        parts = []
        for a, e in vsc_rows:  # the VSC ELBO's position in the β-VAE span, 0 = its lowest mean, 1 = its highest
            est = mean_t((np.asarray(e) - lo) / span)
            parts.append((f"α={a:g}", est))
        claims.append(criterion("002.vsc_elbo_comparable").decide(
            parts, f"VSC mean ELBO {fmt([np.mean(e) for _, e in vsc_rows], 2)}, β-VAE span [{lo:.2f}, {max(bvae_m):.2f}]"))
    spikes = [(f"Smiley d={d}", [e["spikes"]["input_dependent_dims"] for e in v if "spikes" in e]) for d, v in vsc.items()]
    reps = fashion.get("replicates", {})
    if reps:
        spikes.append(("Fashion-MNIST", [r["spikes"]["input_dependent_dims"] for r in reps.values()]))
    spikes = [(n, v) for n, v in spikes if v]
    if spikes:
        claims.append(criterion("002.spikes_input_dependent").decide(
            [(n, mean_t(v)) for n, v in spikes], "; ".join(f"{n}: {fmt(v, 0)} input-dependent dims" for n, v in spikes)))
    if reps:
        a = [r["tshirt_shirt_minus_trouser"] for r in reps.values()]
        b = [r["sneaker_boot_minus_trouser_bag"] for r in reps.values()]
        dependent = [r["spikes"]["input_dependent_dims"] for r in reps.values()]
        failed = "" if max(dependent) >= 1 else "no Fashion-MNIST VSC spike depends on the input (γ std ≤ 0.1 in every dim)"
        claims.append(criterion("002.class_spike_patterns").decide(
            [("T-shirt", mean_t(a)), ("sneaker", mean_t(b))],
            f"cos differences per seed: {fmt(a)}; {fmt(b)}", failed))
    return claims


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
    results["claims"] = claims
    lines[4:4] = ["## Paper claims at this profile's scale", "",
                  *(claims_table(claims) or ["_no claim could be tested: the profile has no runs of these groups._"]),
                  ""]
    write_json(out / "summary.json", results)
    path = out / "README.md"
    with atomic_path(path, suffix=".md") as tmp:
        tmp.write_text("\n".join(lines))
    return path
