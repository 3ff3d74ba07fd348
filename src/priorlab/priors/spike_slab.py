"""Spike-and-slab distribution and the distribution-level core of Variational Sparse Coding.

Tonolini, Jensen & Murray-Smith (2019), "Variational Sparse Coding" (UAI), paper 002:

* ``SpikeSlabNormal``: one latent coordinate is ``gamma * N(mu, sigma^2) + (1 - gamma) * delta_0``
  (eq. 2), with the relaxed reparameterised draw of supplement B.1-B.2 and the exact draw.
* ``spike_slab_kl``: the closed-form KL between two spike-and-slab distributions (eq. 6 / C),
  written with the *correct* Gaussian variances; the paper prints sigma where sigma^2 belongs.
* ``spike_slab_warmup``: the spike warm-up of eq. 7.
* ``pseudo_input_mixture_kl``: the selection-weighted KL to the pseudo-input prior (eq. 3-4, A.3).
* ``selector_weights_paper`` / ``selector_weights_code``: the two selector normalisations.
* ``selected_prior_gamma`` / ``sparsity_kl``: the sparsity penalty ``J * KL(Bern g || Bern alpha)`` (eq. 4).

Shapes: ``SpikeSlabNormal`` is elementwise (``event_shape == ()``); wrap it in
``torch.distributions.Independent(d, 1)`` to treat the last dimension (the J latents) as one event.
The KL is registered with ``torch.distributions.kl`` so ``kl_divergence`` works on both forms.
"""

from __future__ import annotations

import math
from numbers import Number
from typing import Literal

import torch
from torch.distributions import Distribution, constraints
from torch.distributions.kl import register_kl
from torch.distributions.utils import broadcast_all

from priorlab.device import value_checks_enabled

__all__ = [
    "DEFAULT_GAMMA_EPS",
    "SpikeSlabNormal",
    "bernoulli_kl",
    "bernoulli_kl_code",
    "gaussian_kl",
    "sharpen_spikes",
    "spike_slab_kl",
    "spike_slab_warmup",
    "pseudo_input_mixture_kl",
    "pseudo_input_mixture_kl_code",
    "selector_weights_paper",
    "selector_weights_code",
    "selected_prior_gamma",
    "sparsity_kl",
]

#: Spike probabilities are clamped to ``[eps, 1 - eps]`` inside every Bernoulli log term.
#: The exact KL is +inf when the prior's gamma is 0 or 1 and the posterior's differs; the clamp
#: turns that into a finite penalty of about ``log(1 / eps)`` (13.8 nats) with finite gradients,
#: like the ``SMALL_CONSTANT = 1e-6`` of the authors' code.  Inside ``(eps, 1 - eps)`` it changes nothing.
DEFAULT_GAMMA_EPS = 1e-6

_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


class SpikeSlabNormal(Distribution):
    """Spike-and-slab: ``P(z = 0) = 1 - gamma``, else ``z ~ N(loc, scale^2)`` (paper 002, eq. 2).

    Elementwise: ``batch_shape`` is the broadcast shape of ``gamma``, ``loc``, ``scale`` and
    ``event_shape == ()``.  Use ``Independent(SpikeSlabNormal(...), 1)`` for a J-dim latent vector.

    ``gamma`` is the probability of being *non-zero* (the paper's "spike probability").
    ``log_prob`` is the density w.r.t. the measure ``delta_0 + Lebesgue``.
    ``rsample`` is the *relaxed* draw of supplement B.1 (never exactly 0, differentiable in all
    parameters); ``sample`` is the exact draw.  ``sharpness`` is ``c`` in ``T(y) = sigmoid(c y)``:
    the paper ramps it 50 -> 200 during training, the authors' code fixes it at 100 (the default);
    a number, or a 0-d tensor (a schedule kept on the device: changing it neither reads the device
    nor, under ``torch.compile``, recompiles).

    Random draws take an optional ``generator``; without one they use torch's global generator,
    as every ``torch.distributions`` object does (needed when wrapped in ``Independent``).
    """

    arg_constraints = {
        "gamma": constraints.unit_interval,
        "loc": constraints.real,
        "scale": constraints.positive,
    }
    support = constraints.real
    has_rsample = True

    def __init__(
        self,
        gamma: torch.Tensor | float,
        loc: torch.Tensor | float,
        scale: torch.Tensor | float,
        sharpness: float | torch.Tensor = 100.0,
        validate_args: bool | None = None,
    ) -> None:
        if isinstance(sharpness, torch.Tensor):  # a 0-d tensor (a model's schedule buffer): not read here
            if sharpness.dim() != 0 or not sharpness.is_floating_point():
                raise ValueError(f"sharpness must be a number or a 0-d float tensor, got shape "
                                 f"{tuple(sharpness.shape)}, {sharpness.dtype}")
        elif not isinstance(sharpness, Number) or not math.isfinite(sharpness) or sharpness <= 0:
            raise ValueError(f"sharpness must be a finite positive number, got {sharpness!r}")
        self.gamma, self.loc, self.scale = broadcast_all(gamma, loc, scale)
        self.sharpness = sharpness if isinstance(sharpness, torch.Tensor) else float(sharpness)
        super().__init__(batch_shape=self.loc.shape, validate_args=validate_args)
        if self._validate_args and isinstance(sharpness, torch.Tensor) and \
                not bool(torch.isfinite(sharpness) & (sharpness > 0)):
            raise ValueError(f"sharpness must be a finite positive number, got {float(sharpness)!r}")

    @classmethod
    def from_logvar(
        cls,
        gamma: torch.Tensor,
        loc: torch.Tensor,
        logvar: torch.Tensor,
        sharpness: float | torch.Tensor = 100.0,
        validate_args: bool | None = None,
    ) -> "SpikeSlabNormal":
        """Build from the encoder's log-variance ``log sigma^2`` (supplement A.2); ``logvar`` is kept
        (so the KL does not recompute it from the scale)."""
        logvar = torch.as_tensor(logvar)
        d = cls(gamma, loc, torch.exp(0.5 * logvar), sharpness, validate_args)
        if logvar.shape == d.batch_shape:
            d._logvar = logvar
        return d

    def expand(self, batch_shape, _instance=None) -> "SpikeSlabNormal":
        new = self._get_checked_instance(SpikeSlabNormal, _instance)
        batch_shape = torch.Size(batch_shape)
        new.gamma = self.gamma.expand(batch_shape)
        new.loc = self.loc.expand(batch_shape)
        new.scale = self.scale.expand(batch_shape)
        new.sharpness = self.sharpness
        super(SpikeSlabNormal, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    # ----------------------------------------------------------------- moments
    @property
    def logvar(self) -> torch.Tensor:
        logvar = getattr(self, "_logvar", None)
        return 2.0 * torch.log(self.scale) if logvar is None else logvar

    @property
    def mean(self) -> torch.Tensor:
        return self.gamma * self.loc

    @property
    def variance(self) -> torch.Tensor:
        return self.gamma * self.scale.pow(2) + self.gamma * (1.0 - self.gamma) * self.loc.pow(2)

    def entropy(self) -> torch.Tensor:
        """Entropy w.r.t. ``delta_0 + Lebesgue``: H(Bern gamma) + gamma * H(N(loc, scale^2))."""
        g = self.gamma
        h_bern = -(torch.xlogy(g, g) + torch.xlogy(1.0 - g, 1.0 - g))
        h_normal = 0.5 + _HALF_LOG_2PI + torch.log(self.scale)
        return h_bern + g * h_normal

    # ----------------------------------------------------------------- sampling
    def _noise(self, sample_shape, generator: torch.Generator | None) -> tuple[torch.Tensor, torch.Tensor]:
        shape = self._extended_shape(sample_shape)
        # fills of empty tensors (the numbers of torch.rand / randn): a Tensor method, which torch.compile
        # of the vectorised replicates (priorlab.train.replicates) hands to its noise override
        eta = torch.empty(shape, dtype=self.loc.dtype, device=self.loc.device).uniform_(generator=generator)
        return eta, torch.empty(shape, dtype=self.loc.dtype, device=self.loc.device).normal_(generator=generator)

    def rsample(self, sample_shape=torch.Size(), generator: torch.Generator | None = None) -> torch.Tensor:
        """Relaxed draw ``z = sigmoid(c (eta - 1 + gamma)) * (loc + scale * eps)`` (supplement B.1-B.2).

        ``eta ~ U(0, 1)``, ``eps ~ N(0, 1)``.  Differentiable in ``gamma``, ``loc`` and ``scale``;
        tends to an exact draw as ``sharpness -> inf``.
        """
        eta, eps = self._noise(sample_shape, generator)
        spike = torch.sigmoid(self.sharpness * (eta - 1.0 + self.gamma))
        return spike * (self.loc + self.scale * eps)

    def sample(self, sample_shape=torch.Size(), generator: torch.Generator | None = None) -> torch.Tensor:
        """Exact draw ``z = b * (loc + scale * eps)``, ``b = [eta >= 1 - gamma] ~ Bern(gamma)``."""
        with torch.no_grad():
            eta, eps = self._noise(sample_shape, generator)
            active = eta >= 1.0 - self.gamma
            return torch.where(active, self.loc + self.scale * eps, torch.zeros_like(eps))

    # ----------------------------------------------------------------- density
    def log_prob(self, value: torch.Tensor) -> torch.Tensor:
        """Log-density w.r.t. ``delta_0 + Lebesgue``.

        ``z == 0``: ``log(1 - gamma)`` (the atom's mass; the slab has no mass at a point);
        ``z != 0``: ``log gamma + log N(z; loc, scale^2)``.  Meant for exact draws: a relaxed
        draw is never exactly 0, so it is always scored by the slab.
        """
        if self._validate_args:
            self._validate_sample(value)
        value, gamma, loc, scale = broadcast_all(value, self.gamma, self.loc, self.scale)
        is_zero = value == 0
        # Double-where so the branch not taken cannot inject inf/nan into gradients.
        gamma_slab = torch.where(is_zero, torch.ones_like(gamma), gamma)
        gamma_spike = torch.where(is_zero, gamma, torch.zeros_like(gamma))
        log_normal = -0.5 * ((value - loc) / scale).pow(2) - torch.log(scale) - _HALF_LOG_2PI
        log_slab = torch.log(gamma_slab) + log_normal
        log_spike = torch.log1p(-gamma_spike)
        return torch.where(is_zero, log_spike, log_slab)


# ============================================================================ KL divergences
def gaussian_kl(
    mu_q: torch.Tensor, logvar_q: torch.Tensor, mu_p: torch.Tensor, logvar_p: torch.Tensor
) -> torch.Tensor:
    """Elementwise ``KL(N(mu_q, var_q) || N(mu_p, var_p))`` from log-variances.

    ``0.5 * (log var_p - log var_q + (var_q + (mu_q - mu_p)^2) / var_p - 1)``: the Gaussian part of
    paper 002 eq. 6/9 with the variances the paper misprints as standard deviations.
    """
    return 0.5 * (
        logvar_p - logvar_q + (torch.exp(logvar_q) + (mu_q - mu_p).pow(2)) * torch.exp(-logvar_p) - 1.0
    )


def bernoulli_kl(
    gamma_q: torch.Tensor, gamma_p: torch.Tensor | float, eps: float = DEFAULT_GAMMA_EPS
) -> torch.Tensor:
    """Elementwise ``KL(Bern gamma_q || Bern gamma_p)``, both clamped to ``[eps, 1 - eps]``."""
    _check_eps(eps)
    gamma_q, gamma_p = broadcast_all(gamma_q, gamma_p)
    q = gamma_q.clamp(eps, 1.0 - eps)
    p = gamma_p.clamp(eps, 1.0 - eps)
    return q * (torch.log(q) - torch.log(p)) + (1.0 - q) * (torch.log1p(-q) - torch.log1p(-p))


def bernoulli_kl_code(log_q: torch.Tensor, log_p: torch.Tensor, eps: float = DEFAULT_GAMMA_EPS) -> torch.Tensor:
    """Elementwise ``KL(Bern q || Bern p)`` as the released code writes it (``vae_ss_ss_vamp_ept_sp.py``):
    ``q (log q - log p) + (1 - q) (log(1 - q + eps) - log(1 - p + eps))`` from the log-probabilities,
    with ``eps`` only inside ``log(1 - .)``: no clamp, so gradients survive at q, p -> 0 and 1."""
    _check_eps(eps)
    q, p = torch.exp(log_q), torch.exp(log_p)
    return q * (log_q - log_p) + (1.0 - q) * (torch.log(1.0 - q + eps) - torch.log(1.0 - p + eps))


def sharpen_spikes(log_gamma: torch.Tensor, nu: float) -> torch.Tensor:
    """The released code's sharpened pseudo-input spikes: ``log sigmoid(nu (gamma - 1/2))`` (not in the
    paper; ``nu = 10`` in the code, applied in the spike KL and the sparsity term)."""
    if not nu > 0:
        raise ValueError(f"nu must be > 0, got {nu!r}")
    return torch.nn.functional.logsigmoid(nu * (torch.exp(log_gamma) - 0.5))


def spike_slab_kl(
    gamma_q: torch.Tensor,
    mu_q: torch.Tensor,
    logvar_q: torch.Tensor,
    gamma_p: torch.Tensor,
    mu_p: torch.Tensor,
    logvar_p: torch.Tensor,
    eps: float = DEFAULT_GAMMA_EPS,
) -> torch.Tensor:
    """Elementwise closed-form ``KL(SS(gamma_q, mu_q, var_q) || SS(gamma_p, mu_p, var_p))`` (eq. 6).

    ``gamma_q * KL(N_q || N_p) + KL(Bern gamma_q || Bern gamma_p)``; sum over the last dim for a
    J-dim latent.  The slab factor uses the unclamped ``gamma_q`` (exact at 0 and 1); the
    Bernoulli part clamps both probabilities to ``[eps, 1 - eps]`` (see ``DEFAULT_GAMMA_EPS``).
    """
    return gamma_q * gaussian_kl(mu_q, logvar_q, mu_p, logvar_p) + bernoulli_kl(gamma_q, gamma_p, eps)


@register_kl(SpikeSlabNormal, SpikeSlabNormal)
def _kl_spike_slab_spike_slab(q: SpikeSlabNormal, p: SpikeSlabNormal) -> torch.Tensor:
    return spike_slab_kl(q.gamma, q.loc, q.logvar, p.gamma, p.loc, p.logvar)


# ============================================================================ warm-up (eq. 7)
def spike_slab_warmup(
    mu: torch.Tensor,
    logvar: torch.Tensor,
    lam: float | torch.Tensor,
    variant: Literal["paper", "code"] = "paper",
) -> tuple[torch.Tensor, torch.Tensor]:
    """Slab parameters under the spike warm-up: returns ``(mean, variance)``.

    ``variant="paper"`` (eq. 7, default): mean ``lam * mu``, variance ``lam * sigma^2 + (1 - lam)``.
    ``variant="code"`` (authors' release): mean ``lam * mu``, log-variance ``lam * log sigma^2``,
    i.e. variance ``sigma^(2 lam)``.  Both give the N(0, 1) slab at ``lam = 0`` and the encoder's
    slab at ``lam = 1``; they differ in between.
    """
    lam_t = torch.as_tensor(lam, dtype=mu.dtype, device=mu.device)
    if value_checks_enabled() and not bool(torch.all((lam_t >= 0) & (lam_t <= 1))):
        raise ValueError(f"lam must lie in [0, 1], got {lam!r}")
    if mu.shape != logvar.shape:
        raise ValueError(f"mu and logvar must have the same shape, got {tuple(mu.shape)} and {tuple(logvar.shape)}")
    if variant == "paper":
        return lam_t * mu, lam_t * torch.exp(logvar) + (1.0 - lam_t)
    if variant == "code":
        return lam_t * mu, torch.exp(lam_t * logvar)
    raise ValueError(f"variant must be 'paper' or 'code', got {variant!r}")


# ============================================================================ pseudo-input prior
def pseudo_input_mixture_kl_code(
    log_gamma: torch.Tensor,
    mu: torch.Tensor,
    logvar: torch.Tensor,
    log_gamma_u: torch.Tensor,
    mu_u: torch.Tensor,
    logvar_u: torch.Tensor,
    weights: torch.Tensor,
    eps: float = DEFAULT_GAMMA_EPS,
) -> torch.Tensor:
    """:func:`pseudo_input_mixture_kl` with the released code's Bernoulli KL (:func:`bernoulli_kl_code`) on
    log spike probabilities, per data point ``[B]``; plain autograd over the ``[B, U, J]`` terms."""
    _check_2d("log_gamma", log_gamma, mu, logvar, names=("log_gamma", "mu", "logvar"))
    _check_2d("log_gamma_u", log_gamma_u, mu_u, logvar_u, names=("log_gamma_u", "mu_u", "logvar_u"))
    if weights.shape != (log_gamma.shape[0], log_gamma_u.shape[0]):
        raise ValueError(f"weights must have shape [B, U], got {tuple(weights.shape)}")
    slab = gaussian_kl(mu[:, None], logvar[:, None], mu_u[None], logvar_u[None])  # [B, U, J]
    spike = bernoulli_kl_code(log_gamma[:, None], log_gamma_u[None], eps)
    return (weights * (torch.exp(log_gamma)[:, None] * slab + spike).sum(-1)).sum(-1)


def pseudo_input_mixture_kl(
    gamma: torch.Tensor,
    mu: torch.Tensor,
    logvar: torch.Tensor,
    gamma_u: torch.Tensor,
    mu_u: torch.Tensor,
    logvar_u: torch.Tensor,
    weights: torch.Tensor,
    eps: float = DEFAULT_GAMMA_EPS,
) -> torch.Tensor:
    """Selection-weighted KL to the pseudo-input prior, per data point ``[B]`` (eq. 3-4, A.3).

    ``sum_u w_bu * sum_j [gamma_bj KL(N_bj || N_uj) + KL(Bern gamma_bj || Bern gamma_uj)]`` for data
    posteriors ``[B, J]``, pseudo-input posteriors ``[U, J]`` and weights ``[B, U]``.  The weights
    are used as given: pass ``selector_weights_code`` output (sums to 1: the code's weighted
    average) or ``selector_weights_paper`` output (the paper's weighted sum).
    """
    _check_2d("gamma", gamma, mu, logvar, names=("gamma", "mu", "logvar"))
    _check_2d("gamma_u", gamma_u, mu_u, logvar_u, names=("gamma_u", "mu_u", "logvar_u"))
    b, j = gamma.shape
    u = gamma_u.shape[0]
    if gamma_u.shape[1] != j:
        raise ValueError(f"data and pseudo-input posteriors need the same latent size, got {j} and {gamma_u.shape[1]}")
    if weights.shape != (b, u):
        raise ValueError(f"weights must have shape [B, U] = {(b, u)}, got {tuple(weights.shape)}")
    _check_eps(eps)
    return _MixtureKL.apply(gamma, mu, logvar, gamma_u, mu_u, logvar_u, weights, eps)[0]


class _MixtureKL(torch.autograd.Function):
    """``pseudo_input_mixture_kl`` as one autograd node with a hand-written backward (autograd through
    the elementwise ``[B, U, J]`` formula was a large part of VSC's per-step overhead).

    With ``q, p`` the clamped spike probabilities, ``v = exp(logvar)``, ``d_buj = mu_bj - mu_uj``
    and ``D_buj = d_buj^2 / v_uj``, the per-pair KL summed over ``j`` splits into

        kl_bu = A_b + sum_j left_bj . right_uj + 1/2 sum_j gamma_bj D_buj,
        A_b   = sum_j [q log q + (1 - q) log(1 - q) - gamma (logvar + 1) / 2],
        left  = [gamma / 2, gamma v / 2, -q, q - 1],  right_u = [logvar_u, 1 / v_u, log p_u, log(1 - p_u)],

    (eq. 6 with variances: ``gamma_q KL(N_q || N_p) + KL(Bern q || Bern p)``), so only ``d`` and
    ``D`` are ``[B, U, J]``.  Gradients follow by differentiating these terms; like ``clamp``, the
    Bernoulli part passes gradient to gamma only inside ``[eps, 1 - eps]``.  Tested against autograd
    through ``spike_slab_kl`` (``gradcheck`` in float64).  ``generate_vmap_rule``: under ``torch.vmap``
    (replicates trained as one model) the forward and backward run on the batched tensors as written.
    """

    generate_vmap_rule = True

    @staticmethod
    def forward(gamma, mu, logvar, gamma_u, mu_u, logvar_u, weights, eps):
        q = gamma.clamp(eps, 1.0 - eps)
        p = gamma_u.clamp(eps, 1.0 - eps)
        log_q, log_1q = torch.log(q), torch.log1p(-q)
        v = torch.exp(logvar)
        inv_vu = torch.exp(-logvar_u)
        half_g = 0.5 * gamma
        logvar_1 = logvar + 1.0
        a = (q * log_q + (1.0 - q) * log_1q - half_g * logvar_1).sum(-1)  # [B]
        left = torch.cat([half_g, half_g * v, -q, q - 1.0], -1)  # [B, 4J]
        right = torch.cat([logvar_u, inv_vu, torch.log(p), torch.log1p(-p)], -1)  # [U, 4J]
        j = gamma.shape[-1]
        d = mu.unsqueeze(1) - mu_u  # [B, U, J]
        t = d * inv_vu
        dd = d * t  # D = d^2 / v_u
        dt = torch.cat([dd, t], -1)  # [D, d / v_u], [B, U, 2J]: a cat (torch.compile cannot trace out= views)
        wide = torch.promote_types(gamma.dtype, torch.float64)  # the pieces cancel: sum them in float64
        kl = torch.addmm(a.to(wide).unsqueeze(-1), left.to(wide), right.T.to(wide))
        kl = (kl + torch.bmm(dd, half_g.unsqueeze(-1)).squeeze(-1)).to(gamma.dtype)  # [B, U]
        return (weights * kl).sum(-1), half_g, logvar_1, q, log_q, log_1q, p, v, inv_vu, left, right, dt, kl

    @staticmethod
    def setup_context(ctx, inputs, output):
        """The forward's intermediates come back as extra (non-differentiable) outputs, kept for the
        backward: the ``setup_context`` form that ``torch.func`` transforms (vmap) accept."""
        gamma, _, _, gamma_u, _, _, weights, _ = inputs
        half_g, logvar_1, q, log_q, log_1q, p, v, inv_vu, left, right, dt, kl = output[1:]
        ctx.mark_non_differentiable(*output[1:])
        ctx.save_for_backward(gamma, half_g, logvar_1, q, log_q, log_1q, gamma_u, p, v, inv_vu, left, right, dt, kl,
                              weights)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad, *_):
        gamma, half_g, logvar_1, q, log_q, log_1q, gamma_u, p, v, inv_vu, left, right, dt, kl, weights = ctx.saved_tensors
        need = ctx.needs_input_grad
        j = gamma.shape[-1]
        wg = weights * grad.unsqueeze(-1)  # [B, U]: d out / d kl_bu
        out: list[torch.Tensor | None] = [None] * 8
        if need[0] or need[1] or need[2] or need[4] or need[5]:
            wdt = dt * wg.unsqueeze(-1)  # [B, U, 2J]
        if need[0] or need[1] or need[2]:
            sw = wg.sum(-1, keepdim=True)  # [B, 1]
            r_lvu, r_ivu, r_lp, r_l1p = (wg @ right).split(j, -1)  # sum_u wg_bu right_uj
            s_dd, s_t = wdt.sum(1).split(j, -1)  # sum_u wg_bu [D, d / v_u]_buj
            if need[0]:  # the clamp passes gradient where it is the identity (as torch.clamp does)
                bern = sw * (log_q - log_1q) - (r_lp - r_l1p)
                out[0] = 0.5 * (r_lvu - sw * logvar_1 + v * r_ivu + s_dd) + bern * (q == gamma)
            if need[1]:
                out[1] = gamma * s_t
            if need[2]:
                out[2] = half_g * (v * r_ivu - sw)
        if need[3] or need[4] or need[5]:
            l_g, l_gv, l_q, l_1q = (wg.T @ left).split(j, -1)  # sum_b wg_bu left_bj
            if need[3]:
                out[3] = (l_q / p - l_1q / (1.0 - p)) * (p == gamma_u)
            if need[4] or need[5]:  # sum_b wg_bu gamma_bj [D, d / v_u]_buj
                c_dd, c_t = (wdt * torch.cat([gamma, gamma], -1).unsqueeze(1)).sum(0).split(j, -1)
                if need[4]:
                    out[4] = -c_t
                if need[5]:
                    out[5] = l_g - inv_vu * l_gv - 0.5 * c_dd
        if need[6]:
            out[6] = kl * grad.unsqueeze(-1)
        return tuple(out)


def selector_weights_paper(raw: torch.Tensor, a: float = 60.0, b: float = 0.5) -> torch.Tensor:
    """Paper A.3: positive outputs normalised to unit sum, then ``S(a (u - b))``, ``[B, U]``.

    The paper does not say how the selector's outputs are made positive before the sum
    normalisation; we use the sigmoid, as the released code does.  With a clear maximum the result
    is close to one-hot; with no clear winner *all* weights are close to 0 (for ``U > 2``).
    """
    _check_selector(raw)
    pos = torch.sigmoid(raw)
    u = pos / pos.sum(-1, keepdim=True)
    return torch.sigmoid(a * (u - b))


def selector_weights_code(raw: torch.Tensor) -> torch.Tensor:
    """Released-code selector: ``sigmoid(raw)`` normalised to unit sum, ``[B, U]``.

    The code divides by the L2 norm and then takes ``sum(w KL) / sum(w)`` in the KL, which is the
    same as these unit-sum weights in a weighted sum.
    """
    _check_selector(raw)
    pos = torch.sigmoid(raw)
    return pos / pos.sum(-1, keepdim=True)


# ============================================================================ sparsity (eq. 4)
def selected_prior_gamma(gamma_u: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """Spike probabilities of each data point's selected prior, ``[B, J]``.

    ``sum_u w_bu gamma_uj / sum_u w_bu`` (the released code's weighted average; exact selection
    for one-hot weights).
    """
    if gamma_u.dim() != 2 or weights.dim() != 2 or weights.shape[1] != gamma_u.shape[0]:
        raise ValueError(
            f"need gamma_u [U, J] and weights [B, U], got {tuple(gamma_u.shape)} and {tuple(weights.shape)}"
        )
    total = weights.sum(-1, keepdim=True)
    if value_checks_enabled() and not bool(torch.all(total > 0)):
        raise ValueError("every row of weights must have a positive sum")
    return (weights @ gamma_u) / total


def sparsity_kl(
    gamma_prior: torch.Tensor,
    alpha: float,
    multiplier: float,
    eps: float = DEFAULT_GAMMA_EPS,
    bernoulli: Literal["clamped", "code"] = "clamped",
) -> torch.Tensor:
    """Sparsity penalty ``multiplier * KL(Bern g || Bern alpha)``, ``g = mean_j gamma_prior`` (eq. 4).

    ``gamma_prior [..., J]`` are the selected pseudo-input prior's spike probabilities (see
    ``selected_prior_gamma``); returns one value per leading index.  The paper's multiplier is the
    latent size J.
    """
    if not (0.0 < alpha < 1.0):
        raise ValueError(f"alpha must lie in (0, 1), got {alpha!r}")
    if multiplier < 0:
        raise ValueError(f"multiplier must be non-negative, got {multiplier!r}")
    if gamma_prior.dim() < 1 or gamma_prior.shape[-1] == 0:
        raise ValueError("gamma_prior needs a non-empty last (latent) dimension")
    g_bar = gamma_prior.mean(-1)
    if bernoulli == "code":
        return multiplier * bernoulli_kl_code(torch.log(g_bar), torch.full_like(g_bar, math.log(alpha)), eps)
    return multiplier * bernoulli_kl(g_bar, torch.full_like(g_bar, alpha), eps)


# ============================================================================ checks
def _check_eps(eps: float) -> None:
    if not (0.0 <= eps < 0.5):
        raise ValueError(f"eps must lie in [0, 0.5), got {eps!r}")


def _check_2d(label: str, *tensors: torch.Tensor, names: tuple[str, ...]) -> None:
    shape = tensors[0].shape
    if len(shape) != 2:
        raise ValueError(f"{label} must be 2-D, got shape {tuple(shape)}")
    for name, t in zip(names, tensors):
        if t.shape != shape:
            raise ValueError(f"{name} must have shape {tuple(shape)}, got {tuple(t.shape)}")


def _check_selector(raw: torch.Tensor) -> None:
    if raw.dim() != 2 or raw.shape[1] < 1:
        raise ValueError(f"selector outputs must be [B, U] with U >= 1, got shape {tuple(raw.shape)}")
