"""vsc_experiments."""
