"""Latent priors: ``nn.Module`` factories of ``torch.distributions.Distribution`` objects.

A prior module's ``forward(x)`` returns p(z) (possibly depending on the
observation batch, e.g. VSC's pseudo-input selector); learnable priors keep
their parameters as module parameters or buffers and declare their optimiser
groups (:class:`~priorlab.priors.base.Prior`).

The priors a ``vae`` / ``beta_tcvae`` model can be configured with
(``models.<name>.prior: {kind: ...}``) are built here; adding one is a ``PriorParams`` subclass
registered under its name in ``config.PRIOR_PARAMS`` (the one registry of priors) whose ``BUILDER``
names its ``(spec, latent_dim) -> Prior`` function here.
"""

from __future__ import annotations

from priorlab.config import PRIOR_PARAMS, LpNestedPriorParams, ParamsError, PriorParams
from priorlab.config.checks import builder_for
from priorlab.priors.base import Prior
from priorlab.priors.standard_normal import StandardNormalPrior


def build_standard_normal(spec: PriorParams, latent_dim: int) -> Prior:
    """N(0, I) (kind ``standard_normal``)."""
    return StandardNormalPrior(latent_dim)


def build_lp_nested(spec: LpNestedPriorParams, latent_dim: int) -> Prior:
    """The Lp-nested prior of paper 004 (kind ``lp_nested``); its subspaces must hold ``latent_dim`` latents."""
    from priorlab.priors.lp_nested import LpNestedPrior  # lazy: +3 modules, ~12 ms at import priorlab.priors

    prior = LpNestedPrior(spec.layout(), learn_exponents=spec.learn_exponents, scale=spec.scale, lr=spec.lr)
    if prior.latent_dim != latent_dim:
        raise ParamsError(f"prior lp_nested: the subspaces hold {prior.latent_dim} latents, the setup has {latent_dim}")
    return prior


def build_prior(spec: PriorParams, latent_dim: int) -> Prior:
    return builder_for(spec, PRIOR_PARAMS, "prior")(spec, latent_dim)


__all__ = ["Prior", "StandardNormalPrior", "build_prior"]
