"""Models: every kind implements the protocol of :mod:`priorlab.models.protocol`.

The VAE family is one ``VAE`` class assembled from nets, an encoder family, a
prior and a likelihood.  :func:`build_model` is the single constructor the
stages use.  A model kind is registered once, with its parameter class, in ``config.MODEL_PARAMS``;
the class names its builder (``BUILDER``: one of the ``build_*`` functions here, or of a model's own
module), so adding a kind touches one registry.
"""

from __future__ import annotations

import math

from priorlab.config import MODEL_PARAMS, ModelParams, SetupParams
from priorlab.config.checks import builder_for
from priorlab.config.models import encoder_input_of, loss_scaling_of
from priorlab.models.elbo import LossScaling
from priorlab.models.posterior import GaussianPosterior
from priorlab.models.protocol import Model
from priorlab.models.vae import VAE
from priorlab.likelihoods import build_likelihood
from priorlab.nets import build_encoder, build_nets
from priorlab.priors import build_prior


FEATURE_MEAN_LIKELIHOODS = ("gaussian", "gaussian_ig", "gaussian_ig_released")  # the released code's MSE mean over features


def loss_scaling(model: ModelParams, setup: SetupParams, obs_shape: tuple[int, ...]) -> LossScaling:
    """The :class:`LossScaling` of a ``vae`` / ``sparse_vae`` entry on this setup (``paper`` for the
    kinds without the option): ``released_code`` weighs a Gaussian log-likelihood 1/G (G = the number
    of observed values) and the KL 1/K."""
    return LossScaling.named(loss_scaling_of(model), math.prod(obs_shape), setup.latent_dim,
                             feature_mean=setup.likelihood in FEATURE_MEAN_LIKELIHOODS)


def build_vae(setup: SetupParams, model: ModelParams, obs_shape: tuple[int, ...]) -> VAE:
    posterior = GaussianPosterior(setup.latent_dim)
    encoder, decoder, likelihood = build_nets(setup, obs_shape, posterior.params_per_dim)
    prior = build_prior(model.prior, setup.latent_dim)
    return VAE(encoder, posterior, decoder, likelihood, prior, beta=model.beta, encoder_input=encoder_input_of(model),
               scaling=loss_scaling(model, setup, obs_shape))


def build_vsc(setup: SetupParams, model: ModelParams, obs_shape: tuple[int, ...]) -> VAE:
    """VSC (paper 002) on the setup's nets; the encoder emits μ, log σ², v per latent."""
    from priorlab.models.vsc import (  # lazy: +2 modules, ~14 ms at import priorlab.models (all six: ~29 ms)
        VSC, PseudoInputPrior, SpikeSlabPosterior)

    model = model.resolved()  # the released-code preset, if chosen
    posterior = SpikeSlabPosterior(setup.latent_dim, model.warmup_variant, model.sharpness_start)
    encoder, decoder, likelihood = build_nets(setup, obs_shape, posterior.params_per_dim)
    prior = PseudoInputPrior(obs_shape, model.n_pseudo_inputs, model.selector, model.selector_scale,
                             model.selector_shift, init=model.pseudo_input_init)
    return VSC(encoder, posterior, decoder, likelihood, prior, alpha=model.alpha, beta=model.beta,
               warmup_ramp_steps=model.warmup_ramp_steps, sharpness_start=model.sharpness_start,
               sharpness_end=model.sharpness_end, sharpness_ramp_steps=model.sharpness_ramp_steps,
               prior_spike_sharpening=model.prior_spike_sharpening, kl_slabs=model.kl_slabs,
               bernoulli_kl=model.bernoulli_kl, encoder_input=model.encoder_input)


def build_beta_tcvae(setup: SetupParams, model: ModelParams, obs_shape: tuple[int, ...]) -> VAE:
    """β-TCVAE (Chen et al. 2018) on exactly the VAE's nets and the configured prior."""
    from priorlab.models.beta_tcvae import (  # lazy: +2 modules, ~5 ms at import priorlab.models (all six: ~29 ms)
        BetaTCVAE)

    vae = build_vae(setup, model, obs_shape)
    return BetaTCVAE(vae.encoder, vae.posterior_head, vae.decoder, vae.likelihood, vae.prior,
                     tc_weight=model.tc_weight, mi_weight=model.mi_weight, dimwise_weight=model.dimwise_weight,
                     estimator=model.estimator)


def build_ppca(setup: SetupParams, model: ModelParams, obs_shape: tuple[int, ...]) -> Model:
    """Probabilistic PCA by online EM (the setup's nets are not used)."""
    from priorlab.models.ppca import PPCA  # lazy: +1 module, ~5 ms at import priorlab.models (all six: ~29 ms)

    return PPCA(obs_shape, setup.latent_dim, tau0=model.tau0, kappa=model.kappa, init_scale=model.init_scale)


def build_factor_vae(setup: SetupParams, model: ModelParams, obs_shape: tuple[int, ...]) -> Model:
    """FactorVAE (Kim & Mnih 2018) on exactly the VAE's nets and the configured prior, + a discriminator."""
    from priorlab.models.factor_vae import (  # lazy: +1 module, ~4 ms at import priorlab.models (all six: ~29 ms)
        FactorVAE)

    vae = build_vae(setup, model, obs_shape)
    return FactorVAE(vae.encoder, vae.posterior_head, vae.decoder, vae.likelihood, vae.prior, setup.latent_dim,
                     gamma=model.gamma, beta=model.beta, discriminator_hidden=model.discriminator_hidden,
                     vae_betas=tuple(model.vae_betas), discriminator_lr=model.discriminator_lr,
                     discriminator_betas=tuple(model.discriminator_betas))


def build_sparse_coding(setup: SetupParams, model: ModelParams, obs_shape: tuple[int, ...]) -> Model:
    """Spike-and-slab sparse coding (paper 000), max rule (``mssc``) or linear (``linear_ssc``); H = latent_dim."""
    from priorlab.models.mssc import (  # lazy: +2 modules, ~20 ms at import priorlab.models (all six: ~29 ms)
        SparseCodingModel)

    return SparseCodingModel(obs_shape, setup.latent_dim, model.rule, n_candidates=model.n_candidates,
                             n_chains=model.n_chains, samples_per_chain=model.samples_per_chain,
                             burn_in=model.burn_in, thin=model.thin, gibbs_init=model.gibbs_init,
                             anneal_start=model.anneal_start, anneal_iters=model.anneal_iters,
                             safeguard=model.safeguard, nonnegative=model.nonnegative, init_noise=model.init_noise,
                             init_mu_pr=model.init_mu_pr, init_var_pr=model.init_var_pr)


def build_sparse_vae(setup: SetupParams, model: ModelParams, obs_shape: tuple[int, ...]) -> Model:
    """Sparse VAE (paper 003): the VAE's encoder and likelihood, a masked decoder whose trunk has the
    setup's hidden widths, the SSL prior on W (b = G), prior N(0, I) or N(0, prior_cov).  On an image the
    G features are its pixels (:class:`~priorlab.models.sparse_vae.MaskedDecoder`)."""
    import torch

    from priorlab.models.sparse_vae import (  # lazy: +1 module, ~5 ms at import priorlab.models (all six: ~29 ms)
        MaskedDecoder, SparseVAE, SpikeSlabLasso)

    if model.prior_cov and len(model.prior_cov) != setup.latent_dim:
        raise ValueError(f"prior_cov is {len(model.prior_cov)} x {len(model.prior_cov)}; latent_dim is {setup.latent_dim}")
    posterior = GaussianPosterior(setup.latent_dim)
    likelihood = build_likelihood(setup.likelihood, obs_shape, setup.obs_std, setup.learn_obs_std)
    encoder = build_encoder(setup.encoder, obs_shape, posterior.params_per_dim * setup.latent_dim, setup.hidden,
                            setup.channels)
    decoder = MaskedDecoder(obs_shape, setup.latent_dim, setup.hidden, likelihood.params_per_feature)
    scaling = loss_scaling(model, setup, obs_shape)
    ssl = SpikeSlabLasso(decoder.n_features, setup.latent_dim, model.lambda0, model.lambda1,
                         theta_init="uniform" if scaling.name == "released_code" else 0.5,
                         density_constants=model.density_constants)
    cov = torch.tensor(model.prior_cov, dtype=torch.float32) if model.prior_cov else None
    return SparseVAE(encoder, posterior, decoder, likelihood, build_prior(model.prior, setup.latent_dim), ssl,
                     beta=model.beta, encoder_input=model.encoder_input, prior_cov=cov, scaling=scaling)


def build_model(setup: SetupParams, model: ModelParams, obs_shape: tuple[int, ...]) -> Model:
    """The model of a ``models:`` entry on a setup's nets (its builder chosen by the entry's class)."""
    builder = builder_for(model, MODEL_PARAMS, "model")
    return builder(setup, model, tuple(obs_shape))


__all__ = ["VAE", "Model", "build_model", "build_nets"]
