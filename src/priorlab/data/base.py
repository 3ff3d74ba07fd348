"""The ground-truth data interface shared by every synthetic data set.

Mirrors disentanglement_lib's ``GroundTruthData``: a data set with known
generative factors can sample factor values and render observations from
given factors.  Every random draw goes through an explicit ``random_state``.
"""

from __future__ import annotations

import abc
from typing import Sequence

import numpy as np


def as_random_state(random_state) -> np.random.RandomState:
    """Return a ``numpy.random.RandomState`` from a seed or an existing state."""
    if isinstance(random_state, np.random.RandomState):
        return random_state
    if random_state is None:
        raise ValueError("random_state must be given explicitly (a seed or a RandomState)")
    return np.random.RandomState(int(random_state))


class GroundTruthData(abc.ABC):
    """A data set whose observations are a function of discrete factors.

    Subclasses define ``factor_names``, ``factor_sizes`` (the number of values
    of each factor; continuous factors are exposed discretised), the
    ``observation_shape`` and ``sample_observations_from_factors``.
    """

    factor_names: Sequence[str]

    @property
    @abc.abstractmethod
    def factor_sizes(self) -> tuple[int, ...]:
        """Number of values each factor takes."""

    @property
    @abc.abstractmethod
    def observation_shape(self) -> tuple[int, ...]:
        """Shape of one observation (e.g. ``(1, 32, 32)`` for a grey image)."""

    @property
    def num_factors(self) -> int:
        return len(self.factor_sizes)

    def sample_factors(self, num: int, random_state) -> np.ndarray:
        """Sample ``num`` factor vectors, uniformly per factor: int array ``[num, K]``."""
        rs = as_random_state(random_state)
        sizes = np.asarray(self.factor_sizes)
        return (rs.random_sample((num, len(sizes))) * sizes).astype(np.int64)

    @abc.abstractmethod
    def sample_observations_from_factors(self, factors: np.ndarray, random_state) -> np.ndarray:
        """Render observations ``float32 [num, *observation_shape]`` for int factors ``[num, K]``."""

    def sample(self, num: int, random_state) -> tuple[np.ndarray, np.ndarray]:
        """Sample factors and the matching observations."""
        rs = as_random_state(random_state)
        factors = self.sample_factors(num, rs)
        return factors, self.sample_observations_from_factors(factors, rs)

    def sample_observations(self, num: int, random_state) -> np.ndarray:
        return self.sample(num, random_state)[1]
