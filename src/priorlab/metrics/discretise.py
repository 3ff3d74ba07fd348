"""Histogram discretisation and discrete mutual information (shared by MIG and modularity).

Ports of disentanglement_lib ``evaluation/metrics/utils.py``:
``_histogram_discretize`` (per code dimension, ``np.digitize(x, np.histogram(x,
n_bins)[1][:-1])``, i.e. equal-width bins between the dimension's min and max,
labels 1..n_bins), ``discrete_mutual_info`` (sklearn ``mutual_info_score``, nats)
and ``discrete_entropy`` (``mutual_info_score(y, y)``).  The mutual information is
computed for all code dimensions at once from a joint count table with the same
floating-point formula as ``sklearn.metrics.mutual_info_score``.
"""

from __future__ import annotations

import numpy as np

from .utils import check_codes, check_factors, check_positive_int


def discretise(codes, n_bins: int = 20) -> np.ndarray:
    """Equal-width histogram labels ``int64 [N, D]`` in ``1..n_bins`` per code dimension.

    Exactly ``np.digitize(codes[:, d], np.histogram_bin_edges(codes[:, d], n_bins)[:-1])``
    (a constant dimension falls into a single bin, as with ``np.histogram``).
    """
    x = check_codes(codes)
    n_bins = check_positive_int(n_bins, "n_bins")
    out = np.empty(x.shape, dtype=np.int64)
    for d in range(x.shape[1]):  # D is small; each column is a vectorised search
        edges = np.histogram_bin_edges(x[:, d], n_bins)
        out[:, d] = np.digitize(x[:, d], edges[:-1])
    return out


def _labels(column: np.ndarray) -> tuple[np.ndarray, int]:
    uniq, inv = np.unique(column, return_inverse=True)
    return inv.reshape(-1), uniq.size


def _mi_from_counts(counts: np.ndarray) -> np.ndarray:
    """Mutual information (nats) of stacked contingency tables ``counts [M, A, B]``.

    Same arithmetic as ``sklearn.metrics.mutual_info_score``: each non-zero cell
    c (row total a, column total b) adds ``c/n (log c - log n) + c/n (2 log n - log(a b))``;
    terms below machine epsilon are set to zero, the sum is clipped at 0, and
    the MI is 0 when either variable takes a single value.
    """
    counts = counts.astype(np.int64, copy=False)
    total = counts.sum(axis=(1, 2))                     # [M]
    pi = counts.sum(axis=2)                             # [M, A]
    pj = counts.sum(axis=1)                             # [M, B]
    nz = counts > 0
    c = np.where(nz, counts, 1)
    outer = pi[:, :, None] * pj[:, None, :]
    outer = np.where(nz, outer, 1)
    log_total = np.log(total.astype(np.float64))[:, None, None]
    c_nm = c / total[:, None, None]
    log_outer = -np.log(outer.astype(np.float64)) + log_total + log_total
    terms = c_nm * (np.log(c.astype(np.float64)) - log_total) + c_nm * log_outer
    terms = np.where(nz & (np.abs(terms) >= np.finfo(np.float64).eps), terms, 0.0)
    mi = np.clip(terms.sum(axis=(1, 2)), 0.0, None)
    single = ((pi > 0).sum(axis=1) <= 1) | ((pj > 0).sum(axis=1) <= 1)
    mi[single] = 0.0
    return mi


def mutual_information(discretised, factors) -> np.ndarray:
    """Discrete mutual information ``[D, K]`` (nats) between code labels and factor labels.

    ``discretised`` holds one label per point and code dimension (e.g. from
    :func:`discretise`); ``m[i, j] = mutual_info_score(factors[:, j], discretised[:, i])``.
    """
    z = np.asarray(discretised)
    if z.ndim != 2:
        raise ValueError(f"discretised codes must be 2-D [num_points, num_dims], got shape {z.shape}")
    if np.issubdtype(z.dtype, np.floating) and not np.all(np.isfinite(z)):
        raise ValueError("discretised codes contain NaN or inf values")
    f = check_factors(factors, z.shape[0])
    n, d_dim = z.shape
    code_labels = [_labels(z[:, d]) for d in range(d_dim)]
    a_max = max(na for _, na in code_labels)
    m = np.zeros((d_dim, f.shape[1]))
    for k in range(f.shape[1]):
        y, ny = _labels(f[:, k])
        idx = np.stack([d * a_max * ny + lab * ny + y for d, (lab, _) in enumerate(code_labels)])
        counts = np.bincount(idx.ravel(), minlength=d_dim * a_max * ny).reshape(d_dim, a_max, ny)
        m[:, k] = _mi_from_counts(counts)
    return m


def factor_entropy(factors) -> np.ndarray:
    """Empirical entropy (nats) of each factor column, ``mutual_info_score(y, y)``: ``[K]``."""
    f = check_factors(factors)
    h = np.zeros(f.shape[1])
    for k in range(f.shape[1]):
        y, ny = _labels(f[:, k])
        counts = np.bincount(y * ny + y, minlength=ny * ny).reshape(1, ny, ny)
        h[k] = _mi_from_counts(counts)[0]
    return h


def discretised_codes(codes: np.ndarray, n_bins: int, discretised=None, name: str = "codes") -> np.ndarray:
    """``discretise(codes, n_bins)``, or a precomputed discretisation checked against the codes' shape
    (so MIG and modularity can share one)."""
    if discretised is None:
        return discretise(codes, n_bins)
    z = np.asarray(discretised)
    if z.shape != codes.shape:
        raise ValueError(f"discretised has shape {z.shape}, expected the shape of {name}, {codes.shape}")
    return z
