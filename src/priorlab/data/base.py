"""The ground-truth data interface shared by every synthetic data set.

Mirrors disentanglement_lib's ``GroundTruthData``: a data set with known
generative factors can sample factor values and render observations from
given factors.  Every random draw goes through an explicit ``random_state``.
"""

from __future__ import annotations

import abc
from typing import Sequence

import numpy as np


def heldout_rows(n: int, test_fraction: float, random_state, fold: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Sorted (train, test) row indices of ``n`` rows, ``round(test_fraction · n)`` held out.  Without
    ``fold``: the first rows of a permutation drawn with ``random_state``.  With ``fold = k``: block k
    of that permutation cut into ``round(1 / test_fraction)`` near-equal blocks, so that the test rows
    of different folds are disjoint (k-fold cross-validation; the training rows of two folds overlap)."""
    if not 0.0 < float(test_fraction) < 1.0:
        raise ValueError(f"test_fraction must lie in (0, 1), got {test_fraction}")
    perm = as_random_state(random_state).permutation(n)
    if fold is None:
        n_test = int(round(n * float(test_fraction)))
        if not 0 < n_test < n:
            raise ValueError(f"test_fraction {test_fraction} leaves an empty split of {n} rows")
        return np.sort(perm[n_test:]), np.sort(perm[:n_test])
    folds = int(round(1.0 / float(test_fraction)))
    if not 0 <= fold < folds or folds < 2 or folds > n:
        raise ValueError(f"fold {fold} of {folds} (test_fraction {test_fraction}) on {n} rows: need 0 <= fold < "
                         f"{folds} <= rows")
    blocks = np.array_split(perm, folds)
    return np.sort(np.concatenate(blocks[:fold] + blocks[fold + 1:])), np.sort(blocks[fold])


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
