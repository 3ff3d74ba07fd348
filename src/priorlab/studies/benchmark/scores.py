"""The benchmark's scores beyond the evaluate stage's record (which gives the test ELBO, the
importance-weighted log-likelihood, the active dimensions and the disentanglement metrics): codes and
labels in, numbers out."""

from __future__ import annotations

import numpy as np

from priorlab import metrics


def zero_share(codes: np.ndarray, threshold: float) -> float:
    """Per-observation sparsity: the share of a code's coordinates with ``|E_q[z_d | x]| <= threshold``,
    averaged over the observations (0: every coordinate used by every input; 1: all zero).  A collapsed
    dimension counts as zero for every input, a spike-and-slab code's unselected ones for its own input."""
    codes = np.asarray(codes, dtype=np.float64)
    if codes.ndim != 2 or codes.shape[0] == 0:
        raise ValueError(f"codes must be a non-empty [N, D] array, got shape {codes.shape}")
    if threshold < 0:
        raise ValueError(f"threshold must be >= 0, got {threshold}")
    return float(np.mean(np.abs(codes) <= threshold))


def smiley_contrast(codes: np.ndarray, presence: np.ndarray, sources: np.ndarray, active_threshold: float) -> float:
    """Paper 002's correlation contrast of a Smiley code (fig. 3): the source-latent correlation matrix
    with latents inactive on these points zeroed, summarised by :func:`priorlab.metrics.correlation_contrast`."""
    from priorlab.studies.vsc_experiments.scores import (
        source_correlation)  # lazy: torch + yaml, ~1.8 s at import priorlab.studies.benchmark.scores

    return float(metrics.correlation_contrast(source_correlation(codes, presence, sources, active_threshold)))
