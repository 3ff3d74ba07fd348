"""mssc_experiments."""
