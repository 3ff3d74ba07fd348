"""fmvae_experiments."""
