"""Source-latent correlation matrices (VSC, Tonolini et al. 2020, Fig. 4 convention).

``correlation_matrix`` gives the absolute Pearson correlation between every
ground-truth source and every latent; ``order_latents_by_source`` reproduces
the figure's ordering; ``correlation_contrast`` summarises how exclusively each
source is captured by one latent.
"""

from __future__ import annotations

import numpy as np

from .utils import check_codes


def correlation_matrix(codes, sources) -> np.ndarray:
    """Absolute Pearson correlation ``[S, D]`` between ``sources [N, S]`` and ``codes [N, D]``.

    A constant column (zero variance) has correlation 0 with everything.
    """
    z = check_codes(codes, "codes")
    s = check_codes(sources, "sources")
    if s.shape[0] != z.shape[0]:
        raise ValueError(f"sources has {s.shape[0]} points but codes has {z.shape[0]}")
    zc = z - z.mean(axis=0)
    sc = s - s.mean(axis=0)
    zn = np.sqrt(np.sum(zc * zc, axis=0))
    sn = np.sqrt(np.sum(sc * sc, axis=0))
    cov = sc.T @ zc
    denom = sn[:, None] * zn[None, :]
    ok = denom > 0
    corr = np.zeros_like(cov)
    corr[ok] = np.abs(cov[ok] / denom[ok])
    return np.clip(corr, 0.0, 1.0)


def _check_corr(corr) -> np.ndarray:
    a = np.asarray(corr, dtype=np.float64)
    if a.ndim != 2:
        raise ValueError(f"corr must be 2-D [num_sources, num_latents], got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError("corr contains NaN or inf values")
    if np.any(a < 0):
        raise ValueError("corr must hold absolute correlations (non-negative)")
    return a


def order_latents_by_source(corr, threshold: float = 0.07) -> dict:
    """Order the latent columns of ``corr [S, D]`` by the source each latent captures.

    VSC's figure convention: entries below ``threshold`` are set to 0; latent j
    is assigned to the source ``argmax_i A_ij / mean_j' A_ij'`` (each source's
    row normalised by its mean over latents; all-zero rows never win); columns
    are ordered by assigned source, within a source by decreasing ``A_ij``;
    latents with an all-zero column ("never used") come last as zero columns.

    Returns ``{matrix [S, D] (thresholded, reordered), order [D] (original
    latent index of each column), assignment [D] (source of each original
    latent, -1 if unused)}``.
    """
    a = _check_corr(corr).copy()
    a[a < threshold] = 0.0
    row_mean = a.mean(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(row_mean[:, None] > 0, a / row_mean[:, None], 0.0)
    used = a.max(axis=0) > 0
    assignment = np.where(used, np.argmax(ratio, axis=0), -1)
    strength = a[np.maximum(assignment, 0), np.arange(a.shape[1])]
    # Sort by (unused last, source, decreasing strength, original index).
    key_source = np.where(used, assignment, a.shape[0])
    order = np.lexsort((np.arange(a.shape[1]), -strength, key_source))
    return {"matrix": a[:, order], "order": order, "assignment": assignment}


def correlation_contrast(corr) -> float:
    """Mean over sources of ``(max_j A_ij - second max_j A_ij) / max_j A_ij``.

    ``A = corr [S, D]`` (absolute correlations).  1 when every source is
    correlated with exactly one latent, 0 when its two best latents tie.
    Sources uncorrelated with every latent (row max 0) count 0.
    Needs D >= 2.
    """
    a = _check_corr(corr)
    if a.shape[1] < 2:
        raise ValueError("correlation_contrast needs at least 2 latents")
    s = np.sort(a, axis=1)
    top, second = s[:, -1], s[:, -2]
    contrast = np.zeros(a.shape[0])
    ok = top > 0
    contrast[ok] = (top[ok] - second[ok]) / top[ok]
    return float(np.mean(contrast))
