"""isa_experiments."""
