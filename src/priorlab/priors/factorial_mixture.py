"""Factorial mixture prior with conjugate hyperpriors (paper 001, sections 2.1-2.7).

Paquet, Ghaisas & Tieleman, "A Factorial Mixture Prior for Compositional Deep
Generative Models".  The latent z = [z_1, ..., z_I], z_i in R^D; factor i is a
K_i-component Gaussian mixture with diagonal precisions.  The global variables
xi = {pi_i, mu_ik, alpha_ik} have hyperpriors Dirichlet(c0) and, per dimension,
Normal-Gamma(m0, s0, a0, b0); they are approximated by q_lambda(xi) in the same
families, held here as natural parameters and updated by stochastic variational
inference (eq. 13-14).  The encoder is q(z|x) = N(mu(x), diag var(x)).

Layout.  Factors with different K_i share padded tensors: Normal-Gamma natural
parameters [I, K_max, D, 4], Dirichlet natural parameters (c - 1) [I, K_max] and
a bool ``component_mask`` [I, K_max] (True = real component).  Padded slots keep
hyperprior values, get zero responsibility and zero prior weight, and are left
out of every sum.  Encoder outputs are flat [B, I*D] (factor i owns columns
i*D .. (i+1)*D - 1); responsibilities and logits are [B, I, K_max].

Misprints of the paper handled here (all derived again and tested):
  * App. C.1 Normal-Gamma KL: "psi(a_q) - psi(a_0)" must be
    "lgamma(a_q) - lgamma(a_0)", and "b_a" is b_q (see ``normal_gamma.kl_divergence``).
  * App. D / 2.4.3: L_B is *maximised* (not minimised) at lambda*.
  * App. E.3 / 4.2: forgetting rates kappa = -0.7 / -0.52 are printed negative;
    kappa must lie in (0.5, 1].
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from typing import Sequence

import torch
from torch import Tensor
from torch.distributions import Distribution, constraints

from priorlab.device import value_checks_enabled
from priorlab.priors import dirichlet
from priorlab.priors import normal_gamma as ng
from priorlab.priors.base import Prior
from priorlab.priors.normal_gamma import NormalGammaParams

_LOG_2PI = math.log(2.0 * math.pi)


# --------------------------------------------------------------------------- #
# Pure functions (explicit parameters; differentiable)                        #
# --------------------------------------------------------------------------- #


def validate_schedule(tau0: float, kappa: float) -> None:
    """Raise ValueError unless kappa in (0.5, 1] and tau0 >= 0 (section 2.4.3)."""
    if not (0.5 < kappa <= 1.0):
        raise ValueError(f"forgetting rate kappa must lie in (0.5, 1], got {kappa}")
    if not tau0 >= 0:
        raise ValueError(f"delay tau0 must be >= 0, got {tau0}")


def robbins_monro_step_size(step: int, tau0: float, kappa: float) -> float:
    """rho_tau = (tau0 + tau)^-kappa (section 2.4.3), kappa in (0.5, 1], tau0 >= 0, tau0 + tau >= 1."""
    validate_schedule(tau0, kappa)
    if step < 0:
        raise ValueError(f"step must be >= 0, got {step}")
    if tau0 + step < 1:
        raise ValueError(f"tau0 + step must be >= 1 so that rho <= 1, got {tau0 + step}")
    return float((tau0 + step) ** (-kappa))


def expected_log_likelihood(mu: Tensor, var: Tensor, params: NormalGammaParams) -> Tensor:
    """Eq. 6: E_q(z_i|x) E_q(mu_ik, alpha_ik)[log N(z_i; mu_ik, diag(alpha_ik)^-1)].

    mu, var: [B, I, D]; params: [I, K, D] each.  Returns [B, I, K].
    """
    return ng.expected_log_normal(mu.unsqueeze(-2), var.unsqueeze(-2), params).sum(-1)


def mixture_logits(mu: Tensor, var: Tensor, params: NormalGammaParams, c: Tensor, mask: Tensor) -> Tensor:
    """log rho_ik = E[log pi_ik] + eq. 6 (the logits of eq. 5); -inf at padded slots.  [B, I, K]."""
    ell = expected_log_likelihood(mu, var, params)
    e_log_pi = dirichlet.expected_log_pi(c, mask)
    return torch.where(mask, ell + torch.where(mask, e_log_pi, torch.zeros_like(e_log_pi)), torch.full_like(ell, float("-inf")))


def responsibilities_from_logits(logits: Tensor, clamp: Tensor | None = None) -> Tensor:
    """Eq. 5 softmax; where ``clamp[n, i] >= 0`` the row is the one-hot label (section 2.5)."""
    gamma = torch.softmax(logits, dim=-1)
    if clamp is None:
        return gamma
    labelled = clamp >= 0
    one_hot = torch.nn.functional.one_hot(clamp.clamp(min=0), logits.shape[-1]).to(gamma.dtype)
    return torch.where(labelled.unsqueeze(-1), one_hot, gamma)


def gaussian_neg_entropy(var: Tensor) -> Tensor:
    """E_q(z|x)[log q(z|x)] per factor for diagonal Gaussians: -1/2 sum_d (log 2 pi + log var + 1).  [B, I]."""
    return -0.5 * (_LOG_2PI + torch.log(var) + 1.0).sum(-1)


def kl_z(mu: Tensor, var: Tensor, gamma: Tensor, params: NormalGammaParams) -> Tensor:
    """KL[z_i] of appendix C.2: sum_k gamma_ik (E log q(z_i|x) - eq. 6).  Returns [B, I]."""
    ell = expected_log_likelihood(mu, var, params)
    return (gamma * (gaussian_neg_entropy(var).unsqueeze(-1) - ell)).sum(-1)


def kl_r(gamma: Tensor, c: Tensor, mask: Tensor) -> Tensor:
    """KL[r_i] of appendix C.3: sum_k gamma_ik (log gamma_ik - E[log pi_ik]) with 0 log 0 = 0.  [B, I]."""
    return kl_r_from_log_pi(gamma, dirichlet.expected_log_pi(c, mask))


def kl_r_from_log_pi(gamma: Tensor, e_log_pi: Tensor) -> Tensor:
    """KL[r_i] given E[log pi] [I, K] (-inf allowed where gamma = 0, e.g. padded slots).  [B, I]."""
    positive = gamma > 0
    g_safe = torch.where(positive, gamma, torch.ones_like(gamma))
    e_safe = torch.where(torch.isfinite(e_log_pi), e_log_pi, torch.zeros_like(e_log_pi))
    term = torch.where(positive, gamma * (torch.log(g_safe) - e_safe), torch.zeros_like(gamma))
    return term.sum(-1)


def global_kl(
    params: NormalGammaParams, c: Tensor, prior: NormalGammaParams, c0: Tensor, mask: Tensor
) -> tuple[Tensor, Tensor]:
    """(sum_ik KL(q(mu_ik, alpha_ik) || p), sum_i KL(q(pi_i) || p(pi_i))), lines (4d)-(4e) before the 1/N."""
    kl_ng = ng.kl_divergence(params, prior).sum(-1)
    kl_ng = torch.where(mask, kl_ng, torch.zeros_like(kl_ng)).sum()
    kl_dir = dirichlet.kl_divergence(c, c0.expand_as(c), mask).sum()
    return kl_ng, kl_dir


def svi_targets(
    mu: Tensor, var: Tensor, gamma: Tensor, n_data: float, prior_natural: Tensor, c0: Tensor
) -> tuple[Tensor, Tensor]:
    """Batch optimum lambda* of eq. 13 and Dirichlet target c0 + (N/B) sum_n gamma_ik.

    lambda*_ikd = lambda_0 + (N/B) sum_n gamma_ik^(n) [1/2, -(mu_d^2 + var_d)/2, mu_d, -1/2]
    (the batch replicated N/B times).  mu, var: [B, I, D]; gamma: [B, I, K].
    Returns natural parameters [I, K, D, 4] and pseudo-counts [I, K].
    """
    scale = float(n_data) / mu.shape[0]
    counts = scale * gamma.sum(0)  # [I, K]
    d = mu.shape[-1]
    codes = torch.cat([mu, mu * mu + var], -1).transpose(0, 1)  # [I, B, 2D]
    sums = scale * torch.bmm(gamma.permute(1, 2, 0), codes)  # sum_n gamma_ik [mu_d, mu_d^2 + var_d]: [I, K, 2D]
    s1, s2 = sums[..., :d], sums[..., d:]
    n_kd = counts.unsqueeze(-1).expand_as(s1)
    stats = torch.stack([0.5 * n_kd, -0.5 * s2, s1, -0.5 * n_kd], dim=-1)
    return prior_natural + stats, c0 + counts


def svi_update(
    ng_natural: Tensor,
    dirichlet_natural: Tensor,
    mu: Tensor,
    var: Tensor,
    gamma: Tensor,
    n_data: float,
    prior_natural: Tensor,
    c0: Tensor,
    rho: float,
    sel: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """Eq. 13-14 as a pure function: lambda <- (1 - rho) lambda + rho lambda* (``svi_targets``), same
    for the Dirichlet natural parameters; with the bool mask ``sel`` [I], only those factors move.
    Returns the new natural parameters [I, K, D, 4] and [I, K] (what
    :meth:`FactorialMixturePrior.svi_step` writes back, and what its ``compile`` compiles)."""
    target_nat, target_c = svi_targets(mu, var, gamma, n_data, prior_natural, c0)
    if sel is None:
        return (ng_natural * (1.0 - rho) + target_nat * rho,
                dirichlet_natural * (1.0 - rho) + dirichlet.mean_to_natural(target_c) * rho)
    r = sel.to(ng_natural.dtype) * rho  # rho at the factors, 0 elsewhere (a symbolic float in compiled code)
    return (ng_natural * (1.0 - r[:, None, None, None]) + r[:, None, None, None] * target_nat,
            dirichlet_natural * (1.0 - r[:, None]) + r[:, None] * dirichlet.mean_to_natural(target_c))


@dataclass(frozen=True)
class BufferKey:
    """Which state of some buffers a cache was computed from: their version counters (an in-place
    update bumps one) and storages (a move or a load replaces one).  State, not a setting: replicates
    of one model differ in it (:func:`priorlab.train.replicates.check_same_settings` compares settings)."""

    versions: tuple[int, ...]
    storages: tuple[int, ...]

    @classmethod
    def of(cls, *tensors: Tensor) -> "BufferKey":
        return cls(tuple(t._version for t in tensors), tuple(t.data_ptr() for t in tensors))


def mixture_caches(
    ng_natural: Tensor, dirichlet_natural: Tensor, mask: Tensor, padded: bool, hyper: tuple[float, ...] | None
) -> tuple[Tensor | None, ...]:
    """What :meth:`FactorialMixturePrior.refresh` caches for the current q(xi), as a pure function
    (what the prior's ``compile`` compiles): the mean parameters (m, s, a, b) [I, K, D]; eq. 6 +
    E[log pi] as a quadratic in the codes (see ``_coefficients``): const [I, K] (-inf at padded
    slots), E[alpha]^T and (E[alpha] m)^T [I, D, K], E[log pi] [I, K]; the intermediates the local
    and global KLs reuse: E[log pi] with 0 at padded slots, E[alpha], psi(a), the pseudo-counts c;
    and, given the hyperprior's numbers ``hyper`` (``_hyperprior``), the global KL of lines (4d)-(4e)
    before the 1/N (``mixture_global_kl``), else None."""
    m, s, a, b = ng.natural_to_mean(ng_natural, validate=False)
    c = dirichlet.natural_to_mean(dirichlet_natural)
    e_alpha = a / b
    psi_a = torch.digamma(a)
    e_log_pi = dirichlet.expected_log_pi(c, mask if padded else None)
    const = 0.5 * (psi_a - torch.log(b) - _LOG_2PI - 1.0 / s - e_alpha * m * m).sum(-1)
    if padded:  # E[log pi] is -inf at padded slots; e_log_pi_0 holds 0 there
        const = torch.where(mask, const + e_log_pi, torch.full_like(const, float("-inf")))
        e_log_pi_0 = torch.where(mask, e_log_pi, torch.zeros_like(e_log_pi))
    else:
        const = const + e_log_pi
        e_log_pi_0 = e_log_pi
    kl = None if hyper is None else mixture_global_kl(m, s, a, b, e_alpha, psi_a, c, mask, padded, hyper)
    return (m, s, a, b, const, e_alpha.transpose(1, 2).contiguous(), (e_alpha * m).transpose(1, 2).contiguous(),
            e_log_pi, e_log_pi_0, e_alpha, psi_a, c, kl)


def mixture_global_kl(
    m: Tensor, s: Tensor, a: Tensor, b: Tensor, e_alpha: Tensor, psi_a: Tensor, c: Tensor, mask: Tensor,
    padded: bool, hyper: tuple[float, ...],
) -> Tensor:
    """sum_ik KL(q(mu_ik, alpha_ik) || p) + sum_i KL(q(pi_i) || p(pi_i)) (lines 4d-4e before the 1/N) from
    the intermediates of ``mixture_caches``: the formulas of ``normal_gamma.kl_divergence`` (corrected
    App. C.1) and ``dirichlet.kl_divergence``, with the hyperprior's constants as numbers ``hyper`` =
    (m0, s0, a0, b0, c0, lgamma(a0), log b0, log s0, lgamma(c0))."""
    m0, s0, a0, b0, c0, lgamma_a0, log_b0, log_s0, lgamma_c0 = hyper
    normal = 0.5 * (s0 * e_alpha * (m - m0) ** 2 + s0 / s + torch.log(s) - log_s0 - 1.0)
    gamma = a0 * (torch.log(b) - log_b0) - torch.lgamma(a) + lgamma_a0 + (a - a0) * psi_a - (b - b0) * e_alpha
    kl_ng = (normal + gamma).sum(-1)  # [I, K]
    if padded:
        kl_ng = torch.where(mask, kl_ng, torch.zeros_like(kl_ng))
        c = torch.where(mask, c, torch.ones_like(c))
        c0s = torch.where(mask, torch.full_like(c, c0), torch.zeros_like(c))
        lgamma_c0s = torch.where(mask, torch.full_like(c, lgamma_c0), torch.zeros_like(c))
        c_sum = torch.where(mask, c, torch.zeros_like(c)).sum(-1)
        per = torch.where(mask, -torch.lgamma(c) + (c - c0) * (torch.digamma(c) - torch.digamma(c_sum).unsqueeze(-1)),
                          torch.zeros_like(c))
        kl_dir = torch.lgamma(c_sum) - torch.lgamma(c0s.sum(-1)) + lgamma_c0s.sum(-1) + per.sum(-1)
    else:
        k = c.shape[-1]
        c_sum = c.sum(-1)
        per = -torch.lgamma(c) + (c - c0) * (torch.digamma(c) - torch.digamma(c_sum).unsqueeze(-1))
        kl_dir = torch.lgamma(c_sum) - math.lgamma(k * c0) + k * lgamma_c0 + per.sum(-1)
    return kl_ng.sum() + kl_dir.sum()


def without_cuda_graphs(kwargs: dict) -> dict:
    """``torch.compile`` keyword arguments with inductor's CUDA graphs off (``mode``, if any, turned
    into its options): for a function whose outputs are kept past the step that made them (a CUDA
    graph's next replay would reuse their memory).  Other backends' arguments are left as they are."""
    if kwargs.get("backend", "inductor") != "inductor":
        return kwargs
    from torch._inductor import list_mode_options

    mode = kwargs.get("mode")
    options = {**(list_mode_options(mode) if mode else {}), **(kwargs.get("options") or {}), "triton.cudagraphs": False}
    return {**{k: v for k, v in kwargs.items() if k not in ("mode", "options")}, "options": options}


def first_order_objective(
    mu: Tensor,
    var: Tensor,
    gamma: Tensor,
    n_data: float,
    params: NormalGammaParams,
    c: Tensor,
    prior: NormalGammaParams,
    c0: Tensor,
    mask: Tensor,
    labels: Tensor | None = None,
    delta: float = 0.0,
) -> Tensor:
    """Eq. 8 per data point, F / N, restricted to the factors given (a scalar to maximise).

    = -mean_n sum_i (KL[z_i] + KL[r_i]) - (sum_ik KL_NG + sum_i KL_Dir) / N - Delta mean_n CE_n,
    CE_n = -sum_{i labelled} log g_{i, y_i} (zero for unlabelled rows).  gamma is held fixed (the
    E-step / clamped allocations); differentiable in the prior parameters ``params`` and ``c``.
    mu, var: [B, I, D]; gamma: [B, I, K]; labels: [B, I] (-1 = unlabelled).
    """
    ell = expected_log_likelihood(mu, var, params)
    kz = (gamma * (gaussian_neg_entropy(var).unsqueeze(-1) - ell)).sum(-1)
    kr = kl_r(gamma, c, mask)
    kl_ng, kl_dir = global_kl(params, c, prior, c0, mask)
    obj = -(kz + kr).sum(-1).mean() - (kl_ng + kl_dir) / n_data
    if labels is not None and delta > 0:
        e_log_pi = dirichlet.expected_log_pi(c, mask)
        logits = torch.where(mask, ell + torch.where(mask, e_log_pi, torch.zeros_like(e_log_pi)), torch.full_like(ell, float("-inf")))
        picked = torch.log_softmax(logits, -1).gather(-1, labels.clamp(min=0).unsqueeze(-1)).squeeze(-1)
        ce = -torch.where(labels >= 0, picked, torch.zeros_like(picked)).sum(-1)
        obj = obj - delta * ce.mean()
    return obj


def first_order_update(
    mu: Tensor,
    var: Tensor,
    gamma: Tensor,
    labels: Tensor | None,
    idx: Tensor,
    ng_natural: Tensor,
    dirichlet_natural: Tensor,
    prior_natural: Tensor,
    c0: Tensor,
    component_mask: Tensor,
    ng_moments: Tensor,
    dir_moments: Tensor,
    t: Tensor,
    n_data: float,
    lr: float,
    delta: float,
    betas: tuple[float, float],
    eps: float,
) -> tuple[Tensor, Tensor, Tensor, tuple[Tensor, Tensor], tuple[Tensor, Tensor]]:
    """Section 2.5's first-order step for the factors ``idx``, as a pure function (what
    :meth:`FactorialMixturePrior.first_order_step` writes back, and what its ``compile`` compiles).

    The gradient of ``first_order_objective`` (F / N) in u = (m, log s, log a, log b) and log c, then
    one Adam ascent step with bias correction at the factors' step counts ``t`` (already incremented).
    mu, var: [B, len(idx), D]; gamma: [B, len(idx), K]; labels: [B, len(idx)] or None (the batch's
    values at the factors ``idx``, indexed by the caller: torch 2.11's C++ inductor backend miscompiles
    that gather inside the graph; the prior's buffers whole).  Returns (F / N before the
    step, the factors' new Normal-Gamma natural parameters [len(idx), K, D, 4] and Dirichlet natural
    parameters [len(idx), K] (padded slots unchanged), their first and second Adam moments).
    """
    p, c = ng.natural_to_mean(ng_natural, validate=False), dirichlet.natural_to_mean(dirichlet_natural)
    u = torch.stack([p.m, p.s.log(), p.a.log(), p.b.log()], -1)[idx]
    log_c = c[idx].log()
    mask = component_mask[idx]
    prior = ng.natural_to_mean(prior_natural, validate=False)

    def objective(u: Tensor, log_c: Tensor) -> Tensor:
        params = NormalGammaParams(u[..., 0], u[..., 1].exp(), u[..., 2].exp(), u[..., 3].exp())
        return first_order_objective(mu, var, gamma, n_data, params, log_c.exp(), prior, c0, mask, labels, delta)

    (g_u, g_c), obj = torch.func.grad_and_value(objective, argnums=(0, 1))(u, log_c)
    b1, b2 = betas

    def adam(moments: Tensor, grad: Tensor, shape: tuple[int, ...]) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        m1 = b1 * moments[0, idx] + (1 - b1) * grad
        m2 = b2 * moments[1, idx] + (1 - b2) * grad * grad
        bc1, bc2 = (1 - b1**t).view(shape), (1 - b2**t).view(shape)
        return lr * (m1 / bc1) / (torch.sqrt(m2 / bc2) + eps), (m1, m2)

    step_u, ng_m = adam(ng_moments, g_u, (-1, 1, 1, 1))
    step_c, dir_m = adam(dir_moments, g_c, (-1, 1))
    new_u, new_log_c = u + step_u, log_c + step_c
    new_nat = ng.mean_to_natural(NormalGammaParams(new_u[..., 0], new_u[..., 1].exp(), new_u[..., 2].exp(), new_u[..., 3].exp()))
    nat = torch.where(mask[..., None, None], new_nat, ng_natural[idx])
    dir_nat = torch.where(mask, dirichlet.mean_to_natural(new_log_c.exp()), dirichlet_natural[idx])
    return obj, nat, dir_nat, ng_m, dir_m


def kmeans(x: Tensor, k: int, generator: torch.Generator, n_iter: int = 100) -> tuple[Tensor, Tensor]:
    """Lloyd's k-means with k-means++ seeding drawn from ``generator``.  Returns (centres [k, D], labels [n]).

    Empty clusters keep their previous centre.  Stops when the labels no longer change.
    """
    n = x.shape[0]
    if k < 1 or n < k:
        raise ValueError(f"k-means needs 1 <= k <= number of points, got k={k}, n={n}")
    first = torch.randint(n, (1,), generator=generator, device=x.device)
    centres = [x[first[0]]]
    d2 = ((x - centres[0]) ** 2).sum(-1)
    for _ in range(1, k):
        if bool((d2 > 0).any()):
            nxt = torch.multinomial(d2, 1, generator=generator)[0]
        else:
            nxt = torch.randint(n, (1,), generator=generator, device=x.device)[0]
        centres.append(x[nxt])
        d2 = torch.minimum(d2, ((x - x[nxt]) ** 2).sum(-1))
    cent = torch.stack(centres)
    labels = torch.cdist(x, cent).argmin(-1)
    for _ in range(n_iter):
        one_hot = torch.nn.functional.one_hot(labels, k).to(x.dtype)
        counts = one_hot.sum(0)
        sums = one_hot.T @ x
        cent = torch.where(counts.unsqueeze(-1) > 0, sums / counts.clamp(min=1).unsqueeze(-1), cent)
        new_labels = torch.cdist(x, cent).argmin(-1)
        if bool((new_labels == labels).all()):
            break
        labels = new_labels
    return cent, labels


# --------------------------------------------------------------------------- #
# Predictive distribution                                                     #
# --------------------------------------------------------------------------- #


class FactorialStudentTMixture(Distribution):
    """p(z) = prod_i sum_k w_ik prod_d T(z_id; df_ikd, loc_ikd, scale_ikd)  (section 2.6, eq. 10).

    With w = E_q[pi] this is exactly the distribution sampled in section 2.6
    (pi ~ q(pi), k_i ~ Cat(pi_i), z | k from eq. 10).  weights: [I, K] (zero at
    padded slots); df, loc, scale: [I, K, D].  Event shape (I*D,).  ``sample``
    requires an explicit ``generator``.
    """

    arg_constraints: dict = {}
    support = constraints.real_vector
    has_rsample = False

    def __init__(self, weights: Tensor, df: Tensor, loc: Tensor, scale: Tensor, validate_args: bool | None = False):
        if weights.dim() != 2 or loc.dim() != 3 or loc.shape[:2] != weights.shape:
            raise ValueError("weights must be [I, K] and df/loc/scale [I, K, D]")
        df, loc, scale = torch.broadcast_tensors(df, loc, scale)
        self.weights, self.df, self.loc, self.scale = weights, df, loc, scale
        self.num_factors, _, self.latent_dim = loc.shape
        super().__init__(torch.Size(), torch.Size([self.num_factors * self.latent_dim]), validate_args=validate_args)

    def component_log_prob(self, value: Tensor) -> Tensor:
        """log p(z_i | k_i = k) for every factor and component: [..., I, K]."""
        z = value.reshape(*value.shape[:-1], self.num_factors, 1, self.latent_dim)
        return ng.student_t_log_prob(z, self.df, self.loc, self.scale).sum(-1)

    def log_prob(self, value: Tensor) -> Tensor:
        if value.shape[-1] != self.num_factors * self.latent_dim:
            raise ValueError(f"value must end in {self.num_factors * self.latent_dim}, got {tuple(value.shape)}")
        log_w = torch.log(self.weights)
        return torch.logsumexp(self.component_log_prob(value) + log_w, dim=-1).sum(-1)

    def sample_components(self, components: Tensor, generator: torch.Generator) -> Tensor:
        """Draw z [n, I*D] given component indices [n, I] (eq. 10 per dimension)."""
        n = components.shape[0]
        idx = components.unsqueeze(-1).unsqueeze(-1).expand(n, self.num_factors, 1, self.latent_dim)

        def pick(t: Tensor) -> Tensor:  # [I, K, D] -> [n, I, D] at the chosen components
            return t.unsqueeze(0).expand(n, *t.shape).gather(2, idx).squeeze(2)

        z = ng.sample_student_t(pick(self.df), pick(self.loc), pick(self.scale), generator)
        return z.reshape(n, self.num_factors * self.latent_dim)

    def sample(self, sample_shape: torch.Size | tuple = torch.Size(), generator: torch.Generator | None = None) -> Tensor:
        if generator is None:
            raise ValueError("sample needs an explicit torch.Generator")
        shape = torch.Size(sample_shape)
        n = int(math.prod(shape))
        k = torch.multinomial(self.weights, n, replacement=True, generator=generator).T  # [n, I]
        return self.sample_components(k, generator).reshape(*shape, -1)


# --------------------------------------------------------------------------- #
# The prior module                                                            #
# --------------------------------------------------------------------------- #


@dataclass
class MixtureKLTerms:
    """The prior-side ELBO terms of eq. 4 for one mini-batch (all to be subtracted).

    kl_z, kl_r: [B, I] local terms (C.2, C.3).  kl_normal_gamma, kl_dirichlet:
    scalars, the global KLs already multiplied by 1/N (per data point).
    """

    kl_z: Tensor
    kl_r: Tensor
    kl_normal_gamma: Tensor
    kl_dirichlet: Tensor

    def per_point(self) -> Tensor:
        """KL[z] + KL[r] + (KL_NG + KL_Dir)/N per data point: ELBO = E[log p(x|z)] - per_point.  [B]."""
        return self.kl_z.sum(-1) + self.kl_r.sum(-1) + self.kl_normal_gamma + self.kl_dirichlet


class FactorialMixturePrior(Prior):
    """q_lambda(xi) of the factorial mixture prior, stored as natural-parameter buffers.

    Args:
        num_components: K_i per factor (a sequence), or one K shared by ``num_factors`` factors.
        latent_dim: D, the size of every z_i.
        num_factors: I, required when ``num_components`` is an int.
        m0, s0, a0, b0, c0: hyperprior (paper defaults 0, 1, 0.01, 0.01, 1).
        tau0, kappa: Robbins-Monro schedule rho = (tau0 + tau)^-kappa (paper: 2000, 0.7).
        dtype: buffer dtype (float64 by default).

    q(xi) starts at the hyperprior, where all components coincide: call
    ``init_from_codes`` (or ``set_posterior``) before the E-step/SVI loop.
    """

    def __init__(
        self,
        num_components: int | Sequence[int],
        latent_dim: int,
        num_factors: int | None = None,
        *,
        m0: float = 0.0,
        s0: float = 1.0,
        a0: float = 0.01,
        b0: float = 0.01,
        c0: float = 1.0,
        tau0: float = 2000.0,
        kappa: float = 0.7,
        dtype: torch.dtype = torch.float64,
    ):
        super().__init__()
        if isinstance(num_components, int):
            if num_factors is None:
                raise ValueError("num_factors is required when num_components is a single int")
            ks = [num_components] * num_factors
        else:
            ks = [int(k) for k in num_components]
            if num_factors is not None and num_factors != len(ks):
                raise ValueError(f"num_factors={num_factors} disagrees with len(num_components)={len(ks)}")
        if len(ks) < 1 or min(ks) < 1:
            raise ValueError(f"need at least one factor and K_i >= 1 for all factors, got {ks}")
        if latent_dim < 1:
            raise ValueError(f"latent_dim must be >= 1, got {latent_dim}")
        for name, v in (("s0", s0), ("a0", a0), ("b0", b0), ("c0", c0)):
            if not v > 0:
                raise ValueError(f"hyperparameter {name} must be positive, got {v}")
        validate_schedule(tau0, kappa)
        self._ks = tuple(ks)
        self._padded = min(ks) < max(ks)  # some factor has padded component slots
        self.latent_dim = int(latent_dim)
        self.tau0 = float(tau0)
        self.kappa = float(kappa)
        I, K, D = len(ks), max(ks), int(latent_dim)
        mask = torch.arange(K).unsqueeze(0) < torch.tensor(ks).unsqueeze(1)
        prior = NormalGammaParams(*(torch.tensor(v, dtype=dtype) for v in (m0, s0, a0, b0)))
        prior_nat = ng.mean_to_natural(prior)
        self.register_buffer("component_mask", mask)
        self.register_buffer("prior_natural", prior_nat)
        self.register_buffer("prior_pseudo_count", torch.tensor(c0, dtype=dtype))
        self.register_buffer("ng_natural", prior_nat.expand(I, K, D, 4).clone())
        self.register_buffer("dirichlet_natural", dirichlet.mean_to_natural(torch.full((I, K), c0, dtype=dtype)))
        # Adam moments of the first-order updates of section 2.5, in (m, log s, log a, log b) and log c
        self.register_buffer("fo_ng_moments", torch.zeros(2, I, K, D, 4, dtype=dtype))
        self.register_buffer("fo_dir_moments", torch.zeros(2, I, K, dtype=dtype))
        self.register_buffer("fo_steps", torch.zeros(I, dtype=torch.long))
        self._factor_index_cache: dict = {}
        self._mapped_hyper: tuple[float, ...] | None = None  # set inside uncached()
        # the pure functions of the updates, torch.compile'd by :meth:`compile`
        self._first_order_update, self._svi_update, self._caches = first_order_update, svi_update, mixture_caches
        self._hyperprior()  # the hyperprior as numbers, read now while the buffers are on the CPU

    def compile(self, *args, **kwargs) -> None:
        """``torch.compile`` (same arguments) of the updates of q(xi) between training steps: the
        first-order update of section 2.5 (:func:`first_order_update`: the objective, its gradient and
        the Adam step in one graph, some 480 kernel launches a step in eager mode) and the SVI update
        (:func:`svi_update`, ~30), and of the caches :meth:`refresh` recomputes after each
        (:func:`mixture_caches` with the global KL, ~80; without CUDA graphs, as the caches are kept
        past the step).  The prior has no forward pass to compile."""
        self._first_order_update = torch.compile(first_order_update, *args, **kwargs)
        self._svi_update = torch.compile(svi_update, *args, **kwargs)
        self._caches = torch.compile(mixture_caches, *args, **without_cuda_graphs(kwargs))

    # ------------------------------------------------------------------ info
    @property
    def num_components(self) -> tuple[int, ...]:
        return self._ks

    @property
    def num_factors(self) -> int:
        return len(self._ks)

    @property
    def max_components(self) -> int:
        return max(self._ks)

    def extra_repr(self) -> str:
        return f"num_components={self._ks}, latent_dim={self.latent_dim}, tau0={self.tau0}, kappa={self.kappa}"

    def get_extra_state(self) -> dict:
        return {"num_components": list(self._ks), "latent_dim": self.latent_dim, "tau0": self.tau0, "kappa": self.kappa}

    def set_extra_state(self, state: dict) -> None:
        if tuple(state["num_components"]) != self._ks or int(state["latent_dim"]) != self.latent_dim:
            raise ValueError(
                f"state_dict is for num_components={state['num_components']}, latent_dim={state['latent_dim']}; "
                f"this prior has {self._ks}, {self.latent_dim}"
            )
        validate_schedule(state["tau0"], state["kappa"])
        self.tau0, self.kappa = float(state["tau0"]), float(state["kappa"])

    def _apply(self, fn, recurse: bool = True):
        """``.to(device)`` and friends: the hyperprior numbers cached for the old buffers stay valid for
        the moved ones when their dtypes did not change (no read of the moved buffers)."""
        before = (getattr(self, "_hyper_key", None) == self._hyper_key_now(),
                  self.prior_natural.dtype, self.prior_pseudo_count.dtype)
        out = super()._apply(fn, recurse)
        if before[0] and before[1:] == (self.prior_natural.dtype, self.prior_pseudo_count.dtype):
            self._hyper_key = self._hyper_key_now()
        return out

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        """Loading the hyperprior buffers recomputes its numbers from the loaded (host) tensors."""
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
        nat, count = state_dict.get(prefix + "prior_natural"), state_dict.get(prefix + "prior_pseudo_count")
        if isinstance(nat, Tensor) and isinstance(count, Tensor) and nat.device.type == "cpu" \
                and count.device.type == "cpu" and nat.dtype == self.prior_natural.dtype \
                and count.dtype == self.prior_pseudo_count.dtype:
            self._hyper = self._hyper_numbers(nat, count)
            self._hyper_key = self._hyper_key_now()

    # ------------------------------------------------------------ parameters
    def prior_params(self) -> NormalGammaParams:
        """Hyperprior (m0, s0, a0, b0) as 0-d tensors."""
        return ng.natural_to_mean(self.prior_natural)

    def posterior_params(self) -> NormalGammaParams:
        """Mean parameters (m, s, a, b) of q(mu, alpha), each [I, K, D]."""
        return ng.natural_to_mean(self.ng_natural)

    def pseudo_counts(self) -> Tensor:
        """Dirichlet pseudo-counts c of q(pi), [I, K] (padded slots hold c0)."""
        return dirichlet.natural_to_mean(self.dirichlet_natural)

    def expected_stats(self) -> ng.NormalGammaMoments:
        """E_q[log alpha], E_q[alpha], E_q[alpha mu], E_q[alpha mu^2], each [I, K, D]."""
        return ng.expected_stats(self.posterior_params())

    def expected_log_pi(self) -> Tensor:
        """E_q[log pi_ik] = psi(c_ik) - psi(sum_k c_ik), -inf at padded slots.  [I, K]."""
        return dirichlet.expected_log_pi(self.pseudo_counts(), self.component_mask)

    @torch.no_grad()
    def set_posterior(self, params: NormalGammaParams, pseudo_counts: Tensor) -> None:
        """Overwrite q(xi) from mean parameters ([I, K, D] each, broadcastable) and pseudo-counts [I, K]."""
        I, K, D = self.num_factors, self.max_components, self.latent_dim
        p = ng.as_params(*(torch.as_tensor(t).expand(I, K, D) for t in params), dtype=self.ng_natural.dtype)
        c = torch.as_tensor(pseudo_counts, dtype=self.dirichlet_natural.dtype).expand(I, K)
        if not bool(torch.all(c > 0)):
            raise ValueError("pseudo-counts must be positive")
        prior_nat = self.prior_natural.expand(I, K, D, 4)
        m3 = self.component_mask[..., None, None]
        self.ng_natural.copy_(torch.where(m3, ng.mean_to_natural(p), prior_nat))
        c = torch.where(self.component_mask, c, self.prior_pseudo_count.expand(I, K))
        self.dirichlet_natural.copy_(dirichlet.mean_to_natural(c))

    # ------------------------------------------------------------ validation
    def _codes(self, mu: Tensor, var: Tensor) -> tuple[Tensor, Tensor, torch.dtype]:
        width = self.num_factors * self.latent_dim
        for name, t in (("mu", mu), ("var", var)):
            if not torch.is_tensor(t) or not t.is_floating_point():
                raise ValueError(f"{name} must be a floating-point tensor")
            if t.dim() != 2 or t.shape[1] != width:
                raise ValueError(f"{name} must have shape [B, I*D] = [B, {width}], got {tuple(t.shape)}")
        if mu.shape != var.shape:
            raise ValueError(f"mu and var shapes differ: {tuple(mu.shape)} vs {tuple(var.shape)}")
        if value_checks_enabled() and not bool(torch.all(var > 0)):
            raise ValueError("encoder variances var must be positive")
        work = torch.promote_types(mu.dtype, self.ng_natural.dtype)
        shape = (mu.shape[0], self.num_factors, self.latent_dim)
        return mu.to(work).reshape(shape), var.to(work).reshape(shape), mu.dtype

    def _labels(self, labels: Tensor, batch: int, name: str) -> Tensor:
        if labels.dtype not in (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8):
            raise ValueError(f"{name} must be an integer tensor (-1 = unlabelled)")
        if labels.shape != (batch, self.num_factors):
            raise ValueError(f"{name} must have shape [B, I] = [{batch}, {self.num_factors}], got {tuple(labels.shape)}")
        if value_checks_enabled():
            ks = torch.tensor(self._ks, device=labels.device)
            if bool((labels < -1).any()) or bool((labels >= ks).any()):
                raise ValueError(f"{name} entries must be -1 or in [0, K_i) with K = {self._ks}")
        return labels.long()

    def _gamma(self, gamma: Tensor, batch: int, work: torch.dtype) -> Tensor:
        shape = (batch, self.num_factors, self.max_components)
        if gamma.shape != shape:
            raise ValueError(f"gamma must have shape [B, I, K_max] = {list(shape)}, got {tuple(gamma.shape)}")
        if not value_checks_enabled():
            return gamma.to(work)
        if bool((gamma < 0).any()) or bool((gamma[:, ~self.component_mask] != 0).any()):
            raise ValueError("gamma must be non-negative and zero at padded components")
        if not torch.allclose(gamma.sum(-1), torch.ones((), dtype=gamma.dtype, device=gamma.device), atol=1e-4):
            raise ValueError("gamma must sum to one over components for every point and factor")
        return gamma.to(work)

    def _params(self, dtype: torch.dtype) -> tuple[NormalGammaParams, Tensor]:
        p = NormalGammaParams(*(t.to(dtype) for t in self.posterior_params()))
        return p, self.pseudo_counts().to(dtype)

    # ------------------------------------------------------------- inference
    @torch.compiler.disable
    def refresh(self, global_kl: bool = False) -> None:
        """Recompute the caches of :meth:`_coefficients` when a buffer of q(xi) changed since the last
        call (in-place updates bump tensor versions), and with ``global_kl`` the global KL of
        :meth:`global_kl_per_point` too.  Always eager (compiler-disabled): a compiled forward pass
        calls it first (:class:`~priorlab.models.fmvae.FactorialMixtureVAE`) and then reads the caches
        without the version check, so the SVI updates between steps do not recompile anything."""
        if self._mapped_hyper is not None:  # inside uncached(): every read computes its values afresh
            return
        key = BufferKey.of(self.ng_natural, self.dirichlet_natural)
        if getattr(self, "_coef_key", None) != key:
            self._global_kl = None
            with torch.no_grad():
                m, s, a, b, const, e_alpha_t, e_alpha_m_t, e_log_pi, e_log_pi_0, e_alpha, psi_a, c, kl = self._caches(
                    self.ng_natural, self.dirichlet_natural, self.component_mask, self._padded,
                    self._hyperprior() if global_kl else None)
                if value_checks_enabled() and not bool((torch.minimum(torch.minimum(s, a), b) > 0).all()):
                    raise ValueError("Normal-Gamma parameters s, a, b of q(mu, alpha) must be positive everywhere")
                self._coef_params = NormalGammaParams(m, s, a, b)
                self._coef = (const, e_alpha_t, e_alpha_m_t, e_log_pi)
                self._coef_extra = (self._padded, e_log_pi_0, e_alpha, psi_a, c)
                self._global_kl = kl
            self._coef_key = key
        if global_kl and self._global_kl is None:
            with torch.no_grad():
                self._global_kl = self._global_kl_now()

    def _coefficients(self) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """Eq. 6 + E[log pi] as a quadratic in the codes, for the current q(xi) (no gradient):

            log rho_ik = const_ik - 1/2 sum_d E[alpha]_ikd (mu_d^2 + var_d) + sum_d E[alpha m]_ikd mu_d,
            const_ik = E[log pi_ik] + 1/2 sum_d (E[log alpha] - log 2 pi - 1/s - E[alpha] m^2)_ikd,

        returned as (const [I, K] (-inf at padded slots), E[alpha] [I, D, K], E[alpha] m [I, D, K],
        E[log pi] [I, K]).  Cached until a buffer changes (:meth:`refresh`), together with the
        intermediates the global KL reuses (``_global_kl_now``); inside compiled code the caches are
        read as they are (refreshed before the compiled pass).
        """
        return self._coefficients_and_extra()[0]

    def _coefficients_and_extra(self) -> tuple[tuple[Tensor, ...], tuple]:
        """:meth:`_coefficients` and the intermediates cached with them (``_coef_extra``: padded?,
        E[log pi] with 0 at padded slots, E[alpha], psi(a), c): cached, or inside :meth:`uncached`
        computed now from the buffers."""
        if self._mapped_hyper is not None:
            return self._uncached_values(global_kl=False)[:2]
        if not torch.compiler.is_compiling():
            self.refresh()
        return self._coef, self._coef_extra

    def _uncached_values(self, global_kl: bool) -> tuple:
        """(coefficients, extra, global KL or None) from the buffers as they are, by the plain
        :func:`mixture_caches` (inside :meth:`uncached`)."""
        m, s, a, b, const, e_alpha_t, e_alpha_m_t, e_log_pi, e_log_pi_0, e_alpha, psi_a, c, kl = mixture_caches(
            self.ng_natural, self.dirichlet_natural, self.component_mask, self._padded,
            self._mapped_hyper if global_kl else None)
        return (const, e_alpha_t, e_alpha_m_t, e_log_pi), (self._padded, e_log_pi_0, e_alpha, psi_a, c), kl

    @contextlib.contextmanager
    def uncached(self):
        """Within, every read of the coefficients and of the global KL computes them from the buffers
        (the plain functions: no cache, no version check), for a forward pass mapped over stacked
        replicates (``torch.func.vmap``), whose buffers are then batched tensors without versions or
        storage.  The hyperprior's numbers are this module's (replicates share them: ``_hyper`` is a
        setting the vectorised trainer compares)."""
        self._mapped_hyper = self._hyperprior()
        try:
            yield
        finally:
            self._mapped_hyper = None

    def _fast_logits(self, m: Tensor, v: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """(logits [B, I, K], eq. 6 [B, I, K], E[log pi] with 0 at padded slots [I, K]) from codes
        [B, I, D] by two batched matrix products."""
        coef, extra = self._coefficients_and_extra()
        const, e_alpha, e_alpha_m, _ = (t.to(m.dtype) for t in coef)
        padded, e_log_pi_0 = extra[0], extra[1].to(m.dtype)
        quad = torch.bmm((m * m + v).transpose(0, 1), e_alpha)  # [I, B, K]
        lin = torch.bmm(m.transpose(0, 1), e_alpha_m)
        logits = (const.unsqueeze(1) - 0.5 * quad + lin).transpose(0, 1)
        ell = logits - e_log_pi_0
        if padded:
            ell = torch.where(self.component_mask, ell, torch.zeros_like(ell))
        return logits, ell, e_log_pi_0

    def logits(self, mu: Tensor, var: Tensor) -> Tensor:
        """log rho_ik (eq. 5-6), differentiable in mu and var; -inf at padded slots.  [B, I, K_max]."""
        m, v, out = self._codes(mu, var)
        return self._fast_logits(m, v)[0].to(out)

    def responsibilities(self, mu: Tensor, var: Tensor, clamp: Tensor | None = None) -> Tensor:
        """gamma_ik of eq. 5; rows with ``clamp[n, i] = k >= 0`` are one-hot at k (section 2.5).  [B, I, K_max]."""
        logits = self.logits(mu, var)
        if clamp is not None:
            clamp = self._labels(clamp, mu.shape[0], "clamp")
        return responsibilities_from_logits(logits, clamp)

    def cross_entropy(self, mu: Tensor, var: Tensor, labels: Tensor) -> Tensor:
        """-sum_{i labelled} log g_{i, y_i} per point (the negated eq. 8 term, before Delta).  [B]."""
        labels = self._labels(labels, mu.shape[0], "labels")
        log_g = torch.log_softmax(self.logits(mu, var), dim=-1)
        picked = log_g.gather(-1, labels.clamp(min=0).unsqueeze(-1)).squeeze(-1)
        return -torch.where(labels >= 0, picked, torch.zeros_like(picked)).sum(-1)

    def kl_terms(self, mu: Tensor, var: Tensor, gamma: Tensor, n_data: int) -> MixtureKLTerms:
        """KL[z], KL[r] per point and factor, and the global KLs divided by N (eq. 4b-4e)."""
        if n_data < 1:
            raise ValueError(f"n_data must be >= 1, got {n_data}")
        m, v, out = self._codes(mu, var)
        g = self._gamma(gamma, m.shape[0], m.dtype)
        p, c = self._params(m.dtype)
        prior = NormalGammaParams(*(t.to(m.dtype) for t in self.prior_params()))
        c0 = self.prior_pseudo_count.to(m.dtype)
        kl_ng, kl_dir = global_kl(p, c, prior, c0, self.component_mask)
        return MixtureKLTerms(
            kl_z=kl_z(m, v, g, p).to(out),
            kl_r=kl_r(g, c, self.component_mask).to(out),
            kl_normal_gamma=(kl_ng / n_data).to(out),
            kl_dirichlet=(kl_dir / n_data).to(out),
        )

    def predictive_kl(self, mu: Tensor, var: Tensor) -> tuple[Tensor, Tensor]:
        """(KL[z], KL[r]) of the predictive bound eq. 11 at the optimal gamma of eq. 5, each [B]."""
        m, v, out = self._codes(mu, var)
        p, c = self._params(m.dtype)
        gamma = torch.softmax(mixture_logits(m, v, p, c, self.component_mask), dim=-1)
        return kl_z(m, v, gamma, p).sum(-1).to(out), kl_r(gamma, c, self.component_mask).sum(-1).to(out)

    def local_kl(self, mu: Tensor, var: Tensor, clamp: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor]:
        """(KL[z_i], KL[r_i]) [B, I] each at the E-step gamma of eq. 5 (one-hot where ``clamp >= 0``), and gamma.

        Differentiable in mu and var with gamma detached: at the optimum of eq. 5 that gradient is
        the total one (envelope theorem); clamped rows are constants anyway.  gamma: [B, I, K_max].
        """
        m, v, out = self._codes(mu, var)
        logits, ell, e_log_pi_0 = self._fast_logits(m, v)
        if clamp is not None:
            clamp = self._labels(clamp, m.shape[0], "clamp")
        gamma = responsibilities_from_logits(logits.detach(), clamp)
        kz = gaussian_neg_entropy(v) - (gamma * ell).sum(-1)  # gamma sums to one; zero at padded slots
        with torch.no_grad():  # KL[r] (C.3) = sum_k gamma (log gamma - E[log pi]), gamma = 0 at padded slots
            kr = (torch.xlogy(gamma, gamma) - gamma * e_log_pi_0).sum(-1)
        return kz.to(out), kr.to(out), gamma.to(out)

    def global_kl_per_point(self, n_data: int) -> Tensor:
        """(sum_ik KL_NG + sum_i KL_Dir) / N: lines (4d)-(4e) per data point (a 0-d tensor), cached
        with the coefficients, per q(xi) (inside compiled code: as refreshed before the pass)."""
        if n_data < 1:
            raise ValueError(f"n_data must be >= 1, got {n_data}")
        if self._mapped_hyper is not None:
            return self._uncached_values(global_kl=True)[2] / n_data
        if not torch.compiler.is_compiling():
            self.refresh(global_kl=True)
        return self._global_kl / n_data

    def _hyperprior(self) -> tuple[float, ...]:
        """(m0, s0, a0, b0, c0, lgamma(a0), log b0, log s0, lgamma(c0)) as numbers, cached per buffer version
        (computed at construction and on loading, carried over by ``.to``: no read of device buffers)."""
        key = self._hyper_key_now()
        if getattr(self, "_hyper_key", None) != key:
            self._hyper = self._hyper_numbers(self.prior_natural, self.prior_pseudo_count)
            self._hyper_key = key
        return self._hyper

    def _hyper_key_now(self) -> BufferKey:
        return BufferKey.of(self.prior_natural, self.prior_pseudo_count)

    @staticmethod
    def _hyper_numbers(prior_natural: Tensor, prior_pseudo_count: Tensor) -> tuple[float, ...]:
        m0, s0, a0, b0 = (float(t) for t in ng.natural_to_mean(prior_natural))
        c0 = float(prior_pseudo_count)
        return (m0, s0, a0, b0, c0, math.lgamma(a0), math.log(b0), math.log(s0), math.lgamma(c0))

    def _global_kl_now(self) -> Tensor:
        """:func:`mixture_global_kl` from the intermediates cached by :meth:`refresh` (for caches made
        without it)."""
        padded, _, e_alpha, psi_a, c = self._coef_extra
        return mixture_global_kl(*self._coef_params, e_alpha, psi_a, c, self.component_mask, padded,
                                 self._hyperprior())

    @torch.no_grad()
    def first_order_step(
        self,
        mu: Tensor,
        var: Tensor,
        gamma: Tensor,
        n_data: int,
        factors: Sequence[int],
        lr: float,
        labels: Tensor | None = None,
        delta: float = 0.0,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
    ) -> Tensor:
        """Section 2.5: one first-order ascent step on F / N (``first_order_objective``) for ``factors``.

        While Delta > 0 the factors touched by the cross-entropy of eq. 8 have no closed-form
        natural gradient; they are moved by Adam (Kingma & Ba 2015) in the mean parameterisation,
        taken unconstrained as u = (m, log s, log a, log b) and log c.  The Adam moments and step
        counts are buffers (checkpointed with the module).  Returns the objective before the step (a 0-d
        tensor on the prior's device: nothing is read back; a copy, which a compiled update's next run
        under CUDA graphs does not overwrite).
        """
        if n_data < 1:
            raise ValueError(f"n_data must be >= 1, got {n_data}")
        if not lr > 0:
            raise ValueError(f"lr must be > 0, got {lr}")
        idx = self._factor_index(factors)
        work = self.ng_natural.dtype
        m, v, _ = self._codes(mu.detach().to(work), var.detach().to(work))
        g = self._gamma(gamma.detach(), m.shape[0], work)
        lab = None if labels is None else self._labels(labels, m.shape[0], "labels")[:, idx]
        if value_checks_enabled():  # q(xi) and the hyperprior valid (the update reads them unchecked)
            self.posterior_params()
            self.prior_params()
        self.fo_steps[idx] += 1
        t = self.fo_steps[idx].to(work)
        obj, nat, dir_nat, ng_moments, dir_moments = self._first_order_update(  # the batch indexed here (see first_order_update)
            m[:, idx], v[:, idx], g[:, idx], lab, idx, self.ng_natural, self.dirichlet_natural, self.prior_natural,
            self.prior_pseudo_count, self.component_mask, self.fo_ng_moments, self.fo_dir_moments, t, n_data, lr,
            delta, betas, eps)
        self.fo_ng_moments[0, idx], self.fo_ng_moments[1, idx] = ng_moments
        self.fo_dir_moments[0, idx], self.fo_dir_moments[1, idx] = dir_moments
        self.ng_natural[idx] = nat
        self.dirichlet_natural[idx] = dir_nat
        return obj.clone()

    # ------------------------------------------------------------------- SVI
    @torch.no_grad()
    def svi_step(
        self,
        mu: Tensor,
        var: Tensor,
        gamma: Tensor,
        n_data: int,
        step: int | None = None,
        rho: float | None = None,
        factors: Sequence[int] | None = None,
        check: bool = True,
    ) -> float:
        """One natural-gradient step (eq. 13-14): lambda <- (1 - rho) lambda + rho lambda*, same for c.

        rho = (tau0 + step)^-kappa unless ``rho`` in (0, 1] is given.  ``factors`` (default: all)
        restricts the update to those factors; the others keep their q(xi).  ``check=False`` skips
        the validation of gamma (for gamma from ``responsibilities`` / ``local_kl``).  Returns the rho used.
        """
        if n_data < 1:
            raise ValueError(f"n_data must be >= 1, got {n_data}")
        if rho is None:
            if step is None:
                raise ValueError("give either step (for the Robbins-Monro schedule) or rho")
            rho = robbins_monro_step_size(step, self.tau0, self.kappa)
        elif not (0.0 < rho <= 1.0):
            raise ValueError(f"rho must lie in (0, 1], got {rho}")
        work = self.ng_natural.dtype
        m, v, _ = self._codes(mu.detach().to(work), var.detach().to(work))
        g = self._gamma(gamma.detach(), m.shape[0], work) if check else gamma.detach().to(work)
        every = factors is None or sorted({int(f) for f in factors}) == list(range(self.num_factors))
        sel = None if every else self._factor_mask(factors)  # a strict subset of the factors when set
        nat, dir_nat = self._svi_update(self.ng_natural, self.dirichlet_natural, m, v, g, n_data, self.prior_natural,
                                        self.prior_pseudo_count, float(rho), sel)
        self.ng_natural.copy_(nat)
        self.dirichlet_natural.copy_(dir_nat)
        return float(rho)

    def _factor_mask(self, factors: Sequence[int]) -> Tensor:
        """Bool mask [I] of ``factors`` on the buffers' device (cached: built once per set and device)."""
        return self._factor_tensors(factors)[0]

    def _factor_index(self, factors: Sequence[int]) -> Tensor:
        """The sorted distinct ``factors`` as a long tensor on the buffers' device (cached likewise)."""
        return self._factor_tensors(factors)[1]

    def _factor_tensors(self, factors: Sequence[int]) -> tuple[Tensor, Tensor]:
        idx = [int(f) for f in factors]
        if any(not 0 <= f < self.num_factors for f in idx):
            raise ValueError(f"factors must lie in [0, {self.num_factors}), got {idx}")
        device = self.ng_natural.device
        key = (tuple(sorted(set(idx))), str(device))
        if key not in self._factor_index_cache:  # a host-to-device copy, once (it would wait on CUDA)
            sel = torch.zeros(self.num_factors, dtype=torch.bool)
            sel[list(key[0])] = True
            self._factor_index_cache[key] = (sel.to(device), torch.tensor(key[0], dtype=torch.long).to(device))
        return self._factor_index_cache[key]

    @torch.no_grad()
    def init_from_codes(
        self,
        mu: Tensor,
        var: Tensor,
        method: str = "kmeans",
        generator: torch.Generator | None = None,
        n_data: int | None = None,
        n_iter: int = 100,
    ) -> Tensor:
        """Seeded initialisation of q(xi) from encoded codes; returns the hard assignments [B, I].

        Per factor i the encoder means mu[:, i] are clustered into K_i groups:
        ``"kmeans"`` runs k-means++ seeding plus Lloyd iterations; ``"random"``
        takes K_i distinct codes drawn uniformly as centres and assigns every
        code to its nearest centre.  The hard assignments are then used as gamma
        in one SVI step with rho = 1 (the closed-form batch optimum of eq. 13),
        treating the codes as a batch of a data set of size ``n_data`` (default B).
        """
        if generator is None:
            raise ValueError("init_from_codes needs an explicit torch.Generator")
        if method not in ("kmeans", "random"):
            raise ValueError(f"method must be 'kmeans' or 'random', got {method!r}")
        m, _, _ = self._codes(mu, var)
        B = m.shape[0]
        if B < self.max_components:
            raise ValueError(f"need at least K_max = {self.max_components} codes, got {B}")
        labels = torch.empty(B, self.num_factors, dtype=torch.long, device=m.device)
        for i, k in enumerate(self._ks):
            x = m[:, i]
            if method == "kmeans":
                _, labels[:, i] = kmeans(x, k, generator, n_iter)
            else:
                centres = x[torch.randperm(B, generator=generator, device=x.device)[:k]]
                labels[:, i] = torch.cdist(x, centres).argmin(-1)
        gamma = torch.nn.functional.one_hot(labels, self.max_components).to(self.ng_natural.dtype)
        self.svi_step(mu, var, gamma, n_data or B, rho=1.0)
        return labels

    # -------------------------------------------------------------- sampling
    def predictive(self) -> FactorialStudentTMixture:
        """The predictive prior of section 2.6: Student-t mixtures with weights E_q[pi] (eq. 10)."""
        df, loc, scale = ng.student_t_predictive(self.posterior_params())
        weights = dirichlet.expected_pi(self.pseudo_counts(), self.component_mask)
        return FactorialStudentTMixture(weights, df, loc, scale)

    @torch.no_grad()
    def sample(
        self, n: int, generator: torch.Generator, components: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """Section 2.6: pi ~ q(pi), k_i ~ Cat(pi_i), z_i | k_i from eq. 10.  Returns (z [n, I*D], k [n, I]).

        ``components`` ([n, I] or [I], -1 = draw) fixes chosen k_i (conditional sampling).
        """
        if generator is None:
            raise ValueError("sample needs an explicit torch.Generator")
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        pi = dirichlet.sample(self.pseudo_counts(), (n,), generator, self.component_mask)  # [n, I, K]
        k = torch.multinomial(pi.reshape(n * self.num_factors, -1), 1, generator=generator).reshape(n, self.num_factors)
        if components is not None:
            comp = torch.as_tensor(components, device=k.device)
            if comp.dim() == 1:
                comp = comp.unsqueeze(0).expand(n, -1)
            comp = self._labels(comp, n, "components")
            k = torch.where(comp >= 0, comp, k)
        return self.predictive().sample_components(k, generator), k
