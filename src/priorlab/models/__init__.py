"""Models: one ``VAE`` class assembled from nets, an encoder family, a prior and a likelihood.

:func:`build_model` is the single constructor the stages use; new model kinds
register a builder in ``MODEL_BUILDERS``.
"""

from __future__ import annotations

from typing import Callable

from priorlab.config import ModelParams, SetupParams
from priorlab.likelihoods import build_likelihood
from priorlab.models.posterior import GaussianPosterior
from priorlab.models.vae import VAE
from priorlab.nets import build_decoder, build_encoder
from priorlab.priors import StandardNormalPrior


def _build_vae(setup: SetupParams, model: ModelParams, obs_shape: tuple[int, ...]) -> VAE:
    posterior = GaussianPosterior(setup.latent_dim)
    likelihood = build_likelihood(setup.likelihood, obs_shape, setup.obs_std, setup.learn_obs_std)
    encoder = build_encoder(
        setup.encoder, obs_shape, posterior.params_per_dim * setup.latent_dim, setup.hidden, setup.channels
    )
    decoder = build_decoder(
        setup.decoder, setup.latent_dim, obs_shape, likelihood.params_per_pixel, setup.hidden, setup.channels
    )
    return VAE(encoder, posterior, decoder, likelihood, StandardNormalPrior(setup.latent_dim), beta=model.beta)


MODEL_BUILDERS: dict[str, Callable[[SetupParams, ModelParams, tuple[int, ...]], VAE]] = {"vae": _build_vae}

def build_model(setup: SetupParams, model: ModelParams, obs_shape: tuple[int, ...]) -> VAE:
    try:
        builder = MODEL_BUILDERS[model.kind]
    except KeyError:
        raise ValueError(f"unknown model kind {model.kind!r}; allowed: {', '.join(MODEL_BUILDERS)}") from None
    return builder(setup, model, tuple(obs_shape))


__all__ = ["MODEL_BUILDERS", "VAE", "build_model"]
