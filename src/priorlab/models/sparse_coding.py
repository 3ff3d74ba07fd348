"""Spike-and-slab sparse coding with the max rule (paper 000) and its linear baseline, trained by
sampling-based EM (E-step: preselection + Gibbs sampling; M-step: seed supplement S1, eq. 5-11).

Generative model (seed eq. 10), ``h = 1..H``, ``d = 1..D``::

    s_h ~ (1 - π) δ_0 + π N(μ_pr, σ²_pr)
    y_d ~ N(ȳ_d(s), σ²),   ȳ_d(s) = max_h W_dh s_h      (rule "max")
                           ȳ_d(s) = Σ_h  W_dh s_h      (rule "linear", baseline)

**Max-rule convention.**  The max runs over *all* ``H`` products ``W_dh s_h``; an inactive latent
(``s_h = 0``) contributes the value ``0`` to the max.  Hence ``ȳ_d = max(0, max_{h active} W_dh s_h)``
whenever at least one latent is inactive, and negative products (negative slab values or negative
weights) are occluded by the zeros.  Only when all ``H`` latents are active can ``ȳ_d`` be negative.
Latents that are not preselected are clamped at ``s_h = 0`` and therefore also contribute ``0``.
The sampler (:func:`conditional_pieces`), :func:`log_joint` and :func:`m_step` all use exactly this
``ȳ`` (:func:`mean_output`).

**Densities.**  ``log_joint`` is the log density w.r.t. the product of the measures
``δ_0 + Lebesgue`` per latent: an inactive entry contributes ``log(1 - π)``, an active one
``log π + log N(s_h; μ_pr, σ²_pr)`` (an exact slab value of 0 counts as inactive).

**Annealing.**  A temperature ``T ≥ 1`` tempers the *likelihood* only: the E-step samples
``q_T(s) ∝ p(s) p(y | s)^{1/T}`` (equivalently, noise variance ``T σ²``); ``T = 1`` is the exact
posterior.  Tempering the whole joint ``(p(s) p(y|s))^{1/T}`` is ill-defined for a prior with an
atom at 0, hence this form.

The 1-D Gibbs conditional under the max rule (derivation; implemented in :func:`conditional_pieces`)::

    Fix s_\\h and let m_d = max_{h' ≠ h} W_dh' s_h'  (-inf if H = 1).
    Spike:   ȳ_d = max(m_d, 0),  mass  (1 - π) exp(-Σ_d (y_d - max(m_d, 0))² / 2τ),  τ = T σ².
    Slab:    ȳ_d(x) = max(m_d, W_dh x).  For W_dh > 0 latent h wins pixel d iff x > t_d = m_d / W_dh,
             for W_dh < 0 iff x < t_d; for W_dh = 0 never (ȳ_d = max(m_d, 0)).  The sorted t_d cut
             the real line into ≤ D + 1 intervals on each of which the winning set A is fixed, and
             the unnormalised conditional is  π N(x; μ_pr, σ²_pr) exp(-[Σ_{d∈A}(y_d - W_dh x)²
             + Σ_{d∉A}(y_d - m_d)²] / 2τ)  =  exp(-λ x²/2 + η x + κ),  with
             λ = 1/σ²_pr + Σ_A W_dh²/τ,   η = μ_pr/σ²_pr + Σ_A W_dh y_d/τ.
             The mass of interval (a, b) is
             exp(κ + η²/2λ) sqrt(2π/λ) [Φ(√λ(b - η/λ)) - Φ(√λ(a - η/λ))]
             (log-ndtr difference, computed stably), i.e. the slab part of the conditional is a
             mixture of truncated Gaussians N(η/λ, 1/λ) on the intervals.
    Sampling: pick spike or one interval by Gumbel-max on the log masses, then draw the truncated
             normal by inverse CDF in log space (:func:`_truncated_std_normal`).
    Linear rule: one interval (-inf, inf) with A = all pixels and m_d replaced by the residual of
             the other causes; the conditional is spike + one Gaussian.

The M-step W update of the max rule (seed eq. 11, derived in :func:`m_step`)::

    W_dh = Σ_n Σ_k δ_dnk(h) s_hnk y_dn / Σ_n Σ_k δ_dnk(h) s_hnk²,

``δ_dnk(h) = 1`` iff ``s_hnk ≠ 0`` and ``h`` attains ``max_h' W_dh' s_h'nk`` under the current W.
The seed's eq. 9 prints ``Σ_n s^(n) w^(n)`` in the numerator: it must be ``Σ_n s^(n) y^(n)``.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import torch
from torch import Tensor

RULES = ("max", "linear")
_LOG_2PI = math.log(2.0 * math.pi)
_STATE_KEYS = ("W", "sigma2", "pi", "mu_pr", "var_pr")


def _check_rule(rule: str) -> str:
    if rule not in RULES:
        raise ValueError(f"rule must be one of {RULES}, got {rule!r}")
    return rule


# --------------------------------------------------------------------------- parameters


@dataclass
class SparseCodingParams:
    """Model parameters Θ = (W [D, H], σ², π, μ_pr, σ²_pr); scalars are 0-d tensors of W's dtype."""

    W: Tensor
    sigma2: Tensor
    pi: Tensor
    mu_pr: Tensor
    var_pr: Tensor

    def __post_init__(self) -> None:
        if not isinstance(self.W, Tensor) or self.W.ndim != 2 or not self.W.is_floating_point():
            raise ValueError(f"W must be a floating [D, H] tensor, got {getattr(self.W, 'shape', type(self.W))}")
        for name in _STATE_KEYS[1:]:
            value = torch.as_tensor(getattr(self, name), dtype=self.W.dtype, device=self.W.device).reshape(())
            setattr(self, name, value)
        if not torch.isfinite(self.W).all():
            raise ValueError("W must be finite")
        if not (self.sigma2 > 0 and self.var_pr > 0):
            raise ValueError(f"sigma2 and var_pr must be > 0, got {float(self.sigma2)}, {float(self.var_pr)}")
        if not (0 < self.pi < 1):
            raise ValueError(f"pi must lie in (0, 1), got {float(self.pi)}")
        if not torch.isfinite(self.mu_pr):
            raise ValueError("mu_pr must be finite")

    @property
    def D(self) -> int:
        return self.W.shape[0]

    @property
    def H(self) -> int:
        return self.W.shape[1]

    def clone(self) -> "SparseCodingParams":
        return SparseCodingParams(*(getattr(self, k).clone() for k in _STATE_KEYS))

    def as_dict(self) -> dict[str, Tensor]:
        return {k: getattr(self, k) for k in _STATE_KEYS}


def init_params(y: Tensor, H: int, generator: torch.Generator, *, pi: float | None = None,
                mu_pr: float = 1.0, var_pr: float = 1.0, noise: float = 0.25) -> SparseCodingParams:
    """Data-driven initial Θ: ``W_dh = mean_n y_dn + noise · std_n y_dn · |ε_dh|`` (positive, the
    MCA-style initialisation around the data mean), ``σ² = mean_d var_n y_dn``, ``π = 1/H`` unless
    given, slab ``N(mu_pr, var_pr)``."""
    y = _as_data(y)
    if H < 1:
        raise ValueError(f"H must be >= 1, got {H}")
    mean, std = y.mean(0), y.std(0, unbiased=False)
    eps = torch.randn(y.shape[1], H, generator=generator, dtype=y.dtype)
    W = mean[:, None] + noise * std[:, None] * eps.abs()
    sigma2 = y.var(0, unbiased=False).mean().clamp_min(1e-6)
    return SparseCodingParams(W, sigma2, 1.0 / H if pi is None else pi, mu_pr, var_pr)


def _as_data(y) -> Tensor:
    y = torch.as_tensor(y)
    if y.ndim != 2 or y.shape[0] < 1:
        raise ValueError(f"y must be [N, D] with N >= 1, got shape {tuple(y.shape)}")
    if not y.is_floating_point():
        y = y.double()
    if not torch.isfinite(y).all():
        raise ValueError("y must be finite")
    return y


def _check_data(y, params: SparseCodingParams) -> Tensor:
    y = _as_data(y).to(params.W.dtype)
    if y.shape[1] != params.D:
        raise ValueError(f"y has D = {y.shape[1]} pixels but W has D = {params.D}")
    return y


# --------------------------------------------------------------------------- model densities


def mean_output(s: Tensor, W: Tensor, rule: str) -> Tensor:
    """``ȳ(s)`` [..., D] for ``s`` [..., H]: ``max_h W_dh s_h`` (eq. 10, zeros included) or ``W s``."""
    _check_rule(rule)
    if s.shape[-1] != W.shape[1]:
        raise ValueError(f"s has H = {s.shape[-1]} latents but W has H = {W.shape[1]}")
    if rule == "max":
        return (s.unsqueeze(-2) * W).amax(-1)
    return s @ W.T


def log_likelihood(y: Tensor, s: Tensor, params: SparseCodingParams, rule: str) -> Tensor:
    """``log p(y | s, Θ)`` for ``y`` [N, D] and ``s`` [N, H] or [N, K, H] → [N] or [N, K]."""
    y = _check_data(y, params)
    s = s.to(params.W.dtype)
    if s.ndim not in (2, 3) or s.shape[0] != y.shape[0]:
        raise ValueError(f"s must be [N, H] or [N, K, H] with N = {y.shape[0]}, got {tuple(s.shape)}")
    yy = y if s.ndim == 2 else y[:, None, :]
    r2 = (yy - mean_output(s, params.W, rule)).square().sum(-1)
    return -0.5 * r2 / params.sigma2 - 0.5 * params.D * (_LOG_2PI + params.sigma2.log())


def log_prior(s: Tensor, params: SparseCodingParams) -> Tensor:
    """``log p(s | Θ)`` summed over latents (w.r.t. ``δ_0 + Lebesgue`` per latent)."""
    s = s.to(params.W.dtype)
    active = s != 0
    slab = params.pi.log() - 0.5 * (_LOG_2PI + params.var_pr.log()) - 0.5 * (s - params.mu_pr).square() / params.var_pr
    return torch.where(active, slab, torch.log1p(-params.pi)).sum(-1)


def log_joint(y: Tensor, s: Tensor, params: SparseCodingParams, rule: str) -> Tensor:
    """``log p(y, s | Θ)`` per data point (and sample): [N] for ``s`` [N, H], [N, K] for [N, K, H]."""
    return log_likelihood(y, s, params, rule) + log_prior(s, params)


# --------------------------------------------------------------------------- 1-D conditional


def _log1mexp(x: Tensor) -> Tensor:
    """``log(1 - e^x)`` for ``x ≤ 0`` (Mächler's switch at -log 2)."""
    return torch.where(x > -math.log(2.0), torch.log(-torch.expm1(x)), torch.log1p(-torch.exp(x)))


def _log_ndtr_diff(a: Tensor, b: Tensor) -> Tensor:
    """``log(Φ(b) - Φ(a))`` for ``a ≤ b``, stable in both tails (uses ``Φ(b) - Φ(a) = Φ(-a) - Φ(-b)``)."""
    flip = a > 0
    lo, hi = torch.where(flip, -b, a), torch.where(flip, -a, b)
    la, lb = torch.special.log_ndtr(lo), torch.special.log_ndtr(hi)
    return lb + _log1mexp(la - lb)


def _ndtri_exp(lp: Tensor) -> Tensor:
    """``Φ^{-1}(exp(lp))``; below ``lp = -600`` (where ``exp`` would underflow) from the asymptotic
    ``log Φ(z) ≈ -z²/2 - log(-z) - log(2π)/2`` refined by Newton steps on ``log Φ``."""
    deep = lp < -600.0
    z = torch.special.ndtri(torch.exp(torch.where(deep, torch.zeros_like(lp), lp)))
    if deep.any():
        L = lp[deep]
        z0 = -torch.sqrt(-2.0 * L)
        zd = -torch.sqrt((-2.0 * L - 2.0 * torch.log(-z0) - _LOG_2PI).clamp_min(1.0))
        for _ in range(4):
            lz = torch.special.log_ndtr(zd)
            zd = zd - (lz - L) / torch.exp(-0.5 * zd.square() - 0.5 * _LOG_2PI - lz)
        z = z.masked_scatter(deep, zd)
    return z


def _truncated_std_normal(a: Tensor, b: Tensor, u: Tensor) -> Tensor:
    """Inverse-CDF draw of ``N(0, 1)`` truncated to ``[a, b]`` from uniforms ``u``.  Intervals in the
    upper tail are mirrored so the CDF is always evaluated in the lower tail, in log space:
    ``log p = log Φ(b) + log(u + (1 - u) Φ(a)/Φ(b))``."""
    flip = a > 0
    lo, hi = torch.where(flip, -b, a), torch.where(flip, -a, b)
    la, lb = torch.special.log_ndtr(lo), torch.special.log_ndtr(hi)
    lp = lb + torch.log(u + (1.0 - u) * torch.exp(la - lb))
    z = torch.minimum(torch.maximum(_ndtri_exp(lp), lo), hi)
    return torch.where(flip, -z, z)


@dataclass
class Pieces:
    """The 1-D conditional ``p(s_h | s_\\h, y)`` as weighted pieces [B, P]: piece 0 is the spike
    (``log_mass`` only), pieces 1.. are the slab's truncated Gaussians ``N(mean, 1/prec)`` on
    ``[lower, upper]``; ``log_mass`` is the unnormalised log mass (``-inf`` for empty intervals)."""

    log_mass: Tensor
    lower: Tensor
    upper: Tensor
    mean: Tensor
    prec: Tensor

    def spike_prob(self) -> Tensor:
        return torch.softmax(self.log_mass, -1)[..., 0]

    def slab_cdf(self, x: Tensor) -> Tensor:
        """Normalised ``P(s_h ≤ x, s_h ≠ 0)`` (x [B] or scalar) — for tests and diagnostics."""
        w = torch.softmax(self.log_mass, -1)[..., 1:]
        x = torch.as_tensor(x, dtype=w.dtype).expand(w.shape[:-1])[..., None]
        lo, up, m, r = self.lower[..., 1:], self.upper[..., 1:], self.mean[..., 1:], self.prec[..., 1:].sqrt()
        x_c = torch.minimum(torch.maximum(x, lo), up)
        num = torch.exp(_log_ndtr_diff(r * (lo - m), r * (x_c - m)) - _log_ndtr_diff(r * (lo - m), r * (up - m)))
        frac = torch.where(x_c > lo, num, torch.zeros_like(num))
        return (w * torch.nan_to_num(frac, nan=0.0)).sum(-1)


def _gaussian_pieces(S_ww: Tensor, S_wy: Tensor, const: Tensor, lower: Tensor, upper: Tensor,
                     params: SparseCodingParams, tau: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Log mass, mean, precision of ``π N(x; μ_pr, σ²_pr) exp(-(const - 2x S_wy + x² S_ww)/2τ)``
    integrated over ``[lower, upper]``."""
    mu, var = params.mu_pr, params.var_pr
    prec = 1.0 / var + S_ww / tau
    eta = mu / var + S_wy / tau
    mean = eta / prec
    root = prec.sqrt()
    empty = ~(upper > lower)
    diff = _log_ndtr_diff(torch.where(empty, 0.0, root * (lower - mean)),
                          torch.where(empty, 1.0, root * (upper - mean)))
    log_mass = (params.pi.log() - 0.5 * (_LOG_2PI + var.log()) - 0.5 * mu * mu / var - 0.5 * const / tau
                + 0.5 * eta * eta / prec + 0.5 * (_LOG_2PI - prec.log()) + diff)
    return torch.where(empty, -math.inf, log_mass), mean, prec


def conditional_pieces(y: Tensor, w: Tensor, other: Tensor, params: SparseCodingParams, rule: str,
                       temperature: float = 1.0) -> Pieces:
    """Exact 1-D conditional of one latent ``s_h`` given the others (derivation: module docstring).

    ``y`` [B, D]; ``w`` [B, D] the column ``W_{:,h}`` of each row's latent; ``other`` [B, D]:
    rule "max": ``m_d = max_{h'≠h} W_dh' s_h'`` (``-inf`` when there is no other latent);
    rule "linear": ``Σ_{h'≠h} W_dh' s_h'``.  Computed in float64.
    """
    _check_rule(rule)
    if not (y.shape == w.shape == other.shape and y.ndim == 2):
        raise ValueError(f"y, w, other must share a [B, D] shape, got {y.shape}, {w.shape}, {other.shape}")
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    f64 = torch.float64
    p = SparseCodingParams(*(t.to(f64) for t in params.as_dict().values()))
    y, w, other = y.to(f64), w.to(f64), other.to(f64)
    tau = p.sigma2 * temperature
    B, D = y.shape
    if rule == "linear":
        e = y - other
        const = e.square().sum(-1, keepdim=True)
        inf = torch.full((B, 1), math.inf, dtype=f64)
        log_slab, mean, prec = _gaussian_pieces(w.square().sum(-1, keepdim=True), (w * e).sum(-1, keepdim=True),
                                                const, -inf, inf, p, tau)
        lower, upper = -inf, inf
        r_spike = const[:, 0]
    else:
        m = other
        nz = w != 0
        t = torch.where(nz, m / torch.where(nz, w, 1.0), math.inf)  # breakpoints W_dh x = m_d
        c = torch.where(nz, m, m.clamp_min(0.0))  # ȳ_d while h does not win pixel d
        r0 = torch.where(torch.isfinite(c), (y - c).square(), 0.0)  # c = -inf: pixel never loses (H = 1)
        r_spike = (y - m.clamp_min(0.0)).square().sum(-1)
        t_sorted, order = t.sort(-1)
        ws, ys, r0s = w.gather(1, order), y.gather(1, order), r0.gather(1, order)
        stats = torch.stack([ws.square(), ws * ys, ys.square() - r0s], -1)  # [B, D, 3]
        zero = stats.new_zeros(B, 1, 3)
        cum_pos = torch.cat([zero, (stats * (ws > 0)[..., None]).cumsum(1)], 1)  # rank < j, W > 0
        cum_neg = torch.cat([zero, (stats * (ws < 0)[..., None]).cumsum(1)], 1)
        S = cum_pos + (cum_neg[:, -1:] - cum_neg)  # + rank >= j, W < 0   → [B, D + 1, 3]
        ninf = torch.full((B, 1), -math.inf, dtype=f64)
        lower, upper = torch.cat([ninf, t_sorted], 1), torch.cat([t_sorted, -ninf], 1)
        const = r0.sum(-1, keepdim=True) + S[..., 2]
        log_slab, mean, prec = _gaussian_pieces(S[..., 0], S[..., 1], const, lower, upper, p, tau)
    log_spike = torch.log1p(-p.pi) - 0.5 * r_spike / tau
    zeros = torch.zeros(B, 1, dtype=f64)
    return Pieces(torch.cat([log_spike[:, None], log_slab], 1), torch.cat([zeros, lower], 1),
                  torch.cat([zeros, upper], 1), torch.cat([zeros, mean], 1), torch.cat([zeros + 1.0, prec], 1))


def sample_pieces(pieces: Pieces, generator: torch.Generator) -> Tensor:
    """One draw per row: a piece by Gumbel-max on the log masses, then the truncated normal."""
    lm = pieces.log_mass
    u = torch.rand(lm.shape, generator=generator, dtype=lm.dtype).clamp(1e-300, 1.0 - 2**-53)
    k = (lm - torch.log(-torch.log(u))).argmax(-1, keepdim=True)
    lo, up, m, prec = (x.gather(1, k)[:, 0] for x in (pieces.lower, pieces.upper, pieces.mean, pieces.prec))
    root = prec.sqrt()
    v = torch.rand(lm.shape[0], generator=generator, dtype=lm.dtype).clamp(1e-300, 1.0 - 2**-53)
    x = m + _truncated_std_normal(root * (lo - m), root * (up - m), v) / root
    return torch.where(k[:, 0] == 0, torch.zeros_like(x), x)


def _other_causes(s: Tensor, W: Tensor, h: Tensor, rule: str) -> Tensor:
    """``other`` for :func:`conditional_pieces`: rows ``s`` [B, H], latent index ``h`` [B]."""
    contrib = s[:, None, :] * W  # [B, D, H]
    if rule == "linear":
        return contrib.sum(-1) - contrib.gather(2, h[:, None, None].expand(-1, W.shape[0], 1))[..., 0]
    return contrib.scatter(2, h[:, None, None].expand(-1, W.shape[0], 1), -math.inf).amax(-1)


def sample_conditional(y: Tensor, s: Tensor, h: Tensor, params: SparseCodingParams, rule: str,
                       generator: torch.Generator, temperature: float = 1.0) -> Tensor:
    """Draw ``s_h ~ p(s_h | s_\\h, y)`` (tempered likelihood) for rows ``y`` [B, D], ``s`` [B, H],
    per-row latent ``h`` [B] (long); returns the new values [B] (``s`` is not modified)."""
    w = params.W.T[h]
    pieces = conditional_pieces(y, w, _other_causes(s, params.W, h, rule), params, rule, temperature)
    return sample_pieces(pieces, generator).to(s.dtype)


# --------------------------------------------------------------------------- E-step


def selection_scores(y: Tensor, params: SparseCodingParams, rule: str) -> Tensor:
    """Preselection function ``S_h(y)`` [N, H]: the exact log posterior odds of ``s_h ≠ 0`` when every
    other latent is off, ``log ∫ p(y, s_h = x, s_\\h = 0) dx - log p(y, s = 0)``.

    Why this one: it is the select-and-sample choice of scoring singleton states by their joint
    probability (here integrated over the slab, so the slab prior and σ² enter), it uses the model's
    own rule (under the max rule the other latents at 0 occlude negative contributions, exactly as in
    the Gibbs sampler), and it costs one :func:`conditional_pieces` evaluation per (n, h).  In the
    low-noise limit it ranks latents by how well a scaled ``W_h`` alone fits ``y``, i.e. like the
    normalised overlap ``W_h·y / |W_h|`` of the original ET work, but without its scale heuristics.
    """
    y = _check_data(y, params)
    N, D = y.shape
    H = params.H
    w = params.W.T.repeat(N, 1)  # row n*H + h → W[:, h]
    yr = y.repeat_interleave(H, 0)
    other = torch.zeros_like(yr) if (rule == "linear" or H > 1) else torch.full_like(yr, -math.inf)
    lm = conditional_pieces(yr, w, other, params, rule).log_mass
    return (torch.logsumexp(lm[:, 1:], -1) - lm[:, 0]).reshape(N, H).to(params.W.dtype)


def preselect(y: Tensor, params: SparseCodingParams, rule: str, n_candidates: int) -> Tensor:
    """Indices [N, H'] of the ``H'`` latents with the highest :func:`selection_scores`, ascending."""
    if not 1 <= n_candidates <= params.H:
        raise ValueError(f"n_candidates must be in [1, H = {params.H}], got {n_candidates}")
    if n_candidates == params.H:
        return torch.arange(params.H).expand(_as_data(y).shape[0], -1).clone()
    return selection_scores(y, params, rule).topk(n_candidates, -1).indices.sort(-1).values


def gibbs_e_step(y: Tensor, params: SparseCodingParams, rule: str, candidates: Tensor, generator: torch.Generator, *,
                 n_chains: int = 4, burn_in: int = 20, samples_per_chain: int = 5, thin: int = 1,
                 temperature: float = 1.0, init: str = "prior") -> Tensor:
    """Posterior samples [N, K, H], ``K = n_chains · samples_per_chain``, of ``q_T(s | y)`` restricted to
    ``s_h = 0`` off the candidates [N, H'].  Systematic-scan Gibbs over the candidates with the exact
    1-D conditionals; chains start from the prior on the candidates (``init="prior"``) or all-zero
    (``"zeros"``); after ``burn_in`` sweeps every ``thin``-th sweep is kept.  All chains of all data
    points run vectorised."""
    _check_rule(rule)
    y = _check_data(y, params)
    N, H = y.shape[0], params.H
    if candidates.ndim != 2 or candidates.shape[0] != N or candidates.dtype != torch.long:
        raise ValueError(f"candidates must be a long tensor [N = {N}, H'], "
                         f"got {candidates.dtype} {tuple(candidates.shape)}")
    if candidates.numel() and (candidates.min() < 0 or candidates.max() >= H):
        raise ValueError("candidate index out of range")
    if min(n_chains, samples_per_chain, thin) < 1 or burn_in < 0:
        raise ValueError("n_chains, samples_per_chain, thin must be >= 1 and burn_in >= 0")
    if init not in ("prior", "zeros"):
        raise ValueError(f"init must be 'prior' or 'zeros', got {init!r}")
    C, Hc = n_chains, candidates.shape[1]
    B = N * C
    yb = y.repeat_interleave(C, 0)
    cand = candidates.repeat_interleave(C, 0)
    rows = torch.arange(B)
    s = torch.zeros(B, H, dtype=y.dtype)
    if init == "prior" and Hc:
        active = torch.rand(B, Hc, generator=generator, dtype=y.dtype) < params.pi
        values = params.mu_pr + params.var_pr.sqrt() * torch.randn(B, Hc, generator=generator, dtype=y.dtype)
        s.scatter_(1, cand, torch.where(active, values, torch.zeros_like(values)))
    kept = []
    for sweep in range(burn_in + samples_per_chain * thin):
        for j in range(Hc):
            h = cand[:, j]
            s[rows, h] = sample_conditional(yb, s, h, params, rule, generator, temperature)
        if sweep >= burn_in and (sweep - burn_in) % thin == thin - 1:
            kept.append(s.clone())
    return torch.stack(kept, 1).reshape(N, C * samples_per_chain, H)


# --------------------------------------------------------------------------- M-step


def max_causes(s: Tensor, W: Tensor) -> Tensor:
    """``δ_dnk(h)`` [..., D, H] for samples ``s`` [..., H]: ``h`` attains ``max_h' W_dh' s_h'`` and is
    active.  Ties (e.g. noise-free data with equal intensities) credit every tied active cause."""
    contrib = s.unsqueeze(-2) * W
    return (contrib == contrib.amax(-1, keepdim=True)) & (s != 0).unsqueeze(-2)


_STEP_SIZES = (1.0, 0.5, 0.25, 0.125, 0.0625, 0.0)


def _row_objective(y: Tensor, samples: Tensor, W: Tensor) -> Tensor:
    """Exact max-rule sample objective per pixel: ``Σ_{n,k} (y_dn - max_h W_dh s_hnk)²`` → [D]."""
    return (y[:, None, :] - mean_output(samples, W, "max")).square().sum((0, 1))


def _safeguarded_rows(y: Tensor, samples: Tensor, W_old: Tensor, W_new: Tensor) -> Tensor:
    """Per pixel row ``d``, the step ``W_old + α (W_new - W_old)``, ``α ∈ {1, 1/2, ..., 1/16, 0}``,
    with the lowest exact objective (ties → the largest α): the eq. 11 value whenever its frozen
    argmax pattern is good enough, never an increase of the exact objective (a generalised EM step)."""
    best_W, best_J = W_old, _row_objective(y, samples, W_old)
    for alpha in _STEP_SIZES[-2::-1]:  # smallest first, so a tie keeps the largest α
        W_a = W_old + alpha * (W_new - W_old)
        J = _row_objective(y, samples, W_a)
        better = J <= best_J
        best_W = torch.where(better[:, None], W_a, best_W)
        best_J = torch.where(better, J, best_J)
    return best_W


def m_step(y: Tensor, samples: Tensor, params: SparseCodingParams, rule: str, *, min_var: float = 1e-6,
           min_pi: float = 1e-6, safeguard: bool = True, nonnegative: bool = False) -> SparseCodingParams:
    """New Θ from posterior samples ``samples`` [N, K, H] (each sample weighted 1/K, eq. 4).

    W, rule "max" (seed eq. 11).  ``E_q log p(y|s)`` = ``-1/2σ² Σ_{n,k,d} (y_dn - max_h W_dh s_hnk)²``.
    Holding the argmax pattern ``δ`` at the current W fixed (the seed's "if the new estimates do not
    change significantly"), ``max_h W_dh s_hnk = Σ_h δ_dnk(h) W_dh s_hnk``, and the sum separates into
    one 1-D least-squares problem per (d, h) over the (n, k) where h is the maximal cause of pixel d
    (eq. 5-9 applied to that subset):  ``W_dh = Σ δ s_hnk y_dn / Σ δ s_hnk²``.  Entries with no such
    (n, k) keep their value.  Inactive causes never count (their ``s = 0`` adds nothing anyway).
    The frozen-argmax step does not bound the exact objective: an entry credited only by samples
    with a tiny slab value can jump far (``y/s``) and then win pixels it did not win before.  With
    ``safeguard=True`` (default) each pixel row takes the best of the steps ``α ∈ {1, ½, …, 1/16, 0}``
    towards eq. 11 under the *exact* max-rule objective (:func:`_safeguarded_rows`), so the W update
    never increases it; ``safeguard=False`` is the plain eq. 11.  ``nonnegative=True`` (max rule
    only) solves eq. 11 under ``W ≥ 0``: each (d, h) problem is a 1-D convex quadratic, so its
    constrained minimiser is ``max(0, W_dh)``.  Under the max rule a negative ``W_dh`` with a positive
    slab value is occluded by the zeros of the inactive latents, so such entries are not identified
    by the data (they receive no credit and drift arbitrarily); the constraint removes them.
    W, rule "linear": ``W = (Σ_nk y_n s_nkᵀ)(Σ_nk s_nk s_nkᵀ)^{-1}`` (least squares on the sample
    moments) over the latents active in some sample; never-active columns keep their value.
    ``σ²`` = mean squared residual ``(y - ȳ(s; W_new))²`` over n, k, d; ``π`` = fraction of non-zero
    entries of ``samples`` (all H, so preselection's clamped zeros count as inactive); ``μ_pr``,
    ``σ²_pr`` = mean and (biased) variance of the non-zero entries.  Floors: variances ``≥ min_var``,
    ``π ∈ [min_pi, 1 - min_pi]``; with fewer than two active entries the slab is kept.
    """
    _check_rule(rule)
    y = _check_data(y, params)
    samples = samples.to(params.W.dtype)
    N, D = y.shape
    if samples.ndim != 3 or samples.shape[0] != N or samples.shape[2] != params.H:
        raise ValueError(f"samples must be [N = {N}, K, H = {params.H}], got {tuple(samples.shape)}")
    K = samples.shape[1]
    W_old = params.W
    if nonnegative and rule != "max":
        raise ValueError("nonnegative W is implemented for the max rule only")
    if rule == "max":
        delta = max_causes(samples, W_old).to(y.dtype)  # [N, K, D, H]
        num = torch.einsum("nkdh,nkh,nd->dh", delta, samples, y)
        den = torch.einsum("nkdh,nkh->dh", delta, samples.square())
        W_eq11 = torch.where(den > 0, num / torch.where(den > 0, den, 1.0), W_old)
        if nonnegative:
            W_eq11 = W_eq11.clamp_min(0.0)
        W = _safeguarded_rows(y, samples, W_old, W_eq11) if safeguard else W_eq11
    else:
        flat = samples.reshape(N * K, params.H)
        css = flat.T @ flat
        cys = torch.einsum("nd,nkh->dh", y, samples)
        act = css.diagonal() > 0
        W = W_old.clone()
        if act.any():
            sub = css[act][:, act]
            W[:, act] = torch.linalg.lstsq(sub, cys[:, act].T, driver="gelsd").solution.T
    resid = (y[:, None, :] - mean_output(samples, W, rule)).square().mean()
    active = samples != 0
    n_act = int(active.sum())
    pi = torch.as_tensor(n_act / samples.numel(), dtype=y.dtype).clamp(min_pi, 1.0 - min_pi)
    if n_act >= 2:
        vals = samples[active]
        mu, var = vals.mean(), vals.var(unbiased=False).clamp_min(min_var)
    else:
        mu, var = params.mu_pr, params.var_pr
    return SparseCodingParams(W, resid.clamp_min(min_var), pi, mu.clone(), var.clone())


# --------------------------------------------------------------------------- model object


class SpikeSlabSparseCoding:
    """Sampling-based EM for (max-rule or linear) spike-and-slab sparse coding.

    ``em_step(y, generator)``: preselect H' candidates per data point, Gibbs E-step (``n_chains``
    chains, ``burn_in`` sweeps, ``samples_per_chain`` kept each → K samples), M-step (eq. 11).  Early
    iterations can be annealed: ``T = 1 + (anneal_start - 1) · max(0, 1 - iteration/anneal_iters)``.
    ``train_step(batch, step)`` runs ``em_step`` with the object's own generator (seeded by ``seed``),
    whose state travels in :meth:`state_dict`, so a checkpoint resumes bit-identically.

    Defaults (K = 2 chains x 5 samples after 10 burn-in sweeps, T annealed 4 → 1 over the first 25
    iterations, safeguarded eq. 11, ``W ≥ 0`` for the max rule) are the settings checked on the
    R = 5 bars (N = 500, H = 10, ``n_candidates = 5``); ``n_candidates=None`` means no preselection
    (H' = H).  Measured there (2026-11-27; ``make_bars(500, 5, random_state=seed)``, the generator
    seeded with ``seed``, 40 EM iterations): all 10 bars recovered on 11 of seeds 0-11 (seed 3 stops at
    8 bars, σ² ≈ 0.026 instead of ≈ 0.004); without annealing 2 of seeds 0-3 stopped at 8 bars.  Twelve
    seeds say little about a rate: the ``mssc_experiments`` study gives it with its interval.
    """

    def __init__(self, params: SparseCodingParams, rule: str = "max", *, n_candidates: int | None = None,
                 n_chains: int = 2, burn_in: int = 10, samples_per_chain: int = 5, thin: int = 1,
                 init: str = "prior", anneal_start: float = 4.0, anneal_iters: int = 25, min_var: float = 1e-6,
                 safeguard: bool = True, nonnegative: bool | None = None, seed: int = 0):
        self.rule = _check_rule(rule)
        if not isinstance(params, SparseCodingParams):
            raise ValueError("params must be a SparseCodingParams")
        self.params = params
        self.n_candidates = params.H if n_candidates is None else int(n_candidates)
        if not 1 <= self.n_candidates <= params.H:
            raise ValueError(f"n_candidates must be in [1, {params.H}], got {n_candidates}")
        if min(n_chains, samples_per_chain, thin) < 1 or burn_in < 0:
            raise ValueError("n_chains, samples_per_chain, thin must be >= 1 and burn_in >= 0")
        if anneal_start < 1.0 or anneal_iters < 0:
            raise ValueError("anneal_start must be >= 1 and anneal_iters >= 0")
        self.gibbs = dict(n_chains=n_chains, burn_in=burn_in, samples_per_chain=samples_per_chain, thin=thin, init=init)
        self.anneal_start, self.anneal_iters, self.min_var = float(anneal_start), int(anneal_iters), min_var
        self.safeguard = bool(safeguard)
        self.nonnegative = (rule == "max") if nonnegative is None else bool(nonnegative)
        if self.nonnegative and rule != "max":
            raise ValueError("nonnegative W is implemented for the max rule only")
        self.iteration = 0
        self.generator = torch.Generator().manual_seed(seed)

    @classmethod
    def from_data(cls, y: Tensor, H: int, generator: torch.Generator, rule: str = "max", *,
                  init_kwargs: dict | None = None, **kwargs) -> "SpikeSlabSparseCoding":
        return cls(init_params(y, H, generator, **(init_kwargs or {})), rule, **kwargs)

    @property
    def n_samples(self) -> int:
        return self.gibbs["n_chains"] * self.gibbs["samples_per_chain"]

    def temperature(self, iteration: int | None = None) -> float:
        it = self.iteration if iteration is None else iteration
        if self.anneal_iters == 0:
            return 1.0
        return 1.0 + (self.anneal_start - 1.0) * max(0.0, 1.0 - it / self.anneal_iters)

    def e_step(self, y: Tensor, generator: torch.Generator, temperature: float = 1.0) -> tuple[Tensor, Tensor]:
        """Candidates [N, H'] and samples [N, K, H] under the current Θ."""
        y = _check_data(y, self.params)
        cand = preselect(y, self.params, self.rule, self.n_candidates)
        return cand, gibbs_e_step(y, self.params, self.rule, cand, generator, temperature=temperature, **self.gibbs)

    def em_step(self, y: Tensor, generator: torch.Generator) -> dict[str, float]:
        """One EM iteration on the batch ``y`` [N, D]; returns scalar logs."""
        t0 = time.perf_counter()
        y = _check_data(y, self.params)
        T = self.temperature()
        _, samples = self.e_step(y, generator, T)
        lj = log_joint(y, samples, self.params, self.rule).mean()
        self.params = m_step(y, samples, self.params, self.rule, min_var=self.min_var,
                             safeguard=self.safeguard, nonnegative=self.nonnegative)
        self.iteration += 1
        p = self.params
        return {"log_joint": float(lj), "sigma2": float(p.sigma2), "pi": float(p.pi), "mu_pr": float(p.mu_pr),
                "var_pr": float(p.var_pr), "temperature": T,
                "active_per_sample": float((samples != 0).sum(-1).float().mean()),
                "seconds": time.perf_counter() - t0}

    def em_iteration(self, batch: Tensor, step: int) -> dict[str, float]:
        """One EM iteration with the object's own generator (the protocol adapter is ``models.mssc``)."""
        self.iteration = int(step)
        return self.em_step(batch, self.generator)

    @torch.no_grad()
    def infer(self, y: Tensor, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        """Posterior mean [N, H] (the average of the K samples) and the samples [N, K, H] at T = 1."""
        _, samples = self.e_step(y, generator, 1.0)
        return samples.mean(1), samples

    def state_dict(self) -> dict[str, Tensor]:
        out = {k: v.clone() for k, v in self.params.as_dict().items()}
        out["iteration"] = torch.tensor(self.iteration, dtype=torch.long)
        out["generator"] = self.generator.get_state()
        return out

    def load_state_dict(self, state: dict[str, Tensor]) -> None:
        missing = set(_STATE_KEYS + ("iteration", "generator")) - set(state)
        if missing:
            raise ValueError(f"state_dict lacks {sorted(missing)}")
        if tuple(state["W"].shape) != tuple(self.params.W.shape):
            raise ValueError(f"W shape {tuple(state['W'].shape)} != {tuple(self.params.W.shape)}")
        self.params = SparseCodingParams(*(state[k].clone() for k in _STATE_KEYS))
        self.iteration = int(state["iteration"])
        self.generator.set_state(state["generator"])
