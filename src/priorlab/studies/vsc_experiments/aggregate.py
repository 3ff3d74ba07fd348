"""Paper 002's experiment tables from the trained runs (:mod:`priorlab.studies.runs`): the Smiley scores of
every ``vsc_experiments/smiley`` run with the β-VAE β chosen on validation smileys (fig. 3, 9), the test
ELBO per prior strength from the ``vsc_experiments/elbo`` runs' metrics files (fig. 1) and its data-plot
tables, and the Fashion-MNIST spike replicates of the smallest-α VSC model (fig. 5)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from priorlab import metrics
from priorlab.config import Params
from priorlab.data.smiley import sample_smiley
from priorlab.io import read_json
from priorlab.paths import DIAGNOSIS
from priorlab.models.vsc import VSC
from priorlab.studies.runs import encode, group_runs, load_trained, metrics_file, pretraining_unit
from priorlab.studies.vsc_experiments import NAME
from priorlab.studies.vsc_experiments.scores import (class_activations, class_similarity, smiley_scores,
                                                     source_correlation, spike_probabilities, spike_statistics)

SMILEY_GROUP, ELBO_GROUP = f"{NAME}/smiley", f"{NAME}/elbo"
DIAGNOSIS_GROUP = f"{DIAGNOSIS}/{NAME}/smiley"  # issue 43: the arm of the failing Smiley claim


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
    spec = params.dataset_of(params.run(run).setup)
    images, presence, sources = sample_smiley(VALIDATION_SIZE,
                                              np.random.RandomState(spec.seed + VALIDATION_SEED_OFFSET),
                                              presence_prob=spec.presence_prob)
    return images, presence, sources


def smiley_results(params: Params, test_sets: dict[str, tuple], group: str = SMILEY_GROUP
                   ) -> tuple[dict[str, dict], dict[int, str], int]:
    """Fig. 3 / 9: the scores of every trained run of ``group`` (the study's Smiley runs, or the diagnosis
    arm's) on the fresh test split and on each of ``test_sets`` (name -> (images, presence, sources)), the
    β-VAE model chosen per latent size on :func:`validation_smileys` and the first seed (the one
    presence-aware DCI is computed for); no runs: ``({}, {}, 0)``."""
    runs = group_runs(params, group, trained=True)
    if not runs:
        return {}, {}, 0
    ev = params.evaluate
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
                        "model": spec.model, "seed": spec.seed, "unit": pretraining_unit(params, run)}
        if isinstance(model, VSC):
            results[run]["spikes"] = spike_statistics(
                spike_probabilities(model, data.prepare(torch.as_tensor(sets["fresh"][0][:, None]))))
        for name, (images, presence, sources) in sets.items():
            x = data.prepare(torch.as_tensor(np.asarray(images)[:, None]))
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
    return results, chosen_model, first_seed


def elbo_table(params: Params) -> dict[tuple[str, float], list[float]]:
    """Fig. 1: the test ELBO of every trained ``vsc_experiments/elbo`` run with a metrics file, per
    ``("VSC", α)`` or ``("β-VAE", β)``, one entry per seed."""
    runs = [r for r in group_runs(params, ELBO_GROUP, trained=True) if metrics_file(params, r).is_file()]
    table: dict[tuple[str, float], list[float]] = {}
    for run in runs:
        spec = params.models[params.run(run).model]
        key = ("VSC", spec.alpha) if spec.kind == "vsc" else ("β-VAE", spec.beta)
        table.setdefault(key, []).append(read_json(metrics_file(params, run))["elbo"])
    return table


def elbo_rows(table: dict[tuple[str, float], list[float]]
              ) -> tuple[list[list], dict[str, list[tuple[float, float, float]]]]:
    """Rows ``[model, α or β, seeds, mean, std]`` of :func:`elbo_table` (std over seeds, nan for one) and
    the same per model as ``(α or β, mean, std)`` points."""
    rows, data = [], {}
    for (kind, value), elbos in sorted(table.items()):
        e = np.asarray(elbos)
        std = float(e.std(ddof=1)) if len(e) > 1 else float("nan")
        rows.append([kind, value, len(e), float(e.mean()), std])
        data.setdefault(kind, []).append((value, float(e.mean()), std))
    return rows, data


def write_elbo_data_plots(out: Path, data: dict[str, list[tuple[float, float, float]]]) -> None:
    """``elbo_vs_alpha.csv`` (VSC) and ``elbo_vs_beta.csv`` (β-VAE): the points of :func:`elbo_rows` by
    prior strength, the data plots of dvc.yaml (`dvc plots diff`)."""
    for kind, col in (("VSC", "alpha"), ("β-VAE", "beta")):
        pts = sorted(data.get(kind, []))
        np.savetxt(out / f"elbo_vs_{col}.csv", np.reshape(pts, (-1, 3)), "%.10g", ",",
                   header=f"{col},elbo_mean,elbo_std", comments="")


def fashion_replicates(params: Params) -> tuple[str | None, dict[str, dict], dict[str, tuple]]:
    """Fig. 5: the ``vsc_experiments/elbo`` VSC run with the smallest α (paper D.3: α = 0.01), then per seed
    of its model (the claims' units) the spike statistics and class-pattern similarity differences, and
    the fitted ``(model, data, γ, class activations, class similarity)``; no VSC run: ``(None, {}, {})``."""
    vsc_runs = [r for r in group_runs(params, ELBO_GROUP, trained=True)
                if params.models[params.run(r).model].kind == "vsc"]
    if not vsc_runs:
        return None, {}, {}
    run = min(vsc_runs, key=lambda r: (params.models[params.run(r).model].alpha, params.run(r).seed))
    replicates, fitted = {}, {}  # every seed of that model: the claims' units
    for other in vsc_runs:
        if params.run(other).model == params.run(run).model:
            m, d = load_trained(params, other)
            g_ = spike_probabilities(m, d.prepare(d.x("test")))
            a = class_activations(g_, d.labels("test"))
            sim_ = class_similarity(a)
            fitted[other] = (m, d, g_, a, sim_)
            replicates[other] = {"seed": params.run(other).seed, "unit": pretraining_unit(params, other),
                                 "spikes": spike_statistics(g_),
                                 "tshirt_shirt_minus_trouser": float(sim_[0, 6] - sim_[0, 1]),
                                 "sneaker_boot_minus_trouser_bag": float(sim_[7, 9] - sim_[1, 8])}
    return run, replicates, fitted
