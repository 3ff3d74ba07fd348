"""Active latent units (Burda et al. 2016, "Importance Weighted Autoencoders", Sec. 5.2).

A unit u is active when ``A_u = Cov_x(E_{q(u|x)}[u]) > threshold`` (0.01 in the paper).
"""

from __future__ import annotations

import numpy as np


def active_dims(codes_or_variances, threshold: float = 0.01) -> int:
    """Number of active units.

    Given posterior means ``[N, D]`` (one row per data point), the variance of
    each dim across points (``np.var``, ddof=0) is compared with ``threshold``;
    given a 1-D array of per-dim variances, those are thresholded directly.
    A unit is active when its variance is strictly greater than ``threshold``.
    """
    a = np.asarray(codes_or_variances, dtype=np.float64)
    if a.ndim == 2:
        if a.shape[0] < 2:
            raise ValueError("active_dims needs at least 2 points to estimate a variance")
        if not np.all(np.isfinite(a)):
            raise ValueError("codes contain NaN or inf values")
        variances = np.var(a, axis=0)
    elif a.ndim == 1:
        if not np.all(np.isfinite(a)) or np.any(a < 0):
            raise ValueError("variances must be finite and non-negative")
        variances = a
    else:
        raise ValueError(f"expected codes [N, D] or variances [D], got shape {a.shape}")
    return int(np.sum(variances > threshold))
