"""The parameter errors and the small checks every parameter class uses."""

from __future__ import annotations

from priorlab.errors import UserError


class ParamsError(UserError, ValueError):
    """An invalid parameter; the message names the key and what is allowed."""


def _positive(key: str, value) -> None:
    if not value > 0:
        raise ParamsError(f"{key} must be > 0, got {value!r}")


def _non_negative(key: str, value) -> None:
    if not value >= 0:
        raise ParamsError(f"{key} must be >= 0, got {value!r}")


def _one_of(key: str, value, allowed) -> None:
    if value not in allowed:
        raise ParamsError(f"{key}: unknown value {value!r}; allowed: {', '.join(map(str, allowed))}")


def builder_for(params, names: dict[str, type], builders: dict[type, object], what: str):
    """The builder of a tagged-union entry (``params.kind``) of a ``what`` ("model", "prior", "data
    set"): its kind must be registered in ``names`` (the one registry of names, e.g. ``MODEL_PARAMS``)
    with exactly ``params``' class, and ``builders`` (keyed by parameter class) must hold one."""
    cls = names.get(params.kind)
    if cls is None:
        raise ValueError(f"unknown {what} kind {params.kind!r}; allowed: {', '.join(names)}")
    if type(params) is not cls:
        raise TypeError(f"{what} kind {params.kind!r} takes {cls.__name__}, got {type(params).__name__}")
    try:
        return builders[cls]
    except KeyError:
        raise ValueError(f"{what} kind {params.kind!r} ({cls.__name__}) has no builder") from None
