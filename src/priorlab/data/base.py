"""The ground-truth data interface shared by every synthetic data set.

Mirrors disentanglement_lib's ``GroundTruthData``: a data set with known
generative factors can sample factor values and render observations from
given factors.  Every random draw goes through an explicit ``random_state``.
"""

from __future__ import annotations

import abc
from typing import Sequence

import numpy as np

from priorlab.errors import DataError


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


class TableGroundTruth(GroundTruthData):
    """Ground truth given as a table of rows (observations with their integer factors), not as a
    renderer: a user's file (the ``file`` data-set kind).  :meth:`sample` draws rows (what MIG, DCI, SAP
    and modularity use); :meth:`sample_observations_from_factors` finds a row with each requested factor
    vector, which the beta-VAE and FactorVAE scores ask for in combinations a table may lack: then a
    :class:`~priorlab.errors.DataError` says so.  Observations come back as stored (the data set's
    ``prepare`` turns them into model input)."""

    def __init__(self, factors: np.ndarray, observations: np.ndarray, source: str = "table"):
        factors = np.asarray(factors)
        if factors.ndim != 2 or len(factors) != len(observations) or not np.issubdtype(factors.dtype, np.integer) \
                or factors.min(initial=0) < 0:
            raise ValueError(f"{source}: factors must be integers >= 0 of shape [{len(observations)}, K]")
        self.factors, self.observations, self.source = factors.astype(np.int64), observations, source
        self.factor_names = tuple(f"factor{i}" for i in range(factors.shape[1]))
        self._rows: dict[bytes, np.ndarray] = {}
        for value in np.unique(self.factors, axis=0):
            self._rows[value.tobytes()] = np.flatnonzero((self.factors == value).all(axis=1))

    @property
    def factor_sizes(self) -> tuple[int, ...]:
        return tuple(int(v) + 1 for v in self.factors.max(axis=0))

    @property
    def observation_shape(self) -> tuple[int, ...]:
        return tuple(self.observations.shape[1:])

    def sample(self, num: int, random_state) -> tuple[np.ndarray, np.ndarray]:
        """``num`` rows drawn with replacement: their factors and observations."""
        idx = as_random_state(random_state).randint(0, len(self.factors), size=num)
        return self.factors[idx], self.observations[idx]

    def sample_observations_from_factors(self, factors: np.ndarray, random_state) -> np.ndarray:
        rs = as_random_state(random_state)
        out = []
        for value in np.asarray(factors, dtype=np.int64):
            rows = self._rows.get(value.tobytes())
            if rows is None:
                raise DataError(f"{self.source}: no row has the factors {value.tolist()}; a metric that renders "
                                "arbitrary factor combinations (beta_vae, factor_vae) needs a complete grid; "
                                "score this data set with mig, dci, sap or modularity")
            out.append(rows[rs.randint(len(rows))])
        return self.observations[np.array(out, dtype=np.int64)]
