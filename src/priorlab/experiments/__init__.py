"""Experiment-level analyses that read several trained runs (one module per paper experiment)."""
