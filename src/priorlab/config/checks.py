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
