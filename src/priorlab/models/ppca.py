"""Probabilistic PCA (Tipping & Bishop 1999) fitted by online EM: the linear-Gaussian baseline, and
the model kind that a training step need not be a gradient step.

    z ~ N(0, I_K),   y | z ~ N(W z + μ, σ² I_D)

E-step (Tipping & Bishop eq. 25-26), with M = WᵀW + σ² I:
    E[z | y] = M⁻¹ Wᵀ (y − μ),   E[z zᵀ | y] = σ² M⁻¹ + E[z] E[z]ᵀ.
Online EM (Cappé & Moulines 2009): the minibatch's expected sufficient statistics
    a = mean (y − μ) E[z]ᵀ  [D, K],   b = mean E[z zᵀ]  [K, K],   c = mean ‖y − μ‖²,   m = mean y
are averaged into running statistics with step ρ_t = (τ0 + t)^−κ, then the M-step (eq. 27-28)
    W = A B⁻¹,   σ² = (C − 2 tr(Wᵀ A) + tr(B WᵀW)) / D,   μ = running mean.
With ρ_t = 1 it is batch EM on the minibatch.  Its fixed point spans the principal subspace
(tested against the eigen-decomposition).  No optimiser: :meth:`param_groups` is empty.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from priorlab.models.protocol import Batch, Generative, Model, NonFiniteLoss, StepContext


class PPCA(Model, Generative):
    """Probabilistic PCA with ``latent_dim`` components over observations of ``obs_shape``."""

    evaluation_notes = "PPCA: test_log_likelihood is the exact marginal log N(y; μ, WWᵀ + σ²I) in nats per observation."

    def __init__(self, obs_shape: tuple[int, ...], latent_dim: int, tau0: float = 10.0, kappa: float = 0.7,
                 init_scale: float = 0.1):
        super().__init__()
        if latent_dim < 1:
            raise ValueError(f"latent_dim must be >= 1, got {latent_dim}")
        if not 0.5 < kappa <= 1.0:
            raise ValueError(f"kappa must be in (0.5, 1], got {kappa}")
        self.obs_shape, self.latent_dim = tuple(obs_shape), int(latent_dim)
        self.tau0, self.kappa = float(tau0), float(kappa)
        d = math.prod(self.obs_shape)
        dt = torch.float64
        self.register_buffer("W", init_scale * torch.randn(d, latent_dim, dtype=dt))  # torch's global RNG (seeded)
        self.register_buffer("mu", torch.zeros(d, dtype=dt))
        self.register_buffer("sigma2", torch.ones((), dtype=dt))
        self.register_buffer("stat_a", torch.zeros(d, latent_dim, dtype=dt))
        self.register_buffer("stat_b", torch.zeros(latent_dim, latent_dim, dtype=dt))
        self.register_buffer("stat_c", torch.zeros((), dtype=dt))
        self.register_buffer("steps", torch.zeros((), dtype=torch.long))

    # -- inference --------------------------------------------------------------------------
    def _flat(self, x: Tensor) -> Tensor:
        return x.reshape(x.shape[0], -1).to(self.W.dtype)

    def posterior_moments(self, y: Tensor, mu: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """(E[z | y] [B, K], σ² M⁻¹ [K, K]) for flat observations ``y`` centred on ``mu``."""
        mu = self.mu if mu is None else mu
        k = self.latent_dim
        m = self.W.T @ self.W + self.sigma2 * torch.eye(k, dtype=self.W.dtype, device=self.W.device)
        m_inv = torch.linalg.inv(m)
        return (y - mu) @ self.W @ m_inv.T, self.sigma2 * m_inv

    @torch.no_grad()
    def represent(self, x: Tensor) -> Tensor:
        return self.posterior_moments(self._flat(x))[0].to(x.dtype)

    @torch.no_grad()
    def decode_mean(self, z: Tensor) -> Tensor:
        y = z.to(self.W.dtype) @ self.W.T + self.mu
        return y.reshape(z.shape[0], *self.obs_shape).float()

    @torch.no_grad()
    def reconstruct(self, x: Tensor) -> Tensor:
        return self.decode_mean(self.represent(x))

    @torch.no_grad()
    def log_likelihood(self, x: Tensor) -> Tensor:
        """Exact log N(y; μ, WWᵀ + σ²I) per observation (Tipping & Bishop eq. 4)."""
        y = self._flat(x)
        d = y.shape[1]
        cov = self.W @ self.W.T + self.sigma2 * torch.eye(d, dtype=y.dtype, device=y.device)
        return torch.distributions.MultivariateNormal(self.mu, covariance_matrix=cov).log_prob(y)

    # -- online EM ----------------------------------------------------------------------------
    def param_groups(self, lr: float) -> list[dict]:
        return []  # fitted by EM, no optimiser

    def step_size(self, t: int) -> float:
        """ρ_t = (τ0 + t)^−κ, rescaled so that ρ_1 = 1 (the first batch initialises the statistics)."""
        return ((self.tau0 + t) / (self.tau0 + 1.0)) ** -self.kappa

    @torch.no_grad()
    def train_step(self, batch: Batch, step: int, ctx: StepContext) -> dict[str, float]:
        y = self._flat(batch.x)
        rho = self.step_size(int(self.steps) + 1)
        self.mu.mul_(1 - rho).add_(rho * y.mean(0))
        ez, cov = self.posterior_moments(y)
        yc = y - self.mu
        a = yc.T @ ez / len(y)
        b = cov + ez.T @ ez / len(y)
        c = yc.pow(2).sum(1).mean()
        for stat, new in ((self.stat_a, a), (self.stat_b, b), (self.stat_c, c)):
            stat.mul_(1 - rho).add_(rho * new)
        w = torch.linalg.solve(self.stat_b, self.stat_a.T).T  # A B⁻¹ (B symmetric)
        sigma2 = (self.stat_c - 2 * (w * self.stat_a).sum() + (self.stat_b * (w.T @ w)).sum()) / y.shape[1]
        if not (torch.isfinite(w).all() and torch.isfinite(sigma2)):
            raise NonFiniteLoss(float("nan"))
        self.W.copy_(w)
        self.sigma2.copy_(sigma2.clamp_min(1e-6))
        self.steps += 1
        loss = -self.log_likelihood(batch.x).mean()
        if not torch.isfinite(loss):
            raise NonFiniteLoss(loss.item())
        return {"loss": loss.item(), "log_lik": -loss.item(), "sigma2": float(self.sigma2), "rho": rho}

    def evaluation_extras(self, dataset, x_test: Tensor, batch_size: int) -> dict:
        return {"test_log_likelihood": float(self.log_likelihood(x_test).mean()), "sigma2": float(self.sigma2)}
