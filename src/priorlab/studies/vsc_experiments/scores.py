"""Paper 002's scores from codes and trained models: the Smiley correlation summaries (fig. 3, 9) and
presence-aware MIG / DCI, the spike statistics and class activation patterns of VSC (fig. 5) and its
conditional samples (fig. 6).  Arrays or a model in, numbers out; definitions in the package docstring."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from priorlab import metrics
from priorlab.data.smiley import GROUP_NAMES, GROUP_SOURCE_SLICES, SmileyData, source_presence
from priorlab.models.vsc import VSC
from priorlab.studies.runs import in_batches

CORR_THRESHOLD = 0.07


# --------------------------------------------------------------------------- Smiley metrics


def source_signals(presence: np.ndarray, sources: np.ndarray) -> np.ndarray:
    """``[N, 18]`` presence-gated source values (authors' ``S ∘ V``) from group presence ``[N, 4]``."""
    return source_presence(np.asarray(presence, dtype=bool)) * np.asarray(sources, dtype=np.float64)


def block_purity(corr: np.ndarray, assignment: np.ndarray, threshold: float = CORR_THRESHOLD) -> float:
    """Mean share of each used latent's correlation mass inside its assigned source's group rows."""
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


# --------------------------------------------------------------------------- spikes


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
