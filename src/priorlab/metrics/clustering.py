"""Unsupervised clustering accuracy with the best cluster-to-label matching.

As in DEC (Xie et al. 2016) and the mixture-prior VAE literature: the confusion
matrix of clusters vs labels is matched one-to-one with the Hungarian algorithm
(``scipy.optimize.linear_sum_assignment``, rectangular when the numbers
differ); unmatched clusters count as errors.  ``many_to_one=True`` instead maps
every cluster to its majority label (the usual choice when there are many more
clusters than classes; off by default).
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import linear_sum_assignment


def cluster_accuracy(labels, assignments, many_to_one: bool = False) -> float:
    """Accuracy of ``assignments [N]`` (cluster ids) against ``labels [N]`` after matching."""
    y = np.asarray(labels)
    c = np.asarray(assignments)
    if y.ndim != 1 or c.ndim != 1:
        raise ValueError(f"labels and assignments must be 1-D, got shapes {y.shape} and {c.shape}")
    if y.shape[0] != c.shape[0]:
        raise ValueError(f"labels has {y.shape[0]} points but assignments has {c.shape[0]}")
    if y.shape[0] == 0:
        raise ValueError("cluster_accuracy needs at least one point")
    for arr, name in ((y, "labels"), (c, "assignments")):
        if np.issubdtype(arr.dtype, np.floating) and not np.all(np.isfinite(arr)):
            raise ValueError(f"{name} contains NaN or inf values")
    _, yi = np.unique(y, return_inverse=True)
    _, ci = np.unique(c, return_inverse=True)
    yi, ci = yi.reshape(-1), ci.reshape(-1)
    confusion = np.zeros((ci.max() + 1, yi.max() + 1), dtype=np.int64)
    np.add.at(confusion, (ci, yi), 1)
    if many_to_one:
        correct = confusion.max(axis=1).sum()
    else:
        rows, cols = linear_sum_assignment(confusion, maximize=True)
        correct = confusion[rows, cols].sum()
    return float(correct / y.shape[0])
