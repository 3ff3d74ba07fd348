"""Mutual Information Gap (Chen et al. 2018, "Isolating Sources of Disentanglement in VAEs").

Port of disentanglement_lib ``evaluation/metrics/mig.py``: discretise each code
dimension into ``n_bins`` equal-width bins, mutual information with every
factor (nats), sort over codes, and average over factors
``(I_top1 - I_top2) / H(factor)``.
"""

from __future__ import annotations

import numpy as np

from .discretise import discretised_codes, factor_entropy, mutual_information
from .utils import check_pair, require_two_values


def mig(codes, factors, n_bins: int = 20, details: bool = False, discretised=None):
    """MIG of ``codes [N, D]`` against integer ``factors [N, K]``.

    ``discretised`` (optional) is a precomputed label array ``[N, D]`` (e.g.
    :func:`discretise` output, shared with modularity); ``codes`` are then only
    checked, not rebinned.  Returns the float score, or with ``details=True`` a
    dict ``{mig, per_factor, mutual_information [D, K], entropy [K]}``.
    Raises ``ValueError`` for fewer than 2 code dims or a single-valued factor
    (the entropy normaliser would be 0).
    """
    x, f = check_pair(codes, factors)
    if x.shape[1] < 2:
        raise ValueError("MIG needs at least 2 code dimensions (it takes the gap between the top two)")
    require_two_values(f)
    z = discretised_codes(x, n_bins, discretised, "codes")
    m = mutual_information(z, f)
    entropy = factor_entropy(f)
    sorted_m = np.sort(m, axis=0)[::-1]
    per_factor = (sorted_m[0, :] - sorted_m[1, :]) / entropy
    score = float(np.mean(per_factor))
    if details:
        return {"mig": score, "per_factor": per_factor, "mutual_information": m, "entropy": entropy}
    return score
