"""The tree of an Lp-nested (ISA) prior (paper 004, eq. 3): a root exponent over subspaces of given
exponent and size.  A validated parameter structure, kept in ``config`` so that params are checked
without importing the prior (:mod:`priorlab.priors.lp_nested` builds the density from it)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from numbers import Integral, Real


def is_number(x) -> bool:
    """A real number that is not a bool."""
    return isinstance(x, Real) and not isinstance(x, bool)


@dataclass(frozen=True)
class LpNestedLayout:
    """ISA tree: root exponent ``p0`` over subspaces ``((p_1, n_1), ..., (p_L, n_L))``.

    Param form (``from_params`` / ``to_params``): ``{"p0": 2.1, "subspaces": [[2.2, 5], ...]}``.
    Exponents must be > 1 (the paper keeps them there, p = 1 + softplus(theta)).
    """

    p0: float
    subspaces: tuple[tuple[float, int], ...]

    def __post_init__(self):
        if not is_number(self.p0) or not math.isfinite(self.p0) or self.p0 <= 1.0:
            raise ValueError(f"Lp-nested layout: p0 must be a finite number > 1, got {self.p0!r}")
        if isinstance(self.subspaces, (str, bytes)) or not isinstance(self.subspaces, Sequence) or len(self.subspaces) == 0:
            raise ValueError(f"Lp-nested layout: subspaces must be a non-empty list of [p_l, n_l] pairs, got {self.subspaces!r}")
        clean = []
        for l, entry in enumerate(self.subspaces):
            if isinstance(entry, (str, bytes)) or not isinstance(entry, Sequence) or len(entry) != 2:
                raise ValueError(f"Lp-nested layout: subspace {l} must be a pair [p_l, n_l], got {entry!r}")
            p, n = entry
            if not is_number(p) or not math.isfinite(p) or p <= 1.0:
                raise ValueError(f"Lp-nested layout: subspace {l} exponent p_l must be a finite number > 1, got {p!r}")
            if not isinstance(n, Integral) or isinstance(n, bool) or n < 1:
                raise ValueError(f"Lp-nested layout: subspace {l} size n_l must be an integer >= 1, got {n!r}")
            clean.append((float(p), int(n)))
        object.__setattr__(self, "p0", float(self.p0))
        object.__setattr__(self, "subspaces", tuple(clean))

    @classmethod
    def from_params(cls, params: Mapping) -> "LpNestedLayout":
        if not isinstance(params, Mapping):
            raise ValueError("Lp-nested layout: expected a mapping {'p0': ..., 'subspaces': [[p_l, n_l], ...]}, "
                             f"got {params!r}")
        keys, want = set(params), {"p0", "subspaces"}
        if keys != want:
            raise ValueError(f"Lp-nested layout: keys must be exactly 'p0' and 'subspaces' "
                             f"(missing {sorted(want - keys)}, unknown {sorted(map(str, keys - want))})")
        return cls(params["p0"], params["subspaces"])

    def to_params(self) -> dict:
        return {"p0": self.p0, "subspaces": [[p, n] for p, n in self.subspaces]}

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(n for _, n in self.subspaces)

    @property
    def p_sub(self) -> tuple[float, ...]:
        return tuple(p for p, _ in self.subspaces)

    @property
    def n(self) -> int:
        return sum(self.sizes)
