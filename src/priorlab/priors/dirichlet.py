"""Dirichlet helpers over the last axis, with an optional mask for padded components.

Paper 001 (section 2.2) places Dirichlet(c0) hyperpriors on the mixing weights
and approximates them with Dirichlet(c) factors.  The Dirichlet is an
exponential family with sufficient statistics log pi_k and natural parameters
c_k - 1.  ``mask`` (bool, same shape as c, True = real component) lets factors
with different numbers of components share one padded tensor: masked entries
are ignored in every sum and get zero probability.
"""

from __future__ import annotations

import torch
from torch import Tensor

from priorlab.priors.normal_gamma import sample_log_standard_gamma


def _full_mask(c: Tensor, mask: Tensor | None) -> Tensor:
    if mask is None:
        return torch.ones_like(c, dtype=torch.bool)
    if mask.shape != c.shape[-mask.dim():]:
        raise ValueError(f"mask shape {tuple(mask.shape)} does not match pseudo-counts {tuple(c.shape)}")
    return mask.expand_as(c)


def mean_to_natural(c: Tensor) -> Tensor:
    """Natural parameters c - 1 (sufficient statistics log pi)."""
    return c - 1.0


def natural_to_mean(natural: Tensor) -> Tensor:
    """Pseudo-counts c = eta + 1."""
    return natural + 1.0


def expected_log_pi(c: Tensor, mask: Tensor | None = None) -> Tensor:
    """E[log pi_k] = psi(c_k) - psi(sum_k' c_k') (below eq. 6); masked entries get -inf."""
    full = _full_mask(c, mask)
    c_safe = torch.where(full, c, torch.ones_like(c))
    total = (c_safe * full).sum(-1, keepdim=True)
    out = torch.digamma(c_safe) - torch.digamma(total)
    return torch.where(full, out, torch.full_like(out, float("-inf")))


def expected_pi(c: Tensor, mask: Tensor | None = None) -> Tensor:
    """E[pi_k] = c_k / sum_k' c_k' (zero at masked entries)."""
    full = _full_mask(c, mask)
    c_m = torch.where(full, c, torch.zeros_like(c))
    return c_m / c_m.sum(-1, keepdim=True)


def kl_divergence(c_q: Tensor, c_p: Tensor, mask: Tensor | None = None) -> Tensor:
    """KL(Dir(c_q) || Dir(c_p)) over the last axis.

    = lgamma(sum c_q) - sum lgamma(c_q) - lgamma(sum c_p) + sum lgamma(c_p)
      + sum (c_q - c_p)(psi(c_q) - psi(sum c_q)).
    """
    c_q, c_p = torch.broadcast_tensors(c_q, c_p)
    full = _full_mask(c_q, mask)
    one = torch.ones_like(c_q)
    cq = torch.where(full, c_q, one)
    cp = torch.where(full, c_p, one)
    zero = torch.zeros_like(c_q)
    sq = torch.where(full, cq, zero).sum(-1)
    sp = torch.where(full, cp, zero).sum(-1)
    per = -torch.lgamma(cq) + torch.lgamma(cp) + (cq - cp) * (torch.digamma(cq) - torch.digamma(sq).unsqueeze(-1))
    return torch.lgamma(sq) - torch.lgamma(sp) + torch.where(full, per, zero).sum(-1)


def log_prob(pi: Tensor, c: Tensor) -> Tensor:
    """log Dir(pi; c) over the last axis (no mask)."""
    return torch.lgamma(c.sum(-1)) - torch.lgamma(c).sum(-1) + ((c - 1.0) * torch.log(pi)).sum(-1)


def sample(c: Tensor, sample_shape: tuple[int, ...], generator: torch.Generator, mask: Tensor | None = None) -> Tensor:
    """Dirichlet draws via normalised Gamma(c_k, 1) variables, computed in log space."""
    full = _full_mask(c, mask)
    shape = tuple(sample_shape) + tuple(c.shape)
    c_safe = torch.where(full, c, torch.ones_like(c)).expand(shape)
    log_g = sample_log_standard_gamma(c_safe, generator)
    log_g = torch.where(full.expand(shape), log_g, torch.full_like(log_g, float("-inf")))
    return torch.softmax(log_g, dim=-1)
