"""A paper's claim, decided on the numbers as measured, and its Markdown table.

Every experiment module states each claim it tests as a :class:`Claim`: what the
paper says, the criterion used to decide it (fixed before looking at results, never
tuned afterwards), what was measured, and the verdict.  The experiment stages write
their claims into their JSON summaries; the ``report`` stage gathers them into one
table of ``reports/README.md``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Claim:
    """One tested claim. ``reproduced`` is None when the runs needed to decide it are missing."""

    paper: str  # seed id and figure / section, e.g. "002 fig. 9"
    claim: str  # what the paper says
    criterion: str  # how it is decided here
    measured: str  # the numbers it was decided on
    reproduced: bool | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def verdict(value: bool | None) -> str:
    return {True: "yes", False: "**no**", None: "not tested"}[value]


def md_table(header: list[str], rows: list[list[Any]]) -> list[str]:
    """Markdown table lines; floats with three decimals, ``|`` inside cells escaped."""
    cell = lambda v: (f"{v:.3f}" if isinstance(v, float) else str(v)).replace("|", "\\|")  # noqa: E731
    return ["| " + " | ".join(cell(h) for h in header) + " |", "|" + "---|" * len(header)] + [
        "| " + " | ".join(cell(v) for v in row) + " |" for row in rows]


def claims_table(claims: list[dict[str, Any]]) -> list[str]:
    """Markdown lines of a claims table (``claims``: :meth:`Claim.to_dict` records)."""
    if not claims:
        return []
    return md_table(["paper", "claim", "criterion", "measured", "reproduced"],
                    [[c["paper"], c["claim"], c["criterion"], c["measured"], verdict(c["reproduced"])] for c in claims])


def fmt(values, digits: int = 3) -> str:
    """Compact text of a number or a sequence of numbers."""
    if np.ndim(values) == 0:
        return f"{float(values):.{digits}f}"
    return "[" + ", ".join(f"{float(v):.{digits}f}" for v in values) + "]"


def monotone(values, increasing: bool) -> bool:
    """Strictly monotone sequence (in the given direction)."""
    d = np.diff(np.asarray(values, dtype=float))
    return bool(len(d) > 0 and (np.all(d > 0) if increasing else np.all(d < 0)))
