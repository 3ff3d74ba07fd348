"""priorlab: structured and sparse latent priors for deep generative models."""

__version__ = "0.1.0"
