"""sparse_vae_experiments."""
