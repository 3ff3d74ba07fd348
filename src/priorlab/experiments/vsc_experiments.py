"""Variational Sparse Coding experiments (paper 002): Smiley disentanglement (fig. 3, 9), ELBO vs
prior strength (fig. 1), spike activation per class (fig. 5), conditional generation (fig. 6, 7).

Runs are found by their ``group`` in ``runs:``:

* ``vsc_experiments/smiley``: VSC, β-VAE (a β grid) and β-TCVAE on Smiley setups of several latent sizes.
  Each model is encoded on the data set's freshly generated test split (the pipeline reads nothing
  else; ``python -m benchmarks.vsc_reference`` scores the trained runs on the authors' published set).
* ``vsc_experiments/elbo``: VSC over α and β-VAE over β on Fashion-MNIST (test ELBO from ``metrics/<run>.json``).

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
from priorlab.experiments.claims import Claim, claims_table, fmt, md_table, monotone
from priorlab.experiments.runs import encode, group_runs, in_batches, load_trained, metrics_file
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


def smiley_scores(codes: np.ndarray, presence: np.ndarray, sources: np.ndarray, n_bins: int = 20,
                  active_threshold: float = 0.01, dci_backend: str = "hist", seed: int = 0,
                  wanted: tuple[str, ...] = ("mig", "dci"), max_points: int | None = None,
                  n_jobs: int = 1) -> dict[str, Any]:
    """Correlation matrix and summaries on every point; presence-aware MIG / DCI on the first
    ``max_points`` (first half train, second test), only when named in ``wanted`` (the profile's
    ``evaluate.metrics``)."""
    from priorlab.data.smiley import SmileyData

    corr = metrics.correlation_matrix(codes, source_signals(presence, sources))
    corr[:, codes.var(0) <= active_threshold] = 0.0  # unused latents are zero columns (fig. 3)
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
            wanted = tuple(m for m in ev.metrics if name == "fresh" or m != "dci")
            results[run][name] = smiley_scores(encode(model, x), presence, sources, ev.n_bins,
                                               ev.active_threshold, ev.dci_backend, ev.seed, wanted,
                                               2 * ev.metric_num_test, ev.n_jobs)
    # β of the β-VAE per latent size: best correlation contrast on the fresh set (paper D.2)
    chosen: dict[int, str] = {}
    for run, r in results.items():
        if params.models[r["model"]].kind == "vae":
            best = chosen.get(r["latent_dim"])
            if best is None or r["fresh"]["contrast"] > results[best]["fresh"]["contrast"]:
                chosen[r["latent_dim"]] = run
    lines = ["## Smiley disentanglement (paper 002, fig. 3 and 9)", ""]
    spike_rows = [[run, r["latent_dim"], r["spikes"]["active_per_input"], r["spikes"]["always_active_dims"],
                   r["spikes"]["input_dependent_dims"], r["spikes"]["undecided_fraction"]]
                  for run, r in results.items() if "spikes" in r]
    if spike_rows:
        lines += ["VSC spikes on the fresh test split:", "",
                  *md_table(["run", "d", "active dims per image", "always active", "input-dependent (std > 0.1)",
                             "share of γ in (0.05, 0.95)"], spike_rows), ""]
    lines += [f"β-VAE β chosen per latent size by the best correlation contrast on the fresh test set "
              f"(paper D.2): " + ", ".join(f"d={d}: {results[r]['label']}" for d, r in sorted(chosen.items())), ""]
    for name in ("fresh", *test_sets):
        lines += [f"### Test set: {name}", ""]
        if name != "fresh":
            lines += ["Presence-aware DCI (22 classifiers per model) is computed on the fresh split only.", ""]
        rows = []
        for run, r in results.items():
            s = r[name]
            rows.append([run, r["label"], r["latent_dim"], s["contrast"], s["block_purity"], s["used_latents"],
                         s["active_dims"], s["mig"], s["dci"]["disentanglement"], s["dci"]["completeness"],
                         s["dci"]["informativeness_test"]])
        lines += md_table(["run", "model", "d", "contrast", "block purity", "used latents", "active dims",
                            "PA-MIG", "PA-DCI D", "PA-DCI C", "PA-DCI I"], rows) + [""]
        shown = [r for r in results if params.models[results[r]["model"]].kind != "vae" or r in chosen.values()]
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
    return lines, {"runs": summary, "chosen_beta_vae": {str(d): r for d, r in chosen.items()}}


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
        table.setdefault(key, []).append(read_json(metrics_file(params, run))["test"]["elbo"])
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
    return lines, {"rows": [dict(zip(("model", "value", "seeds", "mean", "std"), r)) for r in rows]}


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
    model, data = load_trained(params, run)
    labels = data.labels("test")
    x = data.prepare(data.x("test"))
    gamma = spike_probabilities(model, x)
    act, spikes = class_activations(gamma, labels), spike_statistics(gamma)
    order = np.argsort(-act.mean(0))
    fig, ax = plt.subplots(figsize=(8, 2.6))
    ax.imshow(act[:, order], cmap="gray", vmin=0, vmax=1, aspect="auto", interpolation="nearest")
    ax.set_yticks(range(10), FASHION_CLASSES, fontsize=7)
    ax.set_xlabel("latent (by mean activation)")
    ax.set_title(f"{run}: mean spike probability per class")
    save_figure(out / "spike_per_class.png", fig)
    sim = np.array([[_cosine(act[a], act[b]) for b in range(10)] for a in range(10)])
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
    return lines, {"run": run, "class_activation": np.round(act, 4).tolist(), "similarity": np.round(sim, 4).tolist(),
                   "active_dims_conditioning": n_active, "tshirt_shirt": counts, "spikes": spikes}


SOURCES = 18
"""Number of Smiley source variables (paper 002 sec. 4.2)."""


def _by_kind(smiley: dict, kind: str, chosen: dict[str, str]) -> dict[int, dict]:
    """Fresh-test-set scores per latent size of one model family (β-VAE: the chosen β per size)."""
    out = {}
    for run, r in smiley.get("runs", {}).items():
        family = r["label"].split(" ")[0]
        if family == kind and (kind != "β-VAE" or chosen.get(str(r["latent_dim"])) == run):
            out[int(r["latent_dim"])] = {"run": run, **r["fresh"], **({"spikes": r["spikes"]} if "spikes" in r else {})}
    return dict(sorted(out.items()))


def vsc_claims(smiley: dict, elbo: dict, fashion: dict) -> list[Claim]:
    """Paper 002's headline claims decided on the measured numbers (fresh Smiley test set).

    Criteria (fixed in advance): contrast = :func:`priorlab.metrics.correlation_contrast`;
    "roughly as many dims as sources" = 12 ≤ used latents ≤ 27 (within a factor 1.5 of 18);
    "keeps its structure" = contrast at the largest size ≥ contrast at the smallest − 0.05;
    "degrades" = contrast falls from the smallest to the largest size.
    """
    chosen = smiley.get("chosen_beta_vae", {})
    vsc, bvae, tc = (_by_kind(smiley, k, chosen) for k in ("VSC", "β-VAE", "β-TCVAE"))
    claims = []

    def sizes(d: dict) -> str:
        return ", ".join(f"d={k}: {v['contrast']:.3f}" for k, v in d.items())

    if len(vsc) >= 2:
        lo, hi = min(vsc), max(vsc)
        claims.append(Claim("002 fig. 3, 9", "VSC keeps strong correlation contrast as the latent size grows",
                            "contrast(largest d) ≥ contrast(smallest d) − 0.05",
                            f"VSC contrast {sizes(vsc)}; block purity " +
                            ", ".join(f"d={k}: {v['block_purity']:.3f}" for k, v in vsc.items()),
                            vsc[hi]["contrast"] >= vsc[lo]["contrast"] - 0.05))
        used = vsc[hi]["used_latents"]
        claims.append(Claim("002 sec. 4.2", f"VSC uses roughly as many latent dims as sources ({SOURCES}; paper: 20 of 60)",
                            "12 ≤ used latents ≤ 27 at the largest d",
                            f"d={hi}: {used} used latents (non-zero columns), {vsc[hi]['active_dims']} active dims",
                            12 <= used <= 27))
    for name, fam in (("β-VAE", bvae), ("β-TCVAE", tc)):
        if len(fam) >= 2:
            lo, hi = min(fam), max(fam)
            claims.append(Claim("002 fig. 9", f"{name} disentanglement degrades from d={lo} to d={hi}",
                                "contrast(largest d) < contrast(smallest d)", f"{name} contrast {sizes(fam)}",
                                fam[hi]["contrast"] < fam[lo]["contrast"]))
    both = sorted(set(vsc) & set(bvae))
    if both:
        claims.append(Claim("002 fig. 3", "VSC has higher correlation contrast than the β-VAE",
                            "contrast(VSC) > contrast(β-VAE, chosen β) at every d",
                            "; ".join(f"d={d}: {vsc[d]['contrast']:.3f} vs {bvae[d]['contrast']:.3f}" for d in both),
                            all(vsc[d]["contrast"] > bvae[d]["contrast"] for d in both)))
    rows = elbo.get("rows", [])
    for kind, word, increasing in (("VSC", "α decreases", True), ("β-VAE", "β increases", False)):
        pts = sorted((r["value"], r["mean"]) for r in rows if r["model"] == kind)
        if len(pts) >= 2:
            v, m = zip(*pts)
            claims.append(Claim("002 fig. 1", f"{kind} test ELBO falls as {word}",
                                f"mean ELBO strictly {'increasing' if increasing else 'decreasing'} in "
                                f"{'α' if kind == 'VSC' else 'β'}",
                                f"{'α' if kind == 'VSC' else 'β'} {list(v)}: ELBO {fmt(m, 2)}", monotone(m, increasing)))
    vsc_m = [r["mean"] for r in rows if r["model"] == "VSC"]
    bvae_m = [r["mean"] for r in rows if r["model"] == "β-VAE"]
    if vsc_m and len(bvae_m) >= 2:
        claims.append(Claim("002 fig. 1", "VSC ELBO values are comparable to the β-VAE's",
                            "every VSC mean ELBO within the span of the β-VAE means over the β grid",
                            f"VSC {fmt(sorted(vsc_m), 2)}, β-VAE span [{min(bvae_m):.2f}, {max(bvae_m):.2f}]",
                            all(min(bvae_m) <= v <= max(bvae_m) for v in vsc_m)))
    spikes = [(f"Smiley d={d}", v["spikes"]) for d, v in vsc.items() if "spikes" in v]
    if "spikes" in fashion:
        spikes.append(("Fashion-MNIST " + fashion["run"], fashion["spikes"]))
    if spikes:
        claims.append(Claim("002 sec. 3, fig. 5", "each observation activates its own small subset of latent dims",
                            "≥ 5 dims whose spike probability varies over test inputs (std > 0.1), in every VSC model "
                            "checked", "; ".join(f"{name}: {s['input_dependent_dims']} input-dependent, "
                                                 f"{s['always_active_dims']} always active, "
                                                 f"{s['active_per_input']:.1f} active per input" for name, s in spikes),
                            all(s["input_dependent_dims"] >= 5 for _, s in spikes)))
    sim = fashion.get("similarity")
    if sim is not None:
        sim = np.asarray(sim)
        claims.append(Claim("002 fig. 5", "similar-looking classes share spike activation patterns",
                            "cos(T-shirt, shirt) > cos(T-shirt, trouser) and cos(sneaker, boot) > cos(trouser, bag)",
                            f"{sim[0, 6]:.3f} vs {sim[0, 1]:.3f}; {sim[7, 9]:.3f} vs {sim[1, 8]:.3f}",
                            bool(sim[0, 6] > sim[0, 1] and sim[7, 9] > sim[1, 8])))
    return claims


def run_vsc_experiments(params: Params) -> Path:
    """``vsc_experiments`` stage: every VSC experiment whose runs exist; writes ``reports/vsc_experiments``
    (``README.md``, figures and ``summary.json`` with the title and claims the report gathers)."""
    out = OUT_DIR
    out.mkdir(parents=True, exist_ok=True)
    lines = ["# Variational Sparse Coding experiments", "",
             f"Generated by the `{NAME}` stage (`priorlab.experiments.{NAME}`); definitions of every "
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
