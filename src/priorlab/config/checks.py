"""The parameter errors and the small checks every parameter class uses."""

from __future__ import annotations

import importlib

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


def builder_for(params, names: dict[str, type], what: str):
    """The builder of a tagged-union entry (``params.kind``) of a ``what`` ("model", "prior", "data set"):
    its kind must be registered in ``names`` (the one registry of a kind, e.g. ``MODEL_PARAMS``) with
    exactly ``params``' class, and that class declares its builder itself (``BUILDER``, not inherited):
    a ``"module:name"`` path into the layer that builds it (above this one, imported when the first entry
    is built), or, for a class defined beside its builder (a test's kind, a user's), the builder itself."""
    cls = names.get(params.kind)
    if cls is None:
        raise ValueError(f"unknown {what} kind {params.kind!r}; allowed: {', '.join(names)}")
    if type(params) is not cls:
        raise TypeError(f"{what} kind {params.kind!r} takes {cls.__name__}, got {type(params).__name__}")
    builder = vars(cls).get("BUILDER")
    if builder is None:
        raise ValueError(f"{what} kind {params.kind!r} ({cls.__name__}) declares no BUILDER")
    if not isinstance(builder, str):
        return builder
    module, _, name = builder.partition(":")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        raise ValueError(f"{what} kind {params.kind!r}: BUILDER {builder!r} names no 'module:name'") from None
