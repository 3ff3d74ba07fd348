"""The Lp-nested (ISA) prior of ISA-VAE (paper 004), after Sinz & Bethge (2010).

The two-level Lp-nested function used for independent subspace analysis (paper 004, A.1):

    f(z) = ( sum_l f_l(z)^p0 )^(1/p0),   f_l(z) = ( sum_{i in subspace l} |z_i|^p_l )^(1/p_l)

and the density with a radial part of Lp-generalised-normal type, scale s > 0:

    log p(z) = log p0 - lgamma(n/p0) - (n/p0) log s - f(z)^p0 / s - log S_f(1)

Derivation: in the coordinates z = r u (r = f(z), u on the unit Lp-nested sphere) the volume
element is r^(n-1) dr dS(u) and the sphere's surface is S_f(1), so a density g(f(z)) normalises
iff S_f(1) int_0^inf g(r) r^(n-1) dr = 1; with g(r) = C exp(-r^p0 / s) the integral is
s^(n/p0) Gamma(n/p0) / p0, which gives C above.  Consequently f(z)^p0 / s ~ Gamma(n/p0, 1).

S_f(1) (Sinz & Bethge 2010, Prop. 1; notes "ISA-VAE"): 2^n prod_{inner nodes I} p_I^-(l_I - 1)
prod_{k=1}^{l_I - 1} B(sum_{j<=k} n_{I,j}/p_I, n_{I,k+1}/p_I).  The Beta products telescope, so for
the ISA tree

    log S_f(1) = n log 2 + sum_l lgamma(n_l/p0) - lgamma(n/p0) - (L-1) log p0
                 + sum_l [ n_l lgamma(1/p_l) - lgamma(n_l/p_l) - (n_l-1) log p_l ].

A subspace with n_l = 1 is a plain leaf: its exponent cancels from f and from S_f(1).
All p = 2 gives N(0, s/2 I); p0 = p_l = p gives the product of Lp-generalised normals.

Sampling is the exact Algorithm 1 of appendix A.1, written directly for this radial law (the
seed's steps 1, 4 and 5 -- draw a radius, normalise, redraw the radius -- collapse into one draw):
r^p0 / s ~ Gamma(n/p0); u ~ Dir(n_1/p0, ..., n_L/p0), subspace radius r_l = r u_l^(1/p0);
v ~ Dir(1/p_l, ..., 1/p_l) inside subspace l, |z_i| = r_l v_i^(1/p_l); independent random signs.
Gamma draws use the project's Marsaglia-Tsang sampler (``sample_log_standard_gamma``), which takes
a ``torch.Generator`` and works in log space, so draws are reproducible and tiny Dirichlet
concentrations (large p) do not underflow.  There is no reparameterised sampler (``rsample``):
the ISA-VAE KL is Monte Carlo at posterior samples and only needs ``log_prob``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.distributions import Distribution, constraints

from priorlab.config.lp_nested_layout import LpNestedLayout
from priorlab.config.lp_nested_layout import is_number as _is_number
from priorlab.priors.base import Prior
from priorlab.priors.normal_gamma import sample_log_standard_gamma

__all__ = ["LpNestedLayout", "dsprites_layout", "lp_nested_norm", "log_surface", "LpNested", "LpNestedPrior"]


# ----------------------------------------------------------------------------- layout

def dsprites_layout() -> LpNestedLayout:
    """The paper's dSprites layout: p0 = 2.1 over five subspaces of 5 dims with p = 2.2 (25 latents)."""
    return LpNestedLayout(2.1, ((2.2, 5),) * 5)


# ----------------------------------------------------------------------------- pure functions

def _lp(x: Tensor, p: Tensor) -> Tensor:
    """(sum_i x_i^p)^(1/p) over the last axis for x >= 0, scaled by the max (no overflow, 0 -> 0)."""
    m = x.amax(-1, keepdim=True)
    pos = m > 0
    m_safe = torch.where(pos, m, torch.ones_like(m))
    total = (x / m_safe).pow(p).sum(-1, keepdim=True)          # in [1, len] where m > 0
    total = torch.where(pos, total, torch.ones_like(total))
    return (m * total.pow(1.0 / p)).squeeze(-1)


def lp_nested_norm(z: Tensor, p0, p_sub, sizes: Sequence[int]) -> Tensor:
    """f(z) of the ISA tree (paper 004, A.1) over the last axis of ``z``; batch dims broadcast."""
    p0 = torch.as_tensor(p0, dtype=z.dtype, device=z.device)
    p_sub = torch.as_tensor(p_sub, dtype=z.dtype, device=z.device)
    if z.shape[-1] != sum(sizes) or p_sub.shape != (len(sizes),):
        raise ValueError(f"z has {z.shape[-1]} dims, sizes {tuple(sizes)}, p_sub shape {tuple(p_sub.shape)}")
    a = z.abs()
    f_sub = [_lp(part, p_sub[l]) for l, part in enumerate(a.split(list(sizes), dim=-1))]
    return _lp(torch.stack(f_sub, dim=-1), p0)


def log_surface(p0, p_sub, sizes: Sequence[int], sizes_tensor: Tensor | None = None) -> Tensor:
    """log S_f(1), the surface of the unit Lp-nested sphere (Sinz & Bethge 2010; telescoped Beta form).
    ``sizes_tensor``: the same sizes as a tensor already on ``p0``'s device (saves a host copy a call)."""
    p0 = torch.as_tensor(p0)
    p0 = p0 if p0.is_floating_point() else p0.to(torch.get_default_dtype())
    p_sub = torch.as_tensor(p_sub, dtype=p0.dtype, device=p0.device)
    n_l = (sizes_tensor.to(p0.dtype) if sizes_tensor is not None
           else torch.tensor(list(sizes), dtype=p0.dtype, device=p0.device))
    n, L = float(sum(sizes)), len(sizes)
    root = torch.lgamma(n_l / p0).sum() - torch.lgamma(n / p0) - (L - 1) * torch.log(p0)
    leaves = (n_l * torch.lgamma(1.0 / p_sub) - torch.lgamma(n_l / p_sub) - (n_l - 1.0) * torch.log(p_sub)).sum()
    return n * math.log(2.0) + root + leaves


# ----------------------------------------------------------------------------- distribution

class LpNested(Distribution):
    """p(z) ∝ exp(-f(z)^p0 / s) over R^n, f the ISA Lp-nested function (paper 004, A.1).

    ``p0`` (scalar) and ``p_sub`` (one per subspace) are tensors and may require grad; ``sizes`` are
    the subspace dimensions.  ``batch_shape == ()``, ``event_shape == (n,)``.  Any positive exponent
    gives a valid density; ``LpNestedLayout`` / ``LpNestedPrior`` keep them > 1 as in the paper.
    """

    arg_constraints = {"p0": constraints.positive, "p_sub": constraints.positive, "scale": constraints.positive}
    support = constraints.real_vector
    has_rsample = False

    def __init__(self, p0, p_sub, sizes: Sequence[int], scale=1.0, validate_args=None,
                 sizes_tensor: Tensor | None = None):
        self.sizes = tuple(int(k) for k in sizes)
        self.sizes_tensor = sizes_tensor  # optional: ``sizes`` on the device (see log_surface)
        if not self.sizes or min(self.sizes) < 1:
            raise ValueError(f"sizes must be a non-empty list of integers >= 1, got {tuple(sizes)}")
        ref = next((t for t in (p0, p_sub, scale) if isinstance(t, Tensor) and t.is_floating_point()), None)
        kw = dict(dtype=ref.dtype, device=ref.device) if ref is not None else dict(dtype=torch.get_default_dtype())
        self.p0 = torch.as_tensor(p0, **kw)
        self.p_sub = torch.as_tensor(p_sub, **kw)
        self.scale = torch.as_tensor(scale, **kw)
        if self.p0.dim() != 0 or self.scale.dim() != 0 or self.p_sub.shape != (len(self.sizes),):
            raise ValueError(f"p0 and scale must be scalars and p_sub have shape ({len(self.sizes)},); "
                             f"got {tuple(self.p0.shape)}, {tuple(self.scale.shape)}, {tuple(self.p_sub.shape)}")
        self.n = sum(self.sizes)
        super().__init__(torch.Size(), torch.Size((self.n,)), validate_args=validate_args)

    @classmethod
    def from_layout(cls, layout: LpNestedLayout, scale=1.0, dtype=None) -> "LpNested":
        dtype = dtype or torch.get_default_dtype()
        return cls(torch.tensor(layout.p0, dtype=dtype), torch.tensor(layout.p_sub, dtype=dtype), layout.sizes,
                   torch.tensor(scale, dtype=dtype))

    def log_normalizer(self) -> Tensor:
        """log C = log p0 - lgamma(n/p0) - (n/p0) log s - log S_f(1), so that log p = log C - f^p0 / s."""
        n = float(self.n)
        return (torch.log(self.p0) - torch.lgamma(n / self.p0) - (n / self.p0) * torch.log(self.scale)
                - log_surface(self.p0, self.p_sub, self.sizes, self.sizes_tensor))

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        f = lp_nested_norm(value, self.p0, self.p_sub, self.sizes)
        return self.log_normalizer() - f.pow(self.p0) / self.scale

    @property
    def mean(self) -> Tensor:
        return torch.zeros(self.n, dtype=self.p0.dtype, device=self.p0.device)

    @property
    def variance(self) -> Tensor:
        """E z_i^2 = E r^2 E u_l^(2/p0) E v_i^(2/p_l) (radius and Dirichlet splits are independent):

        s^(2/p0) Gamma((n_l+2)/p0)/Gamma(n_l/p0) * Gamma(3/p_l) Gamma(n_l/p_l) / (Gamma(1/p_l) Gamma((n_l+2)/p_l)).
        """
        p0, p = self.p0, self.p_sub
        n_l = torch.tensor(self.sizes, dtype=p.dtype, device=p.device)
        log_var = ((2.0 / p0) * torch.log(self.scale) + torch.lgamma((n_l + 2) / p0) - torch.lgamma(n_l / p0)
                   + torch.lgamma(3 / p) + torch.lgamma(n_l / p) - torch.lgamma(1 / p) - torch.lgamma((n_l + 2) / p))
        return torch.exp(log_var).repeat_interleave(torch.tensor(self.sizes, device=p.device))

    def entropy(self) -> Tensor:
        """H = -log C + E[f^p0 / s] = -log C + n/p0."""
        return -self.log_normalizer() + self.n / self.p0

    @torch.no_grad()
    def sample(self, sample_shape=torch.Size(), generator: torch.Generator | None = None) -> Tensor:
        """Exact draw (Algorithm 1, A.1), computed in log space.  ``generator=None`` seeds a fresh
        generator from torch's global RNG, so ``torch.manual_seed`` also makes draws reproducible."""
        shape = torch.Size(sample_shape)
        p0, p_sub, s = self.p0.detach(), self.p_sub.detach(), self.scale.detach()
        dtype, device = p0.dtype, p0.device
        if generator is None:
            generator = torch.Generator(device=device).manual_seed(int(torch.randint(2**62, ())))
        sizes = list(self.sizes)
        n_l = torch.tensor(sizes, dtype=dtype, device=device)
        # radius: r^p0 / s ~ Gamma(n/p0, 1)
        log_r = (torch.log(s) + sample_log_standard_gamma((self.n / p0).expand(shape), generator)) / p0
        # root split: u ~ Dir(n_l / p0), log r_l = log r + log u_l / p0
        log_g = sample_log_standard_gamma((n_l / p0).expand(shape + (len(sizes),)), generator)
        log_r_l = log_r.unsqueeze(-1) + torch.log_softmax(log_g, dim=-1) / p0
        # leaf split inside each subspace: v ~ Dir(1/p_l, ..., 1/p_l), log|z_i| = log r_l + log v_i / p_l
        p_leaf = p_sub.repeat_interleave(torch.tensor(sizes, device=device))
        log_g = sample_log_standard_gamma((1.0 / p_leaf).expand(shape + (self.n,)), generator)
        log_v = torch.cat([torch.log_softmax(part, dim=-1) for part in log_g.split(sizes, dim=-1)], dim=-1)
        log_abs = log_r_l.repeat_interleave(torch.tensor(sizes, device=device), dim=-1) + log_v / p_leaf
        signs = torch.randint(0, 2, shape + (self.n,), generator=generator, device=device).to(dtype) * 2 - 1
        return signs * torch.exp(log_abs)


# ----------------------------------------------------------------------------- prior module

def _inverse_softplus(y: Tensor) -> Tensor:
    """theta with softplus(theta) = y > 0, stable for small and large y."""
    return y + torch.log(-torch.expm1(-y))


class LpNestedPrior(Prior):
    """ISA-VAE prior module: ``forward(x=None)`` returns ``LpNested`` with the current exponents.

    Exponents are p = 1 + softplus(theta) (keeps p > 1; notes "ISA-VAE"), theta initialised so that p
    equals the layout's values (computed in float64, exact up to the parameter dtype's rounding).
    ``exponent_parameters()`` lists the thetas for their own optimiser group (the released code used
    lr 5e-4 there).  With ``learn_exponents=False`` they are buffers.  ``scale`` s is fixed; note that
    all p = 2 gives N(0, s/2 I), so s = 2 matches the standard-normal prior.
    """

    def __init__(self, layout: LpNestedLayout | Mapping, learn_exponents: bool = True, scale: float = 1.0,
                 lr: float = 0.0):
        super().__init__(lr=lr)
        self.layout = layout if isinstance(layout, LpNestedLayout) else LpNestedLayout.from_params(layout)
        if not _is_number(scale) or not math.isfinite(scale) or scale <= 0:
            raise ValueError(f"LpNestedPrior: scale must be a finite number > 0, got {scale!r}")
        self.latent_dim = self.layout.n
        self.sizes = self.layout.sizes
        self.learn_exponents = learn_exponents
        dtype = torch.get_default_dtype()
        theta0 = _inverse_softplus(torch.tensor(self.layout.p0, dtype=torch.float64) - 1.0).to(dtype)
        theta_sub = _inverse_softplus(torch.tensor(self.layout.p_sub, dtype=torch.float64) - 1.0).to(dtype)
        if learn_exponents:
            self.theta0 = nn.Parameter(theta0)
            self.theta_sub = nn.Parameter(theta_sub)
        else:
            self.register_buffer("theta0", theta0)
            self.register_buffer("theta_sub", theta_sub)
        self.register_buffer("scale", torch.tensor(float(scale), dtype=dtype))
        # the subspace sizes on the model's device: the normaliser needs them every step
        self.register_buffer("sizes_tensor", torch.tensor(self.sizes, dtype=dtype), persistent=False)

    def exponents(self) -> tuple[Tensor, Tensor]:
        """Current (p0, p_sub)."""
        return 1.0 + F.softplus(self.theta0), 1.0 + F.softplus(self.theta_sub)

    def exponent_parameters(self) -> list[nn.Parameter]:
        return [self.theta0, self.theta_sub] if self.learn_exponents else []

    def forward(self, x: Tensor | None = None) -> LpNested:
        p0, p_sub = self.exponents()
        # exponents are 1 + softplus(.) > 1 and s > 0 by construction: no argument checks (host reads)
        return LpNested(p0, p_sub, self.sizes, self.scale, validate_args=False, sizes_tensor=self.sizes_tensor)

    def sample(self, n: int, generator: torch.Generator | None = None) -> Tensor:
        return self.forward().sample((n,), generator=generator)

    def extra_repr(self) -> str:
        return f"layout={self.layout.to_params()}, learn_exponents={self.learn_exponents}"
