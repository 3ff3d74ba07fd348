"""Stand-ins for PyYAML and tqdm, for a machine with only torch and the scientific stack.

The GPU benchmark (``scripts/gpu_bench.py``) runs where priorlab is not installed: torch, numpy,
scikit-learn, pandas and matplotlib are there, PyYAML and tqdm may not be.  :func:`install` puts
a module in their place *only when the real one cannot be imported*:

* ``yaml`` — :func:`safe_load` for the subset of YAML the profiles use (block mappings by
  indentation, ``#`` comments, flow ``[...]`` / ``{...}`` collections possibly spanning lines,
  plain and quoted scalars resolved as PyYAML's YAML 1.1 resolver does: ``1e-4`` without a dot is
  a string, ``1.0e-4`` a float); anything else raises :class:`YAMLError` rather than guess.
  ``tests/test_minimal_deps.py`` checks it against PyYAML on every profile.
* ``tqdm`` / ``tqdm.auto`` — a progress bar that shows nothing.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import re
import sys
import types

_INT = re.compile(r"^[-+]?(?:0|[1-9][0-9_]*)$")
_FLOAT = re.compile(r"^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?|\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?"
                    r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$")
_BOOL = {**{w: True for w in ("yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON")},
         **{w: False for w in ("no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF")}}
_NULL = ("", "~", "null", "Null", "NULL")


class YAMLError(Exception):
    """Text outside the supported subset (or not YAML)."""


def _scalar(text: str):
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        body = text[1:-1]
        return body.replace("''", "'") if text[0] == "'" else bytes(body, "utf-8").decode("unicode_escape")
    if text in _NULL:
        return None
    if text in _BOOL:
        return _BOOL[text]
    if _INT.match(text):
        return int(text.replace("_", ""))
    if _FLOAT.match(text):
        low = text.lower()
        if low.endswith(".inf"):
            return float("-inf") if low.startswith("-") else float("inf")
        if low.endswith(".nan"):
            return float("nan")
        return float(text.replace("_", ""))
    if text[:1] in "[]{}&*!|>%@`" or text.startswith("- "):
        raise YAMLError(f"unsupported YAML scalar: {text!r}")
    return text


def _strip_comment(line: str) -> str:
    """``line`` without a ``#`` comment (a ``#`` at the start or after a blank, outside quotes)."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1] in " \t"):
            return line[:i].rstrip()
    return line.rstrip()


def _split_flow(body: str) -> list[str]:
    """Top-level comma-separated items of a flow collection's inside."""
    items, depth, quote, start = [], 0, None, 0
    for i, ch in enumerate(body):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        elif ch == "," and depth == 0:
            items.append(body[start:i])
            start = i + 1
    tail = body[start:]
    if tail.strip():
        items.append(tail)
    return [item.strip() for item in items]


def _flow(text: str):
    text = text.strip()
    if text.startswith("[") and text.endswith("]"):
        return [_flow(item) for item in _split_flow(text[1:-1])]
    if text.startswith("{") and text.endswith("}"):
        out = {}
        for item in _split_flow(text[1:-1]):
            key, sep, value = item.partition(":")
            if not sep:
                raise YAMLError(f"flow mapping entry without a colon: {item!r}")
            out[_scalar(key)] = _flow(value)
        return out
    return _scalar(text)


def _balance(text: str) -> int:
    depth, quote = 0, None
    for ch in text:
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
    return depth


def safe_load(text) -> object:
    """Parse the supported YAML subset (see the module docstring) into dicts, lists and scalars."""
    if not isinstance(text, str):
        text = text.read()
    lines = []  # (indent, content) of the logical lines, flow collections joined
    pending = None
    for raw in text.splitlines():
        line = _strip_comment(raw)
        if pending is not None:
            pending = (pending[0], pending[1] + " " + line.strip())
            if _balance(pending[1]) == 0:
                lines.append(pending)
                pending = None
            continue
        if not line.strip() or line.strip() in ("---", "..."):
            continue
        if "\t" in line[: len(line) - len(line.lstrip())]:
            raise YAMLError("tabs in indentation")
        entry = (len(line) - len(line.lstrip(" ")), line.strip())
        if _balance(entry[1]) > 0:
            pending = entry
        else:
            lines.append(entry)
    if pending is not None:
        raise YAMLError("unclosed flow collection")
    if not lines:
        return None
    value, end = _block(lines, 0, lines[0][0])
    if end != len(lines):
        raise YAMLError(f"unexpected indentation at {lines[end][1]!r}")
    return value


def _block(lines, i: int, indent: int):
    """The block mapping whose keys sit at ``indent`` from line ``i``; returns (mapping, next line)."""
    out: dict = {}
    while i < len(lines) and lines[i][0] == indent:
        content = lines[i][1]
        if content.startswith("- ") or content == "-":
            raise YAMLError(f"block sequences are not supported: {content!r}")
        match = re.match(r"^((?:'[^']*'|\"[^\"]*\"|[^:#]|:(?=\S))+?)\s*:(?:\s+(.*))?$", content)
        if not match:
            raise YAMLError(f"not a 'key: value' line: {content!r}")
        key, rest = _scalar(match.group(1)), (match.group(2) or "").strip()
        i += 1
        if rest:
            if rest[0] in "|>&*!":
                raise YAMLError(f"unsupported YAML value: {rest!r}")
            out[key] = _flow(rest)
        elif i < len(lines) and lines[i][0] > indent:
            out[key], i = _block(lines, i, lines[i][0])
        else:
            out[key] = None
    if i < len(lines) and lines[i][0] > indent:
        raise YAMLError(f"unexpected indentation at {lines[i][1]!r}")
    return out, i


class _SilentBar:
    """``tqdm``'s interface used here, showing nothing."""

    def __init__(self, iterable=None, *args, **kwargs):
        self.iterable = iterable

    def __iter__(self):
        return iter(self.iterable if self.iterable is not None else ())

    def update(self, n: int = 1) -> None:
        pass

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _module(name: str) -> types.ModuleType:
    """An empty module with a spec (no origin: ``importlib.util.find_spec`` users, e.g. torch's
    dynamo, take it for a built-in and leave it alone)."""
    mod = types.ModuleType(name, "priorlab.minimal_deps stand-in")
    mod.__spec__ = importlib.machinery.ModuleSpec(name, None)
    return mod


def _importable(name: str) -> bool:
    try:
        importlib.import_module(name)
    except ImportError:
        return False
    return True


def install() -> list[str]:
    """Register the stand-ins for ``yaml`` and ``tqdm`` that cannot be imported; returns their names."""
    installed = []
    if not _importable("yaml"):
        mod = _module("yaml")
        mod.safe_load, mod.YAMLError = safe_load, YAMLError
        sys.modules["yaml"] = mod
        installed.append("yaml")
    if not _importable("tqdm.auto"):
        mod, auto = _module("tqdm"), _module("tqdm.auto")
        mod.tqdm = auto.tqdm = _SilentBar
        mod.auto = auto
        sys.modules["tqdm"], sys.modules["tqdm.auto"] = mod, auto
        installed.append("tqdm")
    return installed
