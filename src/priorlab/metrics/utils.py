"""Input checks and small helpers shared by the metrics.

The public metrics take codes ``[N, D]`` and factors ``[N, K]`` (one row per
data point).  disentanglement_lib stores the transposes (``[D, N]``,
``[K, N]``); every port here transposes internally where that matters.
"""

from __future__ import annotations

from typing import Callable

import numpy as np


def check_codes(codes, name: str = "codes", min_dims: int = 1) -> np.ndarray:
    """Return ``codes`` as a finite float64 array ``[N, D]`` or raise ``ValueError``."""
    arr = np.asarray(codes)
    if arr.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array [num_points, num_dims], got shape {arr.shape}")
    if not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
        raise ValueError(f"{name} must be numeric, got dtype {arr.dtype}")
    arr = arr.astype(np.float64, copy=False)
    if arr.shape[0] < 2:
        raise ValueError(f"{name} needs at least 2 points, got {arr.shape[0]}")
    if arr.shape[1] < min_dims:
        raise ValueError(f"{name} needs at least {min_dims} dimension(s), got {arr.shape[1]}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or inf values")
    return arr


def check_factors(factors, num_points: int | None = None, name: str = "factors") -> np.ndarray:
    """Return ``factors`` as an array ``[N, K]`` (labels, any numeric dtype) or raise ``ValueError``."""
    arr = np.asarray(factors)
    if arr.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array [num_points, num_factors], got shape {arr.shape}")
    if not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
        raise ValueError(f"{name} must be numeric, got dtype {arr.dtype}")
    if arr.shape[1] < 1:
        raise ValueError(f"{name} has no factor columns")
    if np.issubdtype(arr.dtype, np.floating) and not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or inf values")
    if num_points is not None and arr.shape[0] != num_points:
        raise ValueError(f"{name} has {arr.shape[0]} points but the codes have {num_points}")
    return arr


def check_pair(codes, factors, codes_name: str = "codes", factors_name: str = "factors",
               min_dims: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Check codes ``[N, D]`` and factors ``[N, K]`` together (same N)."""
    c = check_codes(codes, codes_name, min_dims=min_dims)
    f = check_factors(factors, c.shape[0], factors_name)
    return c, f


def check_train_test(codes_train, factors_train, codes_test, factors_test, min_dims: int = 1):
    """Check a train/test split: same code dimension and same number of factors."""
    ctr, ftr = check_pair(codes_train, factors_train, "codes_train", "factors_train", min_dims)
    cte, fte = check_pair(codes_test, factors_test, "codes_test", "factors_test", min_dims)
    if ctr.shape[1] != cte.shape[1]:
        raise ValueError(f"codes_train has {ctr.shape[1]} dims but codes_test has {cte.shape[1]}")
    if ftr.shape[1] != fte.shape[1]:
        raise ValueError(f"factors_train has {ftr.shape[1]} factors but factors_test has {fte.shape[1]}")
    return ctr, ftr, cte, fte


def require_two_values(factors: np.ndarray, name: str = "factors") -> None:
    """Raise ``ValueError`` naming every factor column that takes a single value."""
    single = [k for k in range(factors.shape[1]) if np.unique(factors[:, k]).size < 2]
    if single:
        raise ValueError(f"{name}: factor(s) {single} take a single value (zero entropy / one class)")


def check_positive_int(value, name: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or int(value) != value or int(value) < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def represent_batched(represent: Callable[[np.ndarray], np.ndarray], observations: np.ndarray,
                      chunk_size: int) -> np.ndarray:
    """Apply ``represent`` to ``observations`` in chunks of ``chunk_size``; check the output.

    Returns float64 codes ``[n, D]``; raises ``ValueError`` on a wrong shape or NaN/inf.
    """
    n = observations.shape[0]
    parts = []
    for start in range(0, n, chunk_size):
        part = np.asarray(represent(observations[start:start + chunk_size]))
        expected = min(chunk_size, n - start)
        if part.ndim != 2 or part.shape[0] != expected:
            raise ValueError(f"represent must return codes [n, D]; got shape {part.shape} for {expected} observations")
        parts.append(part.astype(np.float64, copy=False))
    out = np.concatenate(parts, axis=0)
    if not np.all(np.isfinite(out)):
        raise ValueError("represent returned NaN or inf codes")
    return out
