"""Data sets: generators, loaders and the ``GroundTruthData`` interface."""

from priorlab.data.base import GroundTruthData, as_random_state

__all__ = ["GroundTruthData", "as_random_state"]
