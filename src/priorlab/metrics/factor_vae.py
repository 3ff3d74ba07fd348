"""FactorVAE disentanglement score (Kim & Mnih 2018, Sec. 4).

Port of disentanglement_lib ``evaluation/metrics/factor_vae.py``.  Global
variances (ddof=1) of the codes of ``num_variance_estimate`` observations; dims
with std < ``prune_threshold`` are pruned (the reference's study configs use
0.05).  One vote: draw a factor index k, a batch of ``batch_size`` factor
vectors with the k-th entry fixed to that of the first vector, encode, and vote
for the active dim with the least ``local variance / global variance``.  The
classifier maps each dim to its majority factor; accuracy = majority votes /
all votes, on ``num_train`` votes (train) and ``num_eval`` fresh votes (eval).

Reference quirks kept: all dims pruned -> accuracies 0 and num_active_dims 0;
otherwise the reference reports ``num_active_dims = len(mask)``, i.e. the
total number of code dims, which is kept under that key; the actual number of
dims that survive pruning is returned as ``num_kept_dims``.  (The reference
also files a vote under the dim's index within the active subset rather than
in the full code; accuracies are invariant to that relabelling, and votes are
filed under the full index here.)

Vectorised: many batches are sampled, rendered and encoded together
(``chunk_size`` observations per ``represent`` call).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..data.base import GroundTruthData, as_random_state
from .utils import check_positive_int, represent_batched


def factor_vae_votes(data: GroundTruthData, represent: Callable[[np.ndarray], np.ndarray],
                     num_points: int, batch_size: int, random_state, global_variances: np.ndarray,
                     active: np.ndarray, chunk_size: int = 8192) -> np.ndarray:
    """Vote table ``int64 [K, D]``: ``votes[k, d]`` counts batches with fixed factor k won by dim d."""
    rs = as_random_state(random_state)
    num_points = check_positive_int(num_points, "num_points")
    batch_size = check_positive_int(batch_size, "batch_size", minimum=2)
    chunk_size = check_positive_int(chunk_size, "chunk_size")
    k_dim = data.num_factors
    active_idx = np.flatnonzero(active)
    votes = np.zeros((k_dim, global_variances.shape[0]), dtype=np.int64)
    per_chunk = max(1, chunk_size // batch_size)
    for start in range(0, num_points, per_chunk):
        m = min(per_chunk, num_points - start)
        index = rs.randint(k_dim, size=m)
        f = data.sample_factors(m * batch_size, rs).reshape(m, batch_size, k_dim)
        f[np.arange(m), :, index] = f[np.arange(m), 0, index][:, None]
        obs = data.sample_observations_from_factors(f.reshape(m * batch_size, k_dim), rs)
        z = represent_batched(represent, obs, chunk_size)
        if z.shape[1] != global_variances.shape[0]:
            raise ValueError("represent returned a different code dimension than for the global variances")
        local = np.var(z.reshape(m, batch_size, -1), axis=1, ddof=1)
        argmin = np.argmin(local[:, active_idx] / global_variances[active_idx], axis=1)
        np.add.at(votes, (index, active_idx[argmin]), 1)
    return votes


def factor_vae_score(data: GroundTruthData, represent: Callable[[np.ndarray], np.ndarray], random_state,
                     batch_size: int = 64, num_train: int = 10000, num_eval: int = 5000,
                     num_variance_estimate: int = 10000, prune_threshold: float = 0.05,
                     chunk_size: int = 8192) -> dict:
    """FactorVAE score: ``{train_accuracy, eval_accuracy, num_active_dims, num_kept_dims}``."""
    rs = as_random_state(random_state)
    num_variance_estimate = check_positive_int(num_variance_estimate, "num_variance_estimate", minimum=2)
    obs = data.sample_observations(num_variance_estimate, rs)
    global_variances = np.var(represent_batched(represent, obs, chunk_size), axis=0, ddof=1)
    active = np.sqrt(global_variances) >= prune_threshold
    if not active.any():
        return {"train_accuracy": 0.0, "eval_accuracy": 0.0, "num_active_dims": 0, "num_kept_dims": 0}
    train_votes = factor_vae_votes(data, represent, num_train, batch_size, rs, global_variances,
                                   active, chunk_size)
    classifier = np.argmax(train_votes, axis=0)
    cols = np.arange(train_votes.shape[1])
    train_accuracy = train_votes[classifier, cols].sum() / train_votes.sum()
    eval_votes = factor_vae_votes(data, represent, num_eval, batch_size, rs, global_variances,
                                  active, chunk_size)
    eval_accuracy = eval_votes[classifier, cols].sum() / eval_votes.sum()
    return {"train_accuracy": float(train_accuracy), "eval_accuracy": float(eval_accuracy),
            "num_active_dims": int(active.shape[0]), "num_kept_dims": int(active.sum())}
