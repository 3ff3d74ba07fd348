"""The bars benchmark for (max-rule) sparse coding (paper 000; Földiák 1990, Lücke & Sahani 2008).

An ``R x R`` grid, ``H = 2R`` generating bars (``h < R``: horizontal bar in row ``h``; ``h ≥ R``:
vertical bar in column ``h - R``), flattened row-major to ``D = R²`` pixels; ``W[:, h]`` is the
0/1 indicator of bar ``h``.  Each bar is present independently with probability ``p`` (default
``2/H``, two bars per image on average).  A present bar has intensity ``s_h`` drawn from the slab
``N(mu, sigma_pr²)`` (default ``mu = 1``, ``sigma_pr = 0.25``: intensities vary enough that the max
rule's occlusion is visible, while a negative draw — invisible under the max — has probability
``Φ(-4) ≈ 3e-5``) or fixed to 1 (``intensity="fixed"``).  Absent bars have ``s_h = 0``.  Bars combine
by ``y = max_h W_dh s_h`` (``rule="max"``, occlusion, the model's eq. 10 with zeros included) or
``y = W s`` (``rule="sum"``, the linear variant), plus Gaussian noise of std ``noise_std``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import linear_sum_assignment

from priorlab.data.base import as_random_state

DEFAULT_RECOVERY_THRESHOLD = 0.9


@dataclass
class BarsData:
    """``Y`` float32 [N, R²], true latents ``S`` [N, H] (0 = absent), true ``W`` [R², H]."""

    Y: np.ndarray
    S: np.ndarray
    W: np.ndarray


def bar_matrix(R: int = 5) -> np.ndarray:
    """``W_true`` [R², 2R]: column h < R is row h, column R + c is column c (row-major pixels)."""
    if int(R) != R or R < 2:
        raise ValueError(f"R must be an integer >= 2, got {R}")
    R = int(R)
    W = np.zeros((R, R, 2 * R))
    for i in range(R):
        W[i, :, i] = 1.0
        W[:, i, R + i] = 1.0
    return W.reshape(R * R, 2 * R)


def make_bars(n: int, R: int = 5, *, p: float | None = None, intensity: str = "slab", mu: float = 1.0,
              sigma_pr: float = 0.25, rule: str = "max", noise_std: float = 0.05, random_state=None) -> BarsData:
    """``n`` bars images (module docstring).  ``random_state``: a seed or ``np.random.RandomState``
    (required).  Draw order: presence [n, H], intensities [n, H], noise [n, R²]."""
    if int(n) != n or n < 1:
        raise ValueError(f"n must be a positive integer, got {n}")
    W = bar_matrix(R)
    H = W.shape[1]
    p = 2.0 / H if p is None else float(p)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"p must lie in [0, 1], got {p}")
    if intensity not in ("slab", "fixed"):
        raise ValueError(f"intensity must be 'slab' or 'fixed', got {intensity!r}")
    if rule not in ("max", "sum"):
        raise ValueError(f"rule must be 'max' or 'sum', got {rule!r}")
    if noise_std < 0 or sigma_pr < 0:
        raise ValueError("noise_std and sigma_pr must be >= 0")
    rs = as_random_state(random_state)
    present = rs.random_sample((int(n), H)) < p
    values = mu + sigma_pr * rs.standard_normal((int(n), H)) if intensity == "slab" else np.ones((int(n), H))
    S = np.where(present, values, 0.0)
    clean = (S[:, None, :] * W[None]).max(-1) if rule == "max" else S @ W.T
    Y = clean + noise_std * rs.standard_normal(clean.shape)
    return BarsData(Y.astype(np.float32), S, W)


def column_correlation(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """Pearson correlation [H_A, H_B] between the columns of A and B (constant columns → 0)."""
    A = A - A.mean(0)
    B = B - B.mean(0)
    na, nb = np.linalg.norm(A, axis=0), np.linalg.norm(B, axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        C = (A.T @ B) / np.outer(na, nb)
    return np.nan_to_num(C, nan=0.0, posinf=0.0, neginf=0.0)


def bars_recovery(W_learned, W_true, threshold: float = DEFAULT_RECOVERY_THRESHOLD) -> dict:
    """Match learned to true bars one-to-one (Hungarian, ``linear_sum_assignment`` maximising the
    Pearson correlation between columns over pixels) and report the recovery.

    Returns ``{"correlations": [H_true] matched correlation of each true bar, "assignment": [H_true]
    learned column of each true bar, "n_recovered", "fraction", "recovered": all ≥ threshold}``.

    Default threshold 0.9: distinct true bars have correlation ≤ 0 with each other (a horizontal and
    a vertical bar share one pixel: exactly 0; two parallel bars: ``-1/(R-1)``), and a column that
    merges two bars has correlation ``sqrt((R-2)/(2(R-1)))`` (0.61 for R = 5, 0.5 for R = 3) with
    either, so 0.9 separates "one clean bar" from mixtures, while a bar with mild noise or slight
    intensity ripples stays above it.  ``W_learned`` may have more columns than ``W_true``.
    """
    Wl, Wt = np.asarray(W_learned, dtype=np.float64), np.asarray(W_true, dtype=np.float64)
    if Wl.ndim != 2 or Wt.ndim != 2 or Wl.shape[0] != Wt.shape[0]:
        raise ValueError(f"need [D, H] matrices with equal D, got {Wl.shape} and {Wt.shape}")
    if Wl.shape[1] < Wt.shape[1]:
        raise ValueError(f"W_learned has {Wl.shape[1]} columns, fewer than the {Wt.shape[1]} true bars")
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"threshold must lie in (0, 1], got {threshold}")
    C = column_correlation(Wt, Wl)  # [H_true, H_learned]
    rows, cols = linear_sum_assignment(-C)
    corr = C[rows, cols]
    ok = corr >= threshold
    return {"correlations": corr, "assignment": cols, "n_recovered": int(ok.sum()),
            "fraction": float(ok.mean()), "recovered": bool(ok.all())}
