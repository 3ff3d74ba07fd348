"""Latent priors: ``nn.Module`` factories of ``torch.distributions.Distribution`` objects.

A prior module's ``forward(x)`` returns p(z) (possibly depending on the
observation batch, e.g. VSC's pseudo-input selector); learnable priors keep
their parameters as module parameters or buffers and declare their optimiser
groups (:class:`~priorlab.priors.base.Prior`).

The priors a ``vae`` / ``beta_tcvae`` model can be configured with
(``models.<name>.prior: {kind: ...}``) are built by :data:`PRIOR_BUILDERS`;
adding one is a ``PriorParams`` subclass in ``config.PRIOR_PARAMS`` and a
builder here.
"""

from __future__ import annotations

from typing import Callable

from priorlab.config import PriorParams
from priorlab.priors.base import Prior
from priorlab.priors.standard_normal import StandardNormalPrior

def _lp_nested(spec: PriorParams, latent_dim: int) -> Prior:
    from priorlab.config import ParamsError
    from priorlab.priors.lp_nested import LpNestedPrior

    prior = LpNestedPrior(spec.layout(), learn_exponents=spec.learn_exponents, scale=spec.scale, lr=spec.lr)
    if prior.latent_dim != latent_dim:
        raise ParamsError(f"prior lp_nested: the subspaces hold {prior.latent_dim} latents, the setup has {latent_dim}")
    return prior


PRIOR_BUILDERS: dict[str, Callable[[PriorParams, int], Prior]] = {
    "standard_normal": lambda spec, latent_dim: StandardNormalPrior(latent_dim),
    "lp_nested": _lp_nested,
}
"""Prior ``kind`` → builder from its params and the latent size."""


def build_prior(spec: PriorParams, latent_dim: int) -> Prior:
    try:
        builder = PRIOR_BUILDERS[spec.kind]
    except KeyError:
        raise ValueError(f"unknown prior kind {spec.kind!r}; allowed: {', '.join(PRIOR_BUILDERS)}") from None
    return builder(spec, latent_dim)


__all__ = ["PRIOR_BUILDERS", "Prior", "StandardNormalPrior", "build_prior"]
