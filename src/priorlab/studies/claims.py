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

Every criterion carries its :class:`Plan`, written with it: the *unit* its n counts (what is
independent: a pretraining replicate, a seed trained from scratch, a data set drawn afresh) and the
planned n per arm for each profile.  An inconclusive verdict says which way its estimate *leans* and
the n per arm that would decide it at the observed spread (:func:`n_to_decide`).
"""

from __future__ import annotations

import ast
import hashlib
import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
from scipy import stats

from priorlab.paths import DIAGNOSIS
from priorlab.studies.intervals import LEVEL, Estimate

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


FOR, AGAINST = "towards reproduced", "towards not reproduced"
N_MAX = 10_000  # n per arm beyond which a claim is called undecidable at the observed spread

# What a claim's n counts (Plan.unit): the independent units its interval is computed over.
UNIT_PRETRAINING = "pretraining"
UNIT_SEED = "seed"
UNIT_DATA_SEED = "data seed"
UNIT_DATASET = "data set"
UNIT_SPLIT = "held-out fold"
UNITS = {
    UNIT_PRETRAINING: "a pretraining replicate: the runs that start from one pretraining are one unit, their seeds "
                      "averaged first",
    UNIT_SEED: "a seed trained from scratch",
    UNIT_DATA_SEED: "a seed that draws the data and fits every model to it (the models are paired by it)",
    UNIT_DATASET: "a data set drawn afresh, every model fitted to it (paired)",
    UNIT_SPLIT: "a held-out fold of one data set (k-fold: the test rows of two folds are disjoint), every model "
                "fitted to the other rows (paired); their training rows overlap, so the folds are not fully "
                "independent and a t interval over them is somewhat too narrow (Bengio & Grandvalet 2004)",
}
FIXED = "none: n is fixed; a larger n is a new plan, entered in the history before its numbers exist"


@dataclass(frozen=True)
class Plan:
    """How a claim is sampled, fixed before its numbers: the ``unit`` (what is independent), the
    planned ``n`` per arm for each profile (``(profile, n)`` pairs) and the rule for extending it
    (``extension``; :data:`FIXED`: none)."""

    unit: str
    n: tuple[tuple[str, int], ...]
    extension: str = FIXED

    def n_for(self, profile: str) -> int | None:
        """The planned n per arm at ``profile`` (None: the profile has no plan for this claim)."""
        return dict(self.n).get(profile)

    def to_dict(self) -> dict[str, Any]:
        return {"unit": self.unit, "n": dict(self.n), "extension": self.extension}


def lean(value: float, side: str, threshold: float | tuple[float, float]) -> str:
    """Which way an estimate points: :data:`FOR` when it lies on the claim's side of the threshold
    (inside the band), :data:`AGAINST` otherwise."""
    if side == "in":
        return FOR if threshold[0] <= value <= threshold[1] else AGAINST
    return FOR if (value > threshold if side == ">" else value < threshold) else AGAINST


def _critical(method: str, n: int) -> float:
    """The interval's critical value at ``n`` units: Student t (n − 1 df) for the t-based methods,
    the normal quantile otherwise."""
    q = 0.5 + LEVEL / 2
    return float(stats.t.ppf(q, n - 1)) if "t" in method.split() and n > 1 else float(stats.norm.ppf(q))


def n_to_decide(estimate: Estimate, side: str, threshold: float | tuple[float, float]) -> int | None:
    """The n per arm at which the interval's half-width falls below the distance from the estimate to
    the threshold (to the nearest band edge), at the observed spread: every standard error scaled by
    √(n_now / n) but for its part that more units leave as it is (``se_fixed``: a test set every unit
    shares), the critical value at n.  ``None`` without a spread (fewer than two units or a zero
    standard error); :data:`N_MAX` + 1 when not even :data:`N_MAX` decides it."""
    v, n0 = estimate.value, estimate.n
    se = estimate.se
    if not math.isfinite(se) and estimate.bounded:  # an interval without a standard error: its half-width
        se = (estimate.high - estimate.low) / (2 * float(stats.norm.ppf(0.5 + LEVEL / 2)))
    if not (math.isfinite(v) and math.isfinite(se)) or se <= 0 or n0 < 2:
        return None
    dist = (min(abs(v - threshold[0]), abs(v - threshold[1])) if side == "in" else abs(v - threshold))
    if dist == 0:
        return N_MAX + 1
    fixed = min(estimate.se_fixed, se) if math.isfinite(estimate.se_fixed) else 0.0
    for n in range(n0 + 1, N_MAX + 1):
        if _critical(estimate.method, n) * math.sqrt(fixed**2 + (se**2 - fixed**2) * n0 / n) < dist:
            return n
    return N_MAX + 1


def _combined_n(needs: list[int | None], k: int) -> int | None:
    """The k-th smallest n among ``needs`` (parts already decided count 0), None if one is unknown."""
    if len(needs) < k or k <= 0:
        return None
    ordered = sorted(needs, key=lambda x: (x is None, x if x is not None else 0))[:k]
    return None if any(x is None for x in ordered) else ordered[-1]


def source_digest(ref: str) -> str:
    """A digest of what a criterion reads, ``"module:name"`` (a top-level constant, function or class
    of a priorlab module): its syntax tree without docstrings, so comments, docstrings and layout do
    not count and any change of code or value does.  Read from the source file, nothing imported."""
    module, name = ref.split(":")
    parts = module.split(".")
    if parts[0] != "priorlab":
        raise ValueError(f"{ref}: a criterion reads priorlab code only")
    path = Path(__file__).resolve().parents[1].joinpath(*parts[1:]).with_suffix(".py")
    tree = ast.parse(path.read_text())
    for node in tree.body:
        names = ([t.id for t in node.targets if isinstance(t, ast.Name)] if isinstance(node, ast.Assign) else
                 [node.target.id] if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) else
                 [node.name] if isinstance(node, (ast.FunctionDef, ast.ClassDef)) else [])
        if name in names:
            for sub in ast.walk(node):
                body = getattr(sub, "body", None)
                if (isinstance(sub, (ast.FunctionDef, ast.ClassDef)) and body and isinstance(body[0], ast.Expr)
                        and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str)):
                    sub.body = body[1:] or [ast.Pass()]
            return hashlib.sha256(ast.dump(node).encode()).hexdigest()[:12]
    raise KeyError(f"{ref}: no top-level {name!r} in {path}")


@dataclass(frozen=True)
class Criterion:
    """How one claim is decided, written before its numbers exist.

    ``statistic`` names the effect and its interval; ``side`` and ``threshold`` the rule of
    :func:`decide`; ``precondition`` what must hold for the claim to be testable at all (empty:
    none); ``combine`` how parts are combined (``all`` or ``at_least:<k>``; empty: one part);
    ``plan`` its unit and planned n (:class:`Plan`); ``reads`` the code and constants that compute
    its effect (``"module:name"``, part of the fingerprint); ``evidence`` the DVC stages (name
    patterns) whose walls price one more unit.
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
    plan: Plan | None = None
    reads: tuple[str, ...] = ()
    evidence: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.plan is not None and self.plan.unit not in UNITS:
            raise ValueError(f"{self.key}: unit must be one of {list(UNITS)}, got {self.plan.unit!r}")
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
        """Hash of everything that decides a verdict (not the claim's wording or notes): the rule, the
        plan, and the syntax of every constant and function in ``reads`` (:func:`source_digest`)."""
        t = list(self.threshold) if isinstance(self.threshold, tuple) else self.threshold
        blob = json.dumps([self.statistic, self.side, t, self.precondition, self.combine,
                           self.plan.to_dict() if self.plan else None,
                           [[r, source_digest(r)] for r in self.reads]], ensure_ascii=False)
        return hashlib.sha256(blob.encode()).hexdigest()[:12]

    def _lean(self, parts: list[tuple[str, Estimate]], verdicts: list[str]) -> tuple[str, int | None]:
        """The claim's lean and the n per arm that would decide it (see :func:`n_to_decide`): per part
        0 when decided, else its own n in its lean's direction; combined as the rule combines parts."""
        leans = [lean(e.value, self.side, self.threshold) for _, e in parts]
        needs = [0 if v in (REPRODUCED, NOT_REPRODUCED) else n_to_decide(e, self.side, self.threshold)
                 for (_, e), v in zip(parts, verdicts)]
        k = int(self.combine.split(":")[1]) if self.combine.startswith("at_least:") else (
            len(parts) if self.combine == "all" else 1)
        k = min(k, len(parts))
        if sum(x == FOR for x in leans) >= k:  # enough parts lean to the claim: the k-th fastest to clear
            return FOR, _combined_n([n for n, x in zip(needs, leans) if x == FOR], k)
        fail_k = len(parts) - k + 1  # parts that must fail before k can no longer hold
        return AGAINST, _combined_n([n for n, x in zip(needs, leans) if x == AGAINST], fail_k)

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
        leaning, needed = self._lean(parts, verdicts) if verdict == INCONCLUSIVE and parts else ("", None)
        return Claim(key=f"{self.key}/{subject}" if subject else self.key, paper=self.paper,
                     claim=f"{self.claim} ({subject})" if subject else self.claim, criterion=self.rule, effect=effect,
                     n="–" if not n else str(n[0]) if len(n) == 1 else f"{n[0]}–{n[-1]}",
                     method=", ".join(dict.fromkeys(e.method for _, e in parts)), measured=measured,
                     verdict=verdict, reason=failed,
                     parts=[{"label": label, **e.to_dict(), "verdict": v,
                             "lean": lean(e.value, self.side, self.threshold) if math.isfinite(e.value) else "",
                             "n_to_decide": (None if v in (REPRODUCED, NOT_REPRODUCED)
                                             else n_to_decide(e, self.side, self.threshold))}
                            for (label, e), v in zip(parts, verdicts)],
                     criterion_key=self.key, unit=self.plan.unit if self.plan else "",
                     planned_n=dict(self.plan.n) if self.plan else {}, lean=leaning, n_to_decide=needed,
                     evidence=list(self.evidence))


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
    criterion_key: str = ""  # the criterion (``key`` less the ``/subject``)
    unit: str = ""  # what n counts (Plan.unit)
    planned_n: dict[str, int] = field(default_factory=dict)  # profile -> planned n per arm
    lean: str = ""  # an inconclusive claim's direction (FOR / AGAINST)
    n_to_decide: int | None = None  # an inconclusive claim: the n per arm that would decide it
    evidence: list[str] = field(default_factory=list)  # stage-name patterns that price a unit

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def verdict_text(verdict: str) -> str:
    return f"**{verdict}**" if verdict == NOT_REPRODUCED else verdict


def md_table(header: list[str], rows: list[list[Any]]) -> list[str]:
    """Markdown table lines; floats with three decimals, ``|`` inside cells escaped."""
    cell = lambda v: (f"{v:.3f}" if isinstance(v, float) else str(v)).replace("|", "\\|")  # noqa: E731
    return ["| " + " | ".join(cell(h) for h in header) + " |", "|" + "---|" * len(header)] + [
        "| " + " | ".join(cell(v) for v in row) + " |" for row in rows]


def n_text(claim: dict[str, Any], profile: str | None = None) -> str:
    """A claim's n: its units per part, the planned n at ``profile`` beside it when they differ."""
    planned = claim.get("planned_n", {}).get(profile) if profile else None
    if planned is None or claim["n"] == str(planned):
        return claim["n"]
    return f"{claim['n']} (plan {planned})"


def link_diagnosis(claims: list[dict[str, Any]], study: str, diagnosed: Callable[[str], bool]) -> list[dict[str, Any]]:
    """``claims`` (their dicts), each that ``study``'s diagnosis explains (``diagnosed(key)``) and did not
    reproduce linked to it: ``reports/diagnosis/<study>.md``, which the ``diagnosis`` stage writes
    (``diagnosis``: the path relative to the study's report folder)."""
    link = f"../{DIAGNOSIS}/{study}.md"
    return [dict(c, diagnosis=link) if diagnosed(c["key"]) and c["verdict"] != REPRODUCED else c for c in claims]


def verdict_cell(claim: dict[str, Any], cost: str = "") -> str:
    """The verdict, the reason when untestable, for an inconclusive claim its lean and the n per arm
    that would decide it (with ``cost``, the price of the units still missing), and the link to its
    diagnosis where the study wrote one (``diagnosis``: a path relative to the table)."""
    text = verdict_text(claim["verdict"]) + (f" ({claim['reason']})" if claim.get("reason") else "")
    if claim.get("diagnosis"):
        text += f" ([diagnosis]({claim['diagnosis']}))"
    if claim["verdict"] == INCONCLUSIVE and claim.get("lean"):
        need = claim.get("n_to_decide")
        shared = any(p.get("se_fixed") for p in claim.get("parts", []))
        decides = ("no spread to extrapolate" if need is None else
                   "more units alone do not decide it: the part of its interval from the test points every unit "
                   "shares spans the margin (more test points would)" if need > N_MAX and shared else
                   f"undecidable below n = {N_MAX}" if need > N_MAX else f"n ≈ {need} per arm decides it")
        text += f"; leans {claim['lean']}; {decides}" + (f" ({cost})" if cost and need and need <= N_MAX else "")
    return text


def claims_table(claims: list[dict[str, Any]], profile: str | None = None, cost=None) -> list[str]:
    """Markdown lines of a claims table (``claims``: :meth:`Claim.to_dict` records): effect with
    its interval, n (and the plan's n at ``profile``), the unit, the rule and the verdict with the lean
    and the n to decide (``cost``: claim record -> the price of the missing units, optional)."""
    if not claims:
        return []
    return md_table(["paper", "claim", "effect [95 % interval]", "n", "unit", "criterion", "measured", "verdict"],
                    [[c["paper"], c["claim"], c["effect"], n_text(c, profile), c.get("unit") or "–", c["criterion"],
                      c["measured"], verdict_cell(c, cost(c) if cost else "")] for c in claims])


def fmt(values, digits: int = 3) -> str:
    """Compact text of a number or a sequence of numbers."""
    if np.ndim(values) == 0:
        return f"{float(values):.{digits}f}"
    return "[" + ", ".join(f"{float(v):.{digits}f}" for v in values) + "]"
