"""Encoder families: heads that turn encoder features into q(z | x)."""

from __future__ import annotations

import torch
from torch import nn
from torch.distributions import Distribution, Independent, Normal


class GaussianPosterior(nn.Module):
    """Diagonal Gaussian q(z|x) = N(μ, diag σ²) from ``2 * latent_dim`` features (μ, log σ²)."""

    params_per_dim = 2

    def __init__(self, latent_dim: int, min_logvar: float = -12.0, max_logvar: float = 8.0):
        super().__init__()
        self.latent_dim = latent_dim
        self.min_logvar, self.max_logvar = min_logvar, max_logvar

    def forward(self, features: torch.Tensor) -> Distribution:
        mu, logvar = features.chunk(2, dim=-1)
        logvar = logvar.clamp(self.min_logvar, self.max_logvar)
        # no argument validation: it reads the values back to the host at every call (the scale is
        # positive by construction; a non-finite mean shows up as a non-finite loss)
        return Independent(Normal(mu, (0.5 * logvar).exp(), validate_args=False), 1, validate_args=False)

    @staticmethod
    def mean(q: Distribution) -> torch.Tensor:
        return q.mean
