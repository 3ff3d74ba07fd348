"""Fully connected encoder and decoder bodies (ReLU MLPs; the decoder's activation is an option)."""

from __future__ import annotations

import math

import torch
from torch import nn


ACTIVATIONS = {"relu": nn.ReLU, "tanh": nn.Tanh}


def mlp(sizes: list[int], final_activation: bool = False, activation: str = "relu") -> nn.Sequential:
    """Linear layers ``sizes[0] -> ... -> sizes[-1]`` with ``activation`` (ReLU or tanh) between them."""
    layers: list[nn.Module] = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        layers.append(nn.Linear(a, b))
        if i < len(sizes) - 2 or final_activation:
            layers.append(ACTIVATIONS[activation]())
    return nn.Sequential(*layers)


class MLPEncoder(nn.Module):
    """Flatten an observation and map it to ``out_features`` head parameters."""

    def __init__(self, obs_shape: tuple[int, ...], hidden: list[int], out_features: int):
        super().__init__()
        self.net = mlp([math.prod(obs_shape), *hidden, out_features])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x.flatten(1))


class MLPDecoder(nn.Module):
    """Map a latent code to ``out_channels`` parameter maps of the observation shape."""

    def __init__(self, latent_dim: int, hidden: list[int], obs_shape: tuple[int, ...], params_per_feature: int = 1,
                 activation: str = "relu"):
        super().__init__()
        self.out_shape = (obs_shape[0] * params_per_feature, *obs_shape[1:])
        self.net = mlp([latent_dim, *hidden, math.prod(self.out_shape)], activation=activation)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.net(z).view(z.shape[0], *self.out_shape)
