"""Small shared fixtures for the tests (tiny models and data)."""

from __future__ import annotations

import torch

from priorlab.config import SetupParams, VAEParams
from priorlab.models import build_model
from priorlab.models.protocol import TrainingSet


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def tiny_model(latent_dim: int = 3, obs_shape=(1, 8, 8), beta: float = 1.0, seed: int = 0):
    torch.manual_seed(seed)
    setup = SetupParams(dataset="x", latent_dim=latent_dim, hidden=[16])
    return build_model(setup, VAEParams(kind="vae", beta=beta), obs_shape)


def tiny_data(n: int = 200, obs_shape=(1, 8, 8), seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(n, *obs_shape, generator=g) > 0.7).float()


def as_training_set(x: torch.Tensor, labels: torch.Tensor | None = None) -> TrainingSet:
    """Prepared rows as the trainer's training set (no conversion)."""
    return TrainingSet(x, lambda b: b, labels)


def crash_at(model, step: int) -> None:
    """Make ``model.train_step`` raise KeyboardInterrupt at ``step`` (a killed run, for resume tests)."""
    original = model.train_step

    def train_step(batch, s, ctx):
        if s == step:
            raise KeyboardInterrupt
        return original(batch, s, ctx)

    model.train_step = train_step
