"""A paper's claim as a small statistical object: the effect it measures, its 95 % interval, the
threshold, and a verdict in {reproduced, not reproduced, inconclusive, untestable}.

Every criterion lives in :mod:`priorlab.studies.criteria` (text, statistic, threshold, side,
precondition, and the history of its changes); the experiment stages measure an
:class:`~priorlab.studies.intervals.Estimate` per claim and call :meth:`Criterion.decide`.

The rule (the same for every claim):

* **reproduced** iff the interval lies wholly on the claim's side of the threshold (inside the band
  for a band criterion);
* **not reproduced** iff it lies wholly on the other side (wholly outside the band);
* **inconclusive** otherwise — including every estimate from a single unit, which has no interval;
* **untestable** when a stated precondition fails (e.g. a score at its noise floor, a ceiling that
  did not converge, spikes that do not depend on the input).

A claim with several parts (e.g. "at every latent size", "at ≥ 4 of 5 ρ") decides each part by
the rule and combines them with :func:`combine_all` or :func:`combine_at_least`.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from priorlab.studies.intervals import Estimate

REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE, UNTESTABLE = "reproduced", "not reproduced", "inconclusive", "untestable"
VERDICTS = (REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE, UNTESTABLE)
SIDES = (">", "<", "in")


def decide(estimate: Estimate, side: str, threshold: float | tuple[float, float]) -> str:
    """The verdict of one interval against a threshold (``side`` ``>`` / ``<``) or a band (``in``)."""
    lo, hi = estimate.low, estimate.high
    if np.isnan(estimate.value):
        return INCONCLUSIVE
    if side == ">":
        return REPRODUCED if lo > threshold else NOT_REPRODUCED if hi <= threshold else INCONCLUSIVE
    if side == "<":
        return REPRODUCED if hi < threshold else NOT_REPRODUCED if lo >= threshold else INCONCLUSIVE
    if side == "in":
        a, b = threshold
        return REPRODUCED if a <= lo and hi <= b else NOT_REPRODUCED if hi < a or lo > b else INCONCLUSIVE
    raise ValueError(f"side must be one of {SIDES}, got {side!r}")


def combine_all(verdicts: list[str]) -> str:
    """Every part must hold: reproduced iff all are; not reproduced iff any is not; untestable iff
    a part is untestable and none is not reproduced; inconclusive otherwise."""
    if not verdicts:
        return INCONCLUSIVE
    if NOT_REPRODUCED in verdicts:
        return NOT_REPRODUCED
    if UNTESTABLE in verdicts:
        return UNTESTABLE
    return REPRODUCED if all(v == REPRODUCED for v in verdicts) else INCONCLUSIVE


def combine_at_least(verdicts: list[str], k: int) -> str:
    """At least ``k`` parts must hold: reproduced iff ≥ k are; not reproduced iff more than
    ``len − k`` are not (k can no longer be reached); inconclusive otherwise."""
    if sum(v == REPRODUCED for v in verdicts) >= k:
        return REPRODUCED
    if sum(v == NOT_REPRODUCED for v in verdicts) > len(verdicts) - k:
        return NOT_REPRODUCED
    return INCONCLUSIVE


@dataclass(frozen=True)
class Criterion:
    """How one claim is decided, written before its numbers exist.

    ``statistic`` names the effect and its interval; ``side`` and ``threshold`` the rule of
    :func:`decide`; ``precondition`` what must hold for the claim to be testable at all (empty:
    none); ``combine`` how parts are combined (``all`` or ``at_least:<k>``; empty: one part).
    """

    key: str
    paper: str
    claim: str
    statistic: str
    side: str
    threshold: float | tuple[float, float]
    precondition: str = ""
    combine: str = ""
    note: str = ""

    def __post_init__(self) -> None:
        if self.side not in SIDES:
            raise ValueError(f"{self.key}: side must be one of {SIDES}, got {self.side!r}")
        if self.combine not in ("", "all") and not (self.combine.startswith("at_least:")
                                                     and self.combine.split(":")[1].isdigit()):
            raise ValueError(f"{self.key}: combine must be '', 'all' or 'at_least:<k>', got {self.combine!r}")
        if (self.side == "in") != isinstance(self.threshold, tuple):
            raise ValueError(f"{self.key}: a band criterion needs a (low, high) threshold and only it")

    @property
    def rule(self) -> str:
        """The decision rule as one line of text."""
        t = self.threshold
        goal = f"in [{t[0]:g}, {t[1]:g}]" if isinstance(t, tuple) else f"{self.side} {t:g}"
        parts = (" at every part" if self.combine == "all" else
                 f" at ≥ {self.combine.split(':')[1]} parts" if self.combine else "")
        pre = f"; untestable unless {self.precondition}" if self.precondition else ""
        return f"{self.statistic}: 95 % interval {goal}{parts}{pre}"

    def fingerprint(self) -> str:
        """Hash of everything that decides a verdict (not the claim's wording or notes)."""
        t = list(self.threshold) if isinstance(self.threshold, tuple) else self.threshold
        blob = json.dumps([self.statistic, self.side, t, self.precondition, self.combine], ensure_ascii=False)
        return hashlib.sha256(blob.encode()).hexdigest()[:12]

    def decide(self, parts: list[tuple[str, Estimate]], measured: str, failed: str = "", subject: str = "") -> Claim:
        """The claim's verdict from its part estimates (``(label, estimate)``; one unlabelled part
        for a single-part claim); ``failed`` names a failed precondition (→ untestable); ``subject``
        names one instance of a claim decided per instance (e.g. per labelled factor: key
        ``<key>/<subject>``)."""
        verdicts = [decide(e, self.side, self.threshold) for _, e in parts]
        if failed:
            verdict = UNTESTABLE
        elif not parts:
            verdict, failed = INCONCLUSIVE, "no runs to decide it"
        elif self.combine.startswith("at_least:"):
            verdict = combine_at_least(verdicts, int(self.combine.split(":")[1]))
        else:
            verdict = combine_all(verdicts)
        effect = "; ".join(f"{label + ': ' if label else ''}{e.text()}" for label, e in parts) or "–"
        n = sorted({e.n for _, e in parts})
        return Claim(key=f"{self.key}/{subject}" if subject else self.key, paper=self.paper,
                     claim=f"{self.claim} ({subject})" if subject else self.claim, criterion=self.rule, effect=effect,
                     n="–" if not n else str(n[0]) if len(n) == 1 else f"{n[0]}–{n[-1]}",
                     method=", ".join(dict.fromkeys(e.method for _, e in parts)), measured=measured,
                     verdict=verdict, reason=failed,
                     parts=[{"label": label, **e.to_dict(), "verdict": v} for (label, e), v in zip(parts, verdicts)])


@dataclass(frozen=True)
class Claim:
    """One decided claim, as the reports show it."""

    key: str
    paper: str  # seed id and figure / section, e.g. "002 fig. 9"
    claim: str  # what the paper says
    criterion: str  # the rule (Criterion.rule)
    effect: str  # estimate [95 % interval] per part
    n: str  # independent units per part
    method: str  # interval method(s)
    measured: str  # the numbers behind it
    verdict: str
    reason: str = ""  # why untestable / inconclusive without parts
    parts: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def verdict_text(verdict: str) -> str:
    return f"**{verdict}**" if verdict == NOT_REPRODUCED else verdict


def md_table(header: list[str], rows: list[list[Any]]) -> list[str]:
    """Markdown table lines; floats with three decimals, ``|`` inside cells escaped."""
    cell = lambda v: (f"{v:.3f}" if isinstance(v, float) else str(v)).replace("|", "\\|")  # noqa: E731
    return ["| " + " | ".join(cell(h) for h in header) + " |", "|" + "---|" * len(header)] + [
        "| " + " | ".join(cell(v) for v in row) + " |" for row in rows]


def claims_table(claims: list[dict[str, Any]]) -> list[str]:
    """Markdown lines of a claims table (``claims``: :meth:`Claim.to_dict` records): effect with
    its interval, n, the rule and the verdict (with the reason when untestable)."""
    if not claims:
        return []
    return md_table(["paper", "claim", "effect [95 % interval]", "n", "criterion", "measured", "verdict"],
                    [[c["paper"], c["claim"], c["effect"], c["n"], c["criterion"], c["measured"],
                      verdict_text(c["verdict"]) + (f" ({c['reason']})" if c.get("reason") else "")] for c in claims])


def fmt(values, digits: int = 3) -> str:
    """Compact text of a number or a sequence of numbers."""
    if np.ndim(values) == 0:
        return f"{float(values):.{digits}f}"
    return "[" + ", ".join(f"{float(v):.{digits}f}" for v in values) + "]"
