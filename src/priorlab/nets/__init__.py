"""Encoder and decoder bodies shared by every model (identical nets keep comparisons fair), and
:func:`build_nets`: a setup's nets with its likelihood."""

from __future__ import annotations

from typing import TYPE_CHECKING

from torch import nn

from priorlab.likelihoods import build_likelihood
from priorlab.nets.conv import PAPER_001_CHANNELS, ConvDecoder, ConvEncoder, StridedConvDecoder, StridedConvEncoder
from priorlab.nets.mlp import MLPDecoder, MLPEncoder

if TYPE_CHECKING:
    from priorlab.config import SetupParams


def build_encoder(kind: str, obs_shape, out_features: int, hidden: list[int], channels: list[int],
                  encoder_channels: list[int] | None = None) -> nn.Module:
    """Encoder body mapping observations to ``out_features`` posterior parameters (``conv3``: its
    ``encoder_channels``, by default paper 001's eight)."""
    if kind == "mlp":
        return MLPEncoder(obs_shape, hidden, out_features)
    if kind == "conv":
        return ConvEncoder(obs_shape, channels, hidden[-1] if hidden else 256, out_features)
    if kind == "conv3":
        return StridedConvEncoder(obs_shape, list(encoder_channels or PAPER_001_CHANNELS), out_features)
    raise ValueError(f"unknown encoder {kind!r}; allowed: mlp, conv, conv3")


def build_decoder(
    kind: str, latent_dim: int, obs_shape, params_per_feature: int, hidden: list[int], channels: list[int],
    decoder_hidden: list[int] | None = None, activation: str = "relu", encoder_channels: list[int] | None = None,
    decoder_channels: list[int] | None = None,
) -> nn.Module:
    """Decoder body mapping codes to ``params_per_feature`` maps per observation channel; the MLP's
    layers are ``decoder_hidden``, or the encoder's ``hidden`` reversed when None; ``conv3`` mirrors a
    conv3 encoder of ``decoder_channels``, by default of ``encoder_channels`` (default paper 001's)."""
    if kind == "mlp":
        layers = list(reversed(hidden)) if decoder_hidden is None else list(decoder_hidden)
        return MLPDecoder(latent_dim, layers, obs_shape, params_per_feature, activation)
    if kind == "conv":
        return ConvDecoder(latent_dim, channels, hidden[-1] if hidden else 256, obs_shape, params_per_feature)
    if kind == "conv3":
        return StridedConvDecoder(latent_dim, list(decoder_channels or encoder_channels or PAPER_001_CHANNELS), obs_shape,
                                  params_per_feature)
    raise ValueError(f"unknown decoder {kind!r}; allowed: mlp, conv, conv3")


def build_nets(setup: SetupParams, obs_shape: tuple[int, ...], params_per_dim: int):
    """The setup's encoder body, decoder body and likelihood: identical for every model kind,
    so that comparisons are fair (the posterior family sets ``params_per_dim`` of the encoder)."""
    likelihood = build_likelihood(setup.likelihood, obs_shape, setup.obs_std, setup.learn_obs_std)
    encoder = build_encoder(setup.encoder, obs_shape, params_per_dim * setup.latent_dim, setup.hidden, setup.channels,
                            setup.encoder_channels)
    decoder = build_decoder(setup.decoder, setup.latent_dim, obs_shape, likelihood.params_per_feature, setup.hidden,
                            setup.channels, setup.decoder_hidden, setup.decoder_activation, setup.encoder_channels,
                            setup.decoder_channels)
    return encoder, decoder, likelihood


__all__ = ["ConvDecoder", "ConvEncoder", "MLPDecoder", "MLPEncoder", "StridedConvDecoder", "StridedConvEncoder", "build_decoder", "build_encoder", "build_nets"]
