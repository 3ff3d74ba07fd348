"""β-VAE disentanglement score (Higgins et al. 2017, Sec. 3).

Port of disentanglement_lib ``evaluation/metrics/beta_vae.py``
(``compute_beta_vae_sklearn``).  One training point: draw a factor index k
uniformly, two batches of ``batch_size`` factor vectors whose k-th entries agree
pairwise, render and encode them; the feature is the mean over the batch of
``|z1 - z2|`` and the label is k.  A default ``LogisticRegression`` is trained on
``num_train`` points and scored on ``num_eval`` fresh points.

Vectorised: the pairs of many points are sampled, rendered and encoded together
(``chunk_size`` observations per ``represent`` call).  The random draws come in
a different order than in the reference, the statistics are the same.
"""

from __future__ import annotations

import warnings
from typing import Callable

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression

from ..data.base import GroundTruthData, as_random_state
from .utils import check_positive_int, represent_batched


def beta_vae_features(data: GroundTruthData, represent: Callable[[np.ndarray], np.ndarray],
                      num_points: int, batch_size: int, random_state,
                      chunk_size: int = 8192) -> tuple[np.ndarray, np.ndarray]:
    """Features ``[num_points, D]`` and labels ``[num_points]`` of the β-VAE score."""
    rs = as_random_state(random_state)
    num_points = check_positive_int(num_points, "num_points")
    batch_size = check_positive_int(batch_size, "batch_size")
    chunk_size = check_positive_int(chunk_size, "chunk_size")
    k_dim = data.num_factors
    per_chunk = max(1, chunk_size // (2 * batch_size))
    labels = np.empty(num_points, dtype=np.int64)
    feats = []
    for start in range(0, num_points, per_chunk):
        m = min(per_chunk, num_points - start)
        index = rs.randint(k_dim, size=m)
        f1 = data.sample_factors(m * batch_size, rs)
        f2 = data.sample_factors(m * batch_size, rs)
        rows = np.arange(m * batch_size)
        cols = np.repeat(index, batch_size)
        f2[rows, cols] = f1[rows, cols]
        obs = data.sample_observations_from_factors(np.concatenate([f1, f2], axis=0), rs)
        z = represent_batched(represent, obs, chunk_size)
        z1, z2 = z[: m * batch_size], z[m * batch_size:]
        feats.append(np.abs(z1 - z2).reshape(m, batch_size, -1).mean(axis=1))
        labels[start:start + m] = index
    return np.concatenate(feats, axis=0), labels


def beta_vae_score(data: GroundTruthData, represent: Callable[[np.ndarray], np.ndarray], random_state,
                   batch_size: int = 64, num_train: int = 10000, num_eval: int = 5000,
                   chunk_size: int = 8192) -> dict:
    """β-VAE score: ``{train_accuracy, eval_accuracy}`` of the factor-index classifier."""
    rs = as_random_state(random_state)
    x_train, y_train = beta_vae_features(data, represent, num_train, batch_size, rs, chunk_size)
    if np.unique(y_train).size < 2:
        raise ValueError("beta_vae_score: the training labels hold a single factor index; "
                         "use more factors or more training points")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = LogisticRegression(random_state=rs)
        model.fit(x_train, y_train)
    train_accuracy = float(np.mean(model.predict(x_train) == y_train))
    x_eval, y_eval = beta_vae_features(data, represent, num_eval, batch_size, rs, chunk_size)
    eval_accuracy = float(model.score(x_eval, y_eval))
    return {"train_accuracy": train_accuracy, "eval_accuracy": eval_accuracy}
