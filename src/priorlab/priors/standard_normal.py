"""The standard Gaussian prior p(z) = N(0, I) of the VAE baselines."""

from __future__ import annotations

import torch
from torch.distributions import Distribution, Independent, Normal

from priorlab.priors.base import Prior


class StandardNormalPrior(Prior):
    """N(0, I) over ``latent_dim`` dimensions; no parameters, nothing to initialise.

    ``forward`` returns the distribution; the analytic Gaussian KL is the one
    ``torch.distributions`` already registers for ``Independent(Normal)``.
    """

    def __init__(self, latent_dim: int):
        super().__init__(lr=0.0)
        self.latent_dim = latent_dim
        self.register_buffer("loc", torch.zeros(latent_dim))
        self.register_buffer("scale", torch.ones(latent_dim))

    def forward(self, x: torch.Tensor | None = None) -> Distribution:
        # no argument / sample validation: each reads values back to the host at every call
        return Independent(Normal(self.loc, self.scale, validate_args=False), 1, validate_args=False)

    def sample(self, n: int, generator: torch.Generator | None = None) -> torch.Tensor:
        return torch.randn(n, self.latent_dim, generator=generator, device=self.loc.device)
