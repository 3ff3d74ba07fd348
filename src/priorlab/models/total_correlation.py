"""Minibatch estimators of the beta-TCVAE KL decomposition (Chen et al. 2018).

Chen, Li, Grosse & Duvenaud (2018), "Isolating Sources of Disentanglement in VAEs":
``E_x KL(q(z|x) || p(z)) = I(x; z) + TC(z) + sum_j KL(q(z_j) || p(z_j))`` with per-sample terms

* index-code MI:      ``log q(z|x) - log q(z)``
* total correlation:  ``log q(z) - sum_j log q(z_j)``
* dimension-wise KL:  ``sum_j log q(z_j) - log p(z)``

``q(z)`` and ``q(z_j)`` (aggregate posteriors over a data set of N points) are estimated from a
minibatch of B encodings, using the matrix ``log q(z_i | n_k)`` of every sample under every
posterior of the batch:

* ``"mws"`` (minibatch-weighted sampling, the paper's sec. 4.1 and the released code's default,
  ``--mss`` off): ``log q(z_i) ~= logsumexp_k log q(z_i|n_k) - log(B N)``.  This estimator is
  biased: each estimated log-density is too low, by ``log N`` when all posteriors are equal and
  by ``log B`` when they are disjoint, so the TC estimate is too high by ``(D - 1) log N`` resp.
  ``(D - 1) log B`` in these limits (a constant in each, hence harmless for gradients there; in
  between it varies).  With ``dataset_size == B`` it is exactly ``TC(batch mixture) + (D - 1) log B``.
  Do not read MWS values as nats of TC.
* ``"mss"`` (minibatch-stratified sampling, the paper's appendix): for sample i the weights are
  ``1/N`` on its own posterior, ``(N - M)/(N M)`` on one other element (here ``(i + 1) mod B``)
  and ``1/M`` on the remaining ``M - 1``, with ``M = B - 1``.  Each row sums to 1, so the estimate
  of ``q(z)`` is unbiased over random minibatches.  The released code's weight matrix
  (``_log_importance_weight_matrix``) strides by ``B`` instead of ``B + 1`` and so fills columns,
  not the diagonal (rtqichen/beta-tcvae PR #1); this module builds the intended matrix.
"""

from __future__ import annotations

import math
from typing import Literal

import torch

__all__ = ["log_density_gaussian", "log_importance_weight_matrix", "mws_decomposition"]

_LOG_2PI = math.log(2.0 * math.pi)


def log_density_gaussian(z: torch.Tensor, mu: torch.Tensor, logvar: torch.Tensor) -> torch.Tensor:
    """Elementwise (broadcasting) ``log N(z; mu, exp(logvar))``."""
    return -0.5 * (_LOG_2PI + logvar + (z - mu).pow(2) * torch.exp(-logvar))


def log_importance_weight_matrix(
    batch_size: int, dataset_size: int, dtype: torch.dtype = torch.float32, device=None
) -> torch.Tensor:
    """Log of the MSS weights ``[B, B]``: row i holds the weights for estimating ``q(z_i)``.

    ``W[i, i] = 1/N``, ``W[i, (i+1) mod B] = (N - M)/(N M)``, other entries ``1/M``, ``M = B - 1``.
    """
    _check_sizes(batch_size, dataset_size)
    if batch_size < 2:
        raise ValueError(f"MSS needs batch_size >= 2, got {batch_size}")
    n, m = float(dataset_size), float(batch_size - 1)
    w = torch.full((batch_size, batch_size), 1.0 / m, dtype=torch.float64, device=device)
    idx = torch.arange(batch_size, device=device)
    w[idx, (idx + 1) % batch_size] = (n - m) / (n * m)
    w[idx, idx] = 1.0 / n
    return w.log().to(dtype)


def mws_decomposition(
    z: torch.Tensor,
    mu: torch.Tensor,
    logvar: torch.Tensor,
    dataset_size: int,
    *,
    estimator: Literal["mws", "mss"] = "mws",
    log_pz: torch.Tensor | None = None,
) -> dict[str, torch.Tensor]:
    """Per-sample beta-TCVAE estimates for a minibatch with Gaussian posteriors.

    ``z``, ``mu``, ``logvar``: ``[B, D]``, ``z[i]`` drawn from ``N(mu[i], exp(logvar[i]))``.
    ``log_pz``: ``[B]`` prior log-density of ``z``; standard normal when ``None``.
    Returns ``[B]`` tensors: ``log_qz_given_x``, ``log_qz``, ``log_prod_qzj``, ``log_pz`` and the
    terms ``mutual_info``, ``total_correlation``, ``dimwise_kl`` (which sum to
    ``log_qz_given_x - log_pz``).  Average over the batch for the objective's expectations.
    """
    if z.dim() != 2:
        raise ValueError(f"z must be [B, D], got shape {tuple(z.shape)}")
    for name, t in (("mu", mu), ("logvar", logvar)):
        if t.shape != z.shape:
            raise ValueError(f"{name} must have the shape of z {tuple(z.shape)}, got {tuple(t.shape)}")
    batch_size = z.shape[0]
    _check_sizes(batch_size, dataset_size)

    # mat[i, k, d] = log q(z_i,d | n_k)
    mat = log_density_gaussian(z[:, None, :], mu[None, :, :], logvar[None, :, :])
    log_qz_given_x = torch.diagonal(mat, dim1=0, dim2=1).sum(0)  # diagonal -> [D, B]

    if estimator == "mws":
        log_norm = math.log(batch_size * dataset_size)
        log_qz = torch.logsumexp(mat.sum(2), dim=1) - log_norm
        log_prod_qzj = (torch.logsumexp(mat, dim=1) - log_norm).sum(1)
    elif estimator == "mss":
        log_w = log_importance_weight_matrix(batch_size, dataset_size, dtype=z.dtype, device=z.device)
        log_qz = torch.logsumexp(log_w + mat.sum(2), dim=1)
        log_prod_qzj = torch.logsumexp(log_w[:, :, None] + mat, dim=1).sum(1)
    else:
        raise ValueError(f"estimator must be 'mws' or 'mss', got {estimator!r}")

    if log_pz is None:
        log_pz = log_density_gaussian(z, torch.zeros_like(z), torch.zeros_like(z)).sum(1)
    elif log_pz.shape != (batch_size,):
        raise ValueError(f"log_pz must have shape [B] = ({batch_size},), got {tuple(log_pz.shape)}")

    return {
        "log_qz_given_x": log_qz_given_x,
        "log_qz": log_qz,
        "log_prod_qzj": log_prod_qzj,
        "log_pz": log_pz,
        "mutual_info": log_qz_given_x - log_qz,
        "total_correlation": log_qz - log_prod_qzj,
        "dimwise_kl": log_prod_qzj - log_pz,
    }


def _check_sizes(batch_size: int, dataset_size: int) -> None:
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    if int(dataset_size) != dataset_size or dataset_size < batch_size:
        raise ValueError(
            f"dataset_size must be an integer >= the batch size {batch_size}, got {dataset_size!r}"
        )
