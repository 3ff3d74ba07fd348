"""Support recovery: F1 of an estimated sparse loading matrix against the true support.

Used for the Sparse VAE (Moran et al. 2022) synthetic benchmark: an entry is
"in the estimated support" when ``|w_est| > threshold`` and in the true
support when ``w_true != 0``.  ``F1 = 2 TP / (2 TP + FP + FN)``.
"""

from __future__ import annotations

import numpy as np


def support_f1(w_est, w_true, threshold: float) -> float:
    """F1 of the binarised ``|w_est| > threshold`` against ``w_true != 0`` (same shape)."""
    e = np.asarray(w_est, dtype=np.float64)
    t = np.asarray(w_true, dtype=np.float64)
    if e.shape != t.shape:
        raise ValueError(f"w_est has shape {e.shape} but w_true has {t.shape}")
    if e.size == 0:
        raise ValueError("empty loading matrices")
    if not (np.all(np.isfinite(e)) and np.all(np.isfinite(t))):
        raise ValueError("w_est / w_true contain NaN or inf values")
    if not np.isfinite(threshold) or threshold < 0:
        raise ValueError(f"threshold must be finite and >= 0, got {threshold!r}")
    est = np.abs(e) > threshold
    true = t != 0
    if not true.any():
        raise ValueError("w_true has an empty support; F1 is undefined")
    tp = np.sum(est & true)
    fp = np.sum(est & ~true)
    fn = np.sum(~est & true)
    return float(2 * tp / (2 * tp + fp + fn))
