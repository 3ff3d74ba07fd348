"""Encoder and decoder bodies shared by every model (identical nets keep comparisons fair)."""

from __future__ import annotations

from torch import nn

from priorlab.nets.conv import ConvDecoder, ConvEncoder
from priorlab.nets.mlp import MLPDecoder, MLPEncoder


def build_encoder(kind: str, obs_shape, out_features: int, hidden: list[int], channels: list[int]) -> nn.Module:
    """Encoder body mapping observations to ``out_features`` posterior parameters."""
    if kind == "mlp":
        return MLPEncoder(obs_shape, hidden, out_features)
    if kind == "conv":
        return ConvEncoder(obs_shape, channels, hidden[-1] if hidden else 256, out_features)
    raise ValueError(f"unknown encoder {kind!r}; allowed: mlp, conv")


def build_decoder(
    kind: str, latent_dim: int, obs_shape, params_per_feature: int, hidden: list[int], channels: list[int]
) -> nn.Module:
    """Decoder body mapping codes to ``params_per_feature`` maps per observation channel."""
    if kind == "mlp":
        return MLPDecoder(latent_dim, list(reversed(hidden)), obs_shape, params_per_feature)
    if kind == "conv":
        return ConvDecoder(latent_dim, channels, hidden[-1] if hidden else 256, obs_shape, params_per_feature)
    raise ValueError(f"unknown decoder {kind!r}; allowed: mlp, conv")


__all__ = ["ConvDecoder", "ConvEncoder", "MLPDecoder", "MLPEncoder", "build_decoder", "build_encoder"]
