"""Presence-aware MIG and DCI for data whose factors exist only on part of the points.

On Smiley (paper 002) a source value has no effect on the image when its attribute group is
absent, so scoring it on every point asks a code to predict something invisible.  The
presence-aware factors are the 4 group presence flags (scored on all points) and the 18 binned
sources, source ``j`` scored only on the points where its group is present:

* MIG: the per-factor gap of :func:`priorlab.metrics.mig`, factor ``k`` on its points
  ``mask[:, k]``, averaged over factors;
* DCI: one classifier per factor trained and tested on its points, the importance matrix
  ``[D, K]`` of their importances; disentanglement and completeness as in
  :func:`priorlab.metrics.dci`, informativeness the mean test accuracy.
"""

from __future__ import annotations

import numpy as np
from joblib import Parallel, delayed

from ..data.smiley import source_presence
from .dci import completeness, disentanglement, importance_matrix
from .mig import mig


def presence_aware_factors(presence: np.ndarray, source_bins: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Factors ``[N, 22]`` (4 flags, 18 bins) and the mask ``[N, 22]`` of points each is scored on."""
    p = np.asarray(presence, dtype=bool)
    bins = np.asarray(source_bins)
    if p.ndim != 2 or p.shape[1] != 4 or bins.shape != (p.shape[0], 18):
        raise ValueError(f"need presence [N, 4] and source_bins [N, 18], got {p.shape}, {bins.shape}")
    factors = np.concatenate([p.astype(np.int64), bins.astype(np.int64)], axis=1)
    mask = np.concatenate([np.ones_like(p), source_presence(p)], axis=1)
    return factors, mask


def presence_aware_mig(codes: np.ndarray, factors: np.ndarray, mask: np.ndarray, n_bins: int = 20) -> dict:
    """Mean over factors of the MIG gap, factor ``k`` scored on the points ``mask[:, k]``."""
    per = []
    for k in range(factors.shape[1]):
        m = mask[:, k]
        per.append(mig(codes[m], factors[m][:, [k]], n_bins=n_bins, details=True)["per_factor"][0])
    per = np.asarray(per, dtype=np.float64)
    return {"mig": float(per.mean()), "per_factor": per.tolist()}


def presence_aware_dci(codes_train, factors_train, mask_train, codes_test, factors_test, mask_test,
                       random_state: int = 0, backend: str = "hist", n_jobs: int = 1) -> dict:
    """DCI with one classifier per factor trained / tested on the points where it is scored
    (factor ``k``'s classifier seeded ``random_state + k``; ``n_jobs`` factors in parallel processes)."""
    args = [(codes_train[mask_train[:, k]], factors_train[mask_train[:, k]][:, [k]], codes_test[mask_test[:, k]],
             factors_test[mask_test[:, k]][:, [k]], random_state + k, backend) for k in range(factors_train.shape[1])]
    if n_jobs == 1:
        fits = [importance_matrix(*a) for a in args]
    else:
        fits = Parallel(n_jobs=n_jobs)(delayed(importance_matrix)(*a) for a in args)
    r = np.stack([imp[:, 0] for imp, _, _ in fits], axis=1)
    return {"disentanglement": disentanglement(r), "completeness": completeness(r),
            "informativeness_test": float(np.mean([test_acc for _, _, test_acc in fits])), "backend": backend}
