"""Convolutional encoder and decoder bodies.

``conv``: the architecture of disentanglement_lib / Burgess et al. (2018): 4x4 stride-2
convolutions halving the resolution, then a fully connected layer; the decoder mirrors it with
transposed convolutions.  Works for 32x32 and 64x64 inputs (``len(channels)`` halvings must leave
at least 2x2 pixels).

``conv3``: paper 001's MNIST encoder (sec. 4.1, after Gulrajani et al. 2017): 3x3 convolutions with
strides 1 and 2 alternating, ReLU between them, then one linear layer to the posterior parameters
(2DI); any input size.  The ``conv3`` decoder mirrors it.
"""

from __future__ import annotations

import torch
from torch import nn


def _final_side(side: int, n_layers: int) -> int:
    out = side >> n_layers
    if out < 2 or side % (1 << n_layers):
        raise ValueError(
            f"conv net: {n_layers} stride-2 layers do not fit a {side}x{side} input "
            f"(need a side divisible by {1 << n_layers} leaving >= 2 pixels)"
        )
    return out


class ConvEncoder(nn.Module):
    def __init__(self, obs_shape: tuple[int, ...], channels: list[int], hidden: int, out_features: int):
        super().__init__()
        c_in, side = obs_shape[0], obs_shape[-1]
        self.final = _final_side(side, len(channels))
        layers: list[nn.Module] = []
        for c in channels:
            layers += [nn.Conv2d(c_in, c, 4, stride=2, padding=1), nn.ReLU()]
            c_in = c
        self.conv = nn.Sequential(*layers)
        self.fc = nn.Sequential(
            nn.Linear(c_in * self.final**2, hidden), nn.ReLU(), nn.Linear(hidden, out_features)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.conv(x).flatten(1))


PAPER_001_CHANNELS = (32, 32, 32, 64, 64, 64, 64, 64)
"""Paper 001 sec. 4.1: "8 layers of kernel size 3 ... 32 in the first 3 layers, then 64 in the last five"."""


def strided_sides(side: int, n_layers: int) -> list[int]:
    """The side after each layer of :class:`StridedConvEncoder` (3x3, padding 1, strides 1, 2, 1, 2, ...)."""
    sides = []
    for i in range(n_layers):
        side = (side - 1) // (1 + i % 2) + 1
        sides.append(side)
    return sides


class StridedConvEncoder(nn.Module):
    """3x3 convolutions (padding 1) with strides 1, 2, 1, 2, ... and a ReLU after each, then a linear
    layer: ``channels`` = (32,) * 3 + (64,) * 5 is paper 001's 8-layer CNN (sec. 4.1); on 28x28 MNIST
    the four stride-2 layers leave 64 x 2 x 2 features."""

    def __init__(self, obs_shape: tuple[int, ...], channels: list[int], out_features: int):
        super().__init__()
        c_in = obs_shape[0]
        layers: list[nn.Module] = []
        for i, c in enumerate(channels):
            layers += [nn.Conv2d(c_in, c, 3, stride=1 + i % 2, padding=1), nn.ReLU()]
            c_in = c
        self.conv = nn.Sequential(*layers)
        side = ([obs_shape[-1]] + strided_sides(obs_shape[-1], len(channels)))[-1]
        self.fc = nn.Linear(c_in * side * side, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.conv(x).flatten(1))


class StridedConvDecoder(nn.Module):
    """The mirror of :class:`StridedConvEncoder` (paper 001 sec. 4.1: the decoder is "a conventional
    convolutional architecture" after Gulrajani et al. 2017, whose layers the text does not give): a
    linear layer to the encoder's last feature map, then its layers in reverse order, a 3x3 transposed
    convolution (padding 1) each with the stride of the layer it undoes and the output padding that
    restores that layer's input side exactly, a ReLU between them; the last one emits
    ``params_per_feature`` maps per observation channel.  ``channels``: the encoder's, first layer first."""

    def __init__(self, latent_dim: int, channels: list[int], obs_shape: tuple[int, ...], params_per_feature: int = 1):
        super().__init__()
        c_obs, side = obs_shape[0], obs_shape[-1]
        sides = [side] + strided_sides(side, len(channels))  # input side of each encoder layer, then its output
        self.start = (channels[-1], sides[-1], sides[-1])
        self.fc = nn.Sequential(nn.Linear(latent_dim, channels[-1] * sides[-1] ** 2), nn.ReLU())
        layers: list[nn.Module] = []
        for i in reversed(range(len(channels))):  # undo encoder layer i: channels[i] x sides[i+1] -> sides[i]
            stride = 1 + i % 2
            c_out = channels[i - 1] if i > 0 else c_obs * params_per_feature
            pad = sides[i] - ((sides[i + 1] - 1) * stride + 1)
            layers.append(nn.ConvTranspose2d(channels[i], c_out, 3, stride=stride, padding=1, output_padding=pad))
            if i > 0:
                layers.append(nn.ReLU())
        self.deconv = nn.Sequential(*layers)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.deconv(self.fc(z).view(z.shape[0], *self.start))


class ConvDecoder(nn.Module):
    def __init__(
        self, latent_dim: int, channels: list[int], hidden: int, obs_shape: tuple[int, ...], params_per_feature: int = 1
    ):
        super().__init__()
        side = obs_shape[-1]
        self.final = _final_side(side, len(channels))
        rev = list(reversed(channels))
        self.start = (rev[0], self.final, self.final)
        self.fc = nn.Sequential(
            nn.Linear(latent_dim, hidden), nn.ReLU(), nn.Linear(hidden, rev[0] * self.final**2), nn.ReLU()
        )
        layers: list[nn.Module] = []
        outs = rev[1:] + [obs_shape[0] * params_per_feature]
        for i, (a, b) in enumerate(zip(rev, outs)):
            layers.append(nn.ConvTranspose2d(a, b, 4, stride=2, padding=1))
            if i < len(outs) - 1:
                layers.append(nn.ReLU())
        self.deconv = nn.Sequential(*layers)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.deconv(self.fc(z).view(z.shape[0], *self.start))
