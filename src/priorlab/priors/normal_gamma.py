"""Univariate Normal-Gamma distributions, element-wise over tensors.

The Normal-Gamma of paper 001 (Paquet et al., "A Factorial Mixture Prior for
Compositional Deep Generative Models", section 2.2 and appendix B) is

    q(mu, alpha) = N(mu; m, (s alpha)^-1) Gamma(alpha; a, b)      (b is a rate)

with mean parameters (m, s, a, b).  Its exponential-family form (eq. 12) has
sufficient statistics t = [log alpha, alpha, alpha mu, alpha mu^2] and natural
parameters

    lambda = [a - 1/2, -(b + s m^2 / 2), s m, -s / 2].

Every function here broadcasts over arbitrary leading shapes; natural
parameters are stored with a trailing axis of length 4.  Random draws take an
explicit ``torch.Generator`` (torch's own Gamma sampler does not accept one,
hence the Marsaglia-Tsang sampler below).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch import Tensor

from priorlab.device import value_checks_enabled

_LOG_2PI = math.log(2.0 * math.pi)


class NormalGammaParams(NamedTuple):
    """Mean parameters (m, s, a, b) of N(mu; m, (s alpha)^-1) Gamma(alpha; a, b)."""

    m: Tensor
    s: Tensor
    a: Tensor
    b: Tensor


class NormalGammaMoments(NamedTuple):
    """Expected sufficient statistics E[log alpha], E[alpha], E[alpha mu], E[alpha mu^2]."""

    log_alpha: Tensor
    alpha: Tensor
    alpha_mu: Tensor
    alpha_mu2: Tensor


def _check_positive(name: str, x: Tensor) -> None:
    """Raise unless ``x > 0`` everywhere (skipped inside ``priorlab.device.deferred_value_checks``)."""
    if value_checks_enabled() and not bool(torch.all(x > 0)):
        raise ValueError(f"Normal-Gamma parameter {name} must be positive everywhere")


def as_params(m, s, a, b, dtype: torch.dtype | None = None) -> NormalGammaParams:
    """Build broadcast ``NormalGammaParams`` from numbers or tensors, validating s, a, b > 0."""
    dtype = dtype or torch.get_default_dtype()
    tensors = torch.broadcast_tensors(*(torch.as_tensor(x, dtype=dtype) for x in (m, s, a, b)))
    params = NormalGammaParams(*tensors)
    for name in ("s", "a", "b"):
        _check_positive(name, getattr(params, name))
    return params


def mean_to_natural(params: NormalGammaParams) -> Tensor:
    """Natural parameters of eq. 12, stacked on a trailing axis of length 4."""
    m, s, a, b = params
    return torch.stack([a - 0.5, -(b + 0.5 * s * m * m), s * m, -0.5 * s], dim=-1)


def natural_to_mean(natural: Tensor, validate: bool = True) -> NormalGammaParams:
    """Invert eq. 12: s = -2 l4, m = l3 / s, a = l1 + 1/2, b = -l2 - s m^2 / 2."""
    if natural.shape[-1] != 4:
        raise ValueError(f"Normal-Gamma natural parameters need a trailing axis of 4, got {tuple(natural.shape)}")
    l1, l2, l3, l4 = natural.unbind(-1)
    s = -2.0 * l4
    m = l3 / s
    a = l1 + 0.5
    b = -l2 - 0.5 * s * m * m
    params = NormalGammaParams(m, s, a, b)
    if validate:
        for name in ("s", "a", "b"):
            _check_positive(name, getattr(params, name))
    return params


def log_partition(natural: Tensor) -> Tensor:
    """A(lambda) with log q = lambda . t - A(lambda): lgamma(a) - a log b - log(s)/2 + log(2 pi)/2."""
    m, s, a, b = natural_to_mean(natural, validate=False)
    return torch.lgamma(a) - a * torch.log(b) - 0.5 * torch.log(s) + 0.5 * _LOG_2PI


def expected_stats(params: NormalGammaParams) -> NormalGammaMoments:
    """E_q[t] (appendix C.1): psi(a) - log b, a/b, m a/b, 1/s + m^2 a/b."""
    m, s, a, b = params
    e_alpha = a / b
    return NormalGammaMoments(
        log_alpha=torch.digamma(a) - torch.log(b),
        alpha=e_alpha,
        alpha_mu=m * e_alpha,
        alpha_mu2=1.0 / s + m * m * e_alpha,
    )


def log_prob(mu: Tensor, alpha: Tensor, params: NormalGammaParams) -> Tensor:
    """log N(mu; m, (s alpha)^-1) + log Gamma(alpha; a, b), element-wise."""
    m, s, a, b = params
    log_gamma = a * torch.log(b) - torch.lgamma(a) + (a - 1.0) * torch.log(alpha) - b * alpha
    log_normal = 0.5 * (torch.log(s * alpha) - _LOG_2PI - s * alpha * (mu - m) ** 2)
    return log_gamma + log_normal


def kl_divergence(q: NormalGammaParams, p: NormalGammaParams) -> Tensor:
    """KL(q || p) between Normal-Gammas, element-wise (corrected appendix C.1).

    KL = 1/2 [ s_p (a_q/b_q) (m_q - m_p)^2 + s_p/s_q - log(s_p/s_q) - 1 ]
         + a_p log(b_q/b_p) - lgamma(a_q) + lgamma(a_p)
         + (a_q - a_p) psi(a_q) - (b_q - b_p) a_q/b_q.

    The paper prints psi(a_q) - psi(a_p) where lgamma(a_q) - lgamma(a_p) belongs,
    and b_a for b_q.
    """
    mq, sq, aq, bq = q
    mp, sp, ap, bp = p
    e_alpha = aq / bq
    normal_part = 0.5 * (sp * e_alpha * (mq - mp) ** 2 + sp / sq - torch.log(sp / sq) - 1.0)
    gamma_part = (
        ap * torch.log(bq / bp)
        - torch.lgamma(aq)
        + torch.lgamma(ap)
        + (aq - ap) * torch.digamma(aq)
        - (bq - bp) * e_alpha
    )
    return normal_part + gamma_part


def expected_log_normal(z_mean: Tensor, z_var: Tensor, params: NormalGammaParams) -> Tensor:
    """E_{N(z; z_mean, z_var)} E_q[log N(z; mu, 1/alpha)] per dimension (eq. 6 summand).

    = 1/2 [ psi(a) - log b - log(2 pi) - 1/s - (a/b)((z_mean - m)^2 + z_var) ].
    """
    m, s, a, b = params
    return 0.5 * (
        torch.digamma(a) - torch.log(b) - _LOG_2PI - 1.0 / s - (a / b) * ((z_mean - m) ** 2 + z_var)
    )


def sample_log_standard_gamma(shape_param: Tensor, generator: torch.Generator) -> Tensor:
    """log of Gamma(shape_param, 1) draws (Marsaglia & Tsang 2000, boosted for shape < 1).

    Returned in log space so that tiny shapes (e.g. a0 = 0.01, whose draws
    underflow) stay usable.  Vectorised rejection: every round redraws only the
    still-rejected entries (acceptance > 95 %).
    """
    if generator is None:
        raise ValueError("generator must be an explicit torch.Generator")
    alpha = torch.as_tensor(shape_param)
    if not alpha.is_floating_point():
        alpha = alpha.to(torch.get_default_dtype())
    if not bool(torch.all(alpha > 0)):
        raise ValueError("Gamma shape parameters must be positive")
    flat = alpha.reshape(-1).contiguous()
    boost = flat < 1.0
    a_eff = torch.where(boost, flat + 1.0, flat)
    d = a_eff - 1.0 / 3.0
    c = 1.0 / torch.sqrt(9.0 * d)
    log_v_out = torch.empty_like(flat)
    kw = dict(dtype=flat.dtype, device=flat.device, generator=generator)
    idx = torch.arange(flat.numel(), device=flat.device)
    while idx.numel() > 0:
        d_p, c_p = d[idx], c[idx]
        x = torch.randn(idx.shape, **kw)
        u = torch.rand(idx.shape, **kw)
        t = 1.0 + c_p * x
        ok = t > 0
        log_v = 3.0 * torch.log(torch.where(ok, t, torch.ones_like(t)))
        accept = ok & (torch.log(u) < 0.5 * x * x + d_p - d_p * torch.exp(log_v) + d_p * log_v)
        log_v_out[idx[accept]] = log_v[accept]
        idx = idx[~accept]
    log_g = torch.log(d) + log_v_out
    if bool(boost.any()):
        u = torch.rand(flat.shape, **kw)
        log_g = torch.where(boost, log_g + torch.log(u) / flat, log_g)
    return log_g.reshape(alpha.shape)


def sample(params: NormalGammaParams, sample_shape: tuple[int, ...], generator: torch.Generator) -> tuple[Tensor, Tensor]:
    """Draw (mu, alpha) from q: alpha ~ Gamma(a, b), mu | alpha ~ N(m, (s alpha)^-1)."""
    m, s, a, b = params
    shape = tuple(sample_shape) + tuple(a.shape)
    log_alpha = sample_log_standard_gamma(a.expand(shape), generator) - torch.log(b)
    alpha = torch.exp(log_alpha)
    eps = torch.randn(shape, dtype=m.dtype, device=m.device, generator=generator)
    mu = m + eps * torch.exp(-0.5 * (torch.log(s) + log_alpha))
    return mu, alpha


def student_t_predictive(params: NormalGammaParams) -> tuple[Tensor, Tensor, Tensor]:
    """(df, loc, scale) of int N(z; mu, 1/alpha) q(mu, alpha) dmu dalpha (eq. 10).

    Marginalising mu gives N(z; m, (1 + 1/s)/alpha); marginalising alpha gives a
    Student-t with 2a degrees of freedom, location m and squared scale
    b (s + 1) / (a s) -- eq. 10's second argument is this squared scale.
    """
    m, s, a, b = params
    return 2.0 * a, m, torch.sqrt(b * (s + 1.0) / (a * s))


def student_t_log_prob(x: Tensor, df: Tensor, loc: Tensor, scale: Tensor) -> Tensor:
    """log density of the location-scale Student-t, element-wise."""
    y = (x - loc) / scale
    return (
        torch.lgamma(0.5 * (df + 1.0))
        - torch.lgamma(0.5 * df)
        - 0.5 * torch.log(df * math.pi)
        - torch.log(scale)
        - 0.5 * (df + 1.0) * torch.log1p(y * y / df)
    )


def sample_student_t(df: Tensor, loc: Tensor, scale: Tensor, generator: torch.Generator) -> Tensor:
    """One Student-t draw per element: loc + scale * eps * sqrt((df/2) / G), G ~ Gamma(df/2, 1)."""
    df, loc, scale = torch.broadcast_tensors(df, loc, scale)
    half = 0.5 * df
    log_g = sample_log_standard_gamma(half, generator)
    eps = torch.randn(loc.shape, dtype=loc.dtype, device=loc.device, generator=generator)
    return loc + scale * eps * torch.exp(0.5 * (torch.log(half) - log_g))
