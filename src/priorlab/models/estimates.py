"""Model-side evaluation: test ELBO terms and the importance-weighted bound.

    log p(x) >= L_k = E[log (1/k) Σ_i p(x, z_i) / q(z_i | x)],  z_i ~ q(z | x)
(Burda et al. 2016, eq. 8); L_1 is the ELBO and L_k increases with k towards
log p(x).  Computed with a numerically stable log-mean-exp.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from priorlab.device import model_device


def log_mean_exp(a: torch.Tensor, dim: int = 0) -> torch.Tensor:
    """log(mean(exp(a))) along ``dim``, stable for large |a|."""
    return torch.logsumexp(a, dim=dim) - math.log(a.shape[dim])


@torch.no_grad()
def iw_log_likelihood(model, x: torch.Tensor, k: int, chunk: int = 50) -> torch.Tensor:
    """Importance-weighted estimate L_k of log p(x) per observation (shape ``[batch]``).

    Uses the model's posterior as proposal and ``p.log_prob`` of its prior;
    the ``k`` samples are drawn in chunks to bound memory.  A draw the proposal scores ``-inf`` is one
    it cannot make, produced by float rounding (a spike-and-slab slab draw that lands on exactly 0 is
    scored by the atom, which q gives no mass when its γ rounds to 1): its weight is 0, not the NaN of
    ``-inf - -inf`` (every other weight unchanged, bit for bit).
    """
    if k < 1:
        raise ValueError(f"iw samples k must be >= 1, got {k}")
    q = model.posterior(x)
    p = model.prior_distribution(x)
    log_w = []
    for start in range(0, k, chunk):
        n = min(chunk, k - start)
        z = q.sample((n,))  # [n, B, D]
        flat = z.reshape(-1, z.shape[-1])
        x_rep = x.unsqueeze(0).expand(n, *x.shape).reshape(-1, *x.shape[1:])
        log_px_z = model.likelihood.log_prob(x_rep, model.decode(flat)).view(n, -1)
        log_q = q.log_prob(z)
        log_w.append(torch.where(torch.isneginf(log_q), -math.inf, log_px_z + p.log_prob(z) - log_q))
    return log_mean_exp(torch.cat(log_w, 0), dim=0)


@torch.no_grad()
def evaluate_elbo(model, x: torch.Tensor, k: int, batch_size: int = 250) -> dict[str, float]:
    """Test ELBO, its reconstruction / KL terms and L_k, averaged over ``x`` (nats per observation).

    Runs where the model is (batches of ``x`` are moved there); the per-batch sums are added up in
    float64 on that device and read back once at the end, which gives exactly the numbers of adding
    each batch's sum to a Python float."""
    device = model_device(model)
    keys = ("elbo", "log_lik", "kl", "iw_log_likelihood")
    sums = torch.zeros(len(keys), dtype=torch.float64, device=device)
    for start in range(0, len(x), batch_size):
        xb = x[start : start + batch_size].to(device)
        terms = model.terms(xb)
        batch = (terms.elbo.sum(), terms.log_lik.sum(), terms.kl.sum(), iw_log_likelihood(model, xb, k).sum())
        for i, value in enumerate(batch):
            sums[i] += value.to(torch.float64)
    return {key: v / len(x) for key, v in zip(keys, sums.tolist())}


@torch.no_grad()
def encode_means(model, x: torch.Tensor, batch_size: int = 500) -> np.ndarray:
    """Posterior means of ``x`` as a float64 numpy array ``[N, D]`` (encoded where the model is)."""
    device = model_device(model)
    out = [model.represent(x[s : s + batch_size].to(device)).cpu() for s in range(0, len(x), batch_size)]
    return torch.cat(out).double().numpy()
