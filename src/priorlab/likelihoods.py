"""Observation models p(x | z): the one place reconstruction terms are computed.

A likelihood turns the decoder output into a ``torch.distributions``
distribution over the whole observation (pixels summed via ``Independent``).
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.distributions import Bernoulli, Distribution, Independent, Normal


class Likelihood(nn.Module):
    """Base class: ``params_per_pixel`` decoder maps per observation channel."""

    params_per_pixel: int = 1

    def distribution(self, decoder_out: torch.Tensor) -> Distribution:
        raise NotImplementedError

    def log_prob(self, x: torch.Tensor, decoder_out: torch.Tensor) -> torch.Tensor:
        """log p(x | z) per observation, summed over pixels: shape ``[batch]``."""
        return self.distribution(decoder_out).log_prob(x)

    def mean(self, decoder_out: torch.Tensor) -> torch.Tensor:
        return self.distribution(decoder_out).mean


class BernoulliLikelihood(Likelihood):
    """Pixels in [0, 1] with Bernoulli logits (the continuous relaxation for grey values)."""

    def distribution(self, decoder_out: torch.Tensor) -> Distribution:
        return Independent(Bernoulli(logits=decoder_out, validate_args=False), decoder_out.dim() - 1)

    def log_prob(self, x: torch.Tensor, decoder_out: torch.Tensor) -> torch.Tensor:
        # -BCE with logits, numerically stable and valid for non-binary targets
        ll = -nn.functional.binary_cross_entropy_with_logits(decoder_out, x, reduction="none")
        return ll.flatten(1).sum(1)


class GaussianLikelihood(Likelihood):
    """N(x; mean(z), σ²) with σ fixed, or learned (one σ per pixel, shared over data)."""

    def __init__(self, obs_shape: tuple[int, ...], std: float = 0.1, learn_std: bool = False):
        super().__init__()
        log_std = torch.full(tuple(obs_shape), math.log(std))
        if learn_std:
            self.log_std = nn.Parameter(log_std)
        else:
            self.register_buffer("log_std", log_std)

    def distribution(self, decoder_out: torch.Tensor) -> Distribution:
        scale = self.log_std.exp().expand_as(decoder_out)
        return Independent(Normal(decoder_out, scale), decoder_out.dim() - 1)


def build_likelihood(kind: str, obs_shape, std: float = 0.1, learn_std: bool = False) -> Likelihood:
    if kind == "bernoulli":
        return BernoulliLikelihood()
    if kind == "gaussian":
        return GaussianLikelihood(obs_shape, std, learn_std)
    raise ValueError(f"unknown likelihood {kind!r}; allowed: bernoulli, gaussian")
