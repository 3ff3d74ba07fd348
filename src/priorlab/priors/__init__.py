"""Latent priors: ``nn.Module`` factories of ``torch.distributions.Distribution`` objects.

A prior module's ``forward(x)`` returns p(z) (possibly depending on the
observation batch, e.g. VSC's pseudo-input selector); learnable priors keep
their parameters as module parameters or buffers and declare their optimiser
groups (:class:`~priorlab.priors.base.Prior`).

The priors a ``vae`` / ``beta_tcvae`` model can be configured with
(``models.<name>.prior: {kind: ...}``) are built by :data:`PRIOR_BUILDERS`;
adding one is a ``PriorParams`` subclass registered under its name in
``config.PRIOR_PARAMS`` (the one registry of names) and its builder here, keyed by
that class.
"""

from __future__ import annotations

from typing import Callable

from priorlab.config import PRIOR_PARAMS, LpNestedPriorParams, PriorParams
from priorlab.config.checks import builder_for
from priorlab.priors.base import Prior
from priorlab.priors.standard_normal import StandardNormalPrior


def _lp_nested(spec: PriorParams, latent_dim: int) -> Prior:
    from priorlab.config import ParamsError
    from priorlab.priors.lp_nested import LpNestedPrior

    prior = LpNestedPrior(spec.layout(), learn_exponents=spec.learn_exponents, scale=spec.scale, lr=spec.lr)
    if prior.latent_dim != latent_dim:
        raise ParamsError(f"prior lp_nested: the subspaces hold {prior.latent_dim} latents, the setup has {latent_dim}")
    return prior


PRIOR_BUILDERS: dict[type[PriorParams], Callable[[PriorParams, int], Prior]] = {
    PriorParams: lambda spec, latent_dim: StandardNormalPrior(latent_dim),  # kind standard_normal
    LpNestedPriorParams: _lp_nested,
}
"""Parameter class (of ``config.PRIOR_PARAMS``) → builder from its params and the latent size."""


def build_prior(spec: PriorParams, latent_dim: int) -> Prior:
    return builder_for(spec, PRIOR_PARAMS, PRIOR_BUILDERS, "prior")(spec, latent_dim)


__all__ = ["PRIOR_BUILDERS", "Prior", "StandardNormalPrior", "build_prior"]
