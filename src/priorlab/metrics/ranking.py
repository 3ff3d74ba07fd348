"""Top-k ranking metrics of VAE-CF (Liang et al. 2018, "Variational Autoencoders for
Collaborative Filtering", Sec. 4.2; their ``Recall_at_k_batch`` / ``NDCG_binary_at_k_batch``).

For user u with held-out set I_u and ranked list ω(1..k) (items by decreasing score):
Recall@k = Σ_r 1[ω(r) ∈ I_u] / min(k, |I_u|);
DCG@k = Σ_r 1[ω(r) ∈ I_u] / log2(r + 1), NDCG@k = DCG@k / Σ_{r=1}^{min(k,|I_u|)} 1/log2(r + 1).
Both are averaged over the users with at least one held-out item.  As in the
reference, items to exclude (the user's training items) must be masked out of
the scores, e.g. via ``exclude`` (set to -inf).  Ties are broken arbitrarily
(``np.argpartition``), as in the reference.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def _prepare(scores, heldout, k, exclude):
    s = np.array(scores, dtype=np.float64)
    if s.ndim != 2:
        raise ValueError(f"scores must be 2-D [num_users, num_items], got shape {s.shape}")
    if np.any(np.isnan(s)) or np.any(s == np.inf):
        raise ValueError("scores contain NaN or +inf values")
    h = heldout.toarray() if sp.issparse(heldout) else np.asarray(heldout)
    if h.shape != s.shape:
        raise ValueError(f"heldout has shape {h.shape} but scores has {s.shape}")
    h = h > 0
    if isinstance(k, bool) or int(k) != k or not 1 <= int(k) <= s.shape[1]:
        raise ValueError(f"k must be an integer in [1, num_items={s.shape[1]}], got {k!r}")
    k = int(k)
    if exclude is not None:
        e = exclude.toarray() if sp.issparse(exclude) else np.asarray(exclude)
        if e.shape != s.shape:
            raise ValueError(f"exclude has shape {e.shape} but scores has {s.shape}")
        e = e > 0
        if np.any(e & h):
            raise ValueError("exclude and heldout overlap")
        s[e] = -np.inf
    n_heldout = h.sum(axis=1)
    users = np.flatnonzero(n_heldout > 0)
    if users.size == 0:
        raise ValueError("no user has a held-out item")
    s, h, n_heldout = s[users], h[users], n_heldout[users]
    rows = np.arange(s.shape[0])[:, None]
    part = np.argpartition(-s, k - 1, axis=1)[:, :k]
    order = np.argsort(-s[rows, part], axis=1, kind="stable")
    topk = part[rows, order]
    return h[rows, topk], n_heldout, k


def recall_at_k(scores, heldout, k: int, exclude=None) -> float:
    """Mean Recall@k over users with held-out items (denominator ``min(k, |I_u|)``)."""
    hits, n_heldout, k = _prepare(scores, heldout, k, exclude)
    return float(np.mean(hits.sum(axis=1) / np.minimum(k, n_heldout)))


def ndcg_at_k(scores, heldout, k: int, exclude=None) -> float:
    """Mean NDCG@k (binary relevance, log2 discount) over users with held-out items."""
    hits, n_heldout, k = _prepare(scores, heldout, k, exclude)
    discount = 1.0 / np.log2(np.arange(2, k + 2))
    dcg = (hits * discount).sum(axis=1)
    idcg = np.cumsum(discount)[np.minimum(k, n_heldout) - 1]
    return float(np.mean(dcg / idcg))
