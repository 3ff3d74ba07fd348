"""This machine's verdicts beside the committed ones: after ``make repro`` on another CPU, which claims moved.

    python -m benchmarks.cross_machine --against HEAD --out reports/cross_machine_cpu.json

Training is bit-reproducible on one machine (same inputs, same bytes), not across CPUs: the float
kernels differ (vector width, BLAS blocking), rounding differs in the last bits and the training
trajectories part.  A second machine is then a second draw of every seed, and the claims' verdicts
should move only where their intervals were close to the criterion.  This compares the working tree's
claims (each study's ``reports/<study>/summary.json``) and ``reports/results.csv`` with those of a git
revision, and writes one record: the verdict counts on each side, every claim whose verdict moved (its
effect and lean on both sides), and how far the per-run numbers moved.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import platform
import statistics
import subprocess
from collections import Counter
from pathlib import Path

from priorlab.report import experiment_summaries

RESULT_COLUMNS = ("test ELBO", "KL", "log p(x) (IW)", "active dims")
ORDER = ("not reproduced", "inconclusive", "reproduced")
"""Verdicts from one end to the other: a move by one step passes through (or ends at) inconclusive."""


def claims(summaries: dict[str, dict]) -> dict[str, dict]:
    """Claim key -> its verdict, effect and lean, over the studies' summaries."""
    return {c["key"]: {"verdict": c["verdict"], "effect": c["effect"], "lean": c.get("lean") or ""}
            for summary in summaries.values() for c in summary["claims"]}


def moved_claims(before: dict[str, dict], after: dict[str, dict]) -> list[dict]:
    """The claims of both sides whose verdict differs, each with both sides, the number of steps it moved
    along :data:`ORDER` (None where either side is outside it, e.g. untestable) and whether the move follows
    the earlier lean (an inconclusive verdict that became the verdict it leaned towards, or a decided one
    that became inconclusive still leaning towards it)."""
    rows = []
    for key in sorted(set(before) & set(after)):
        a, b = before[key], after[key]
        if a["verdict"] == b["verdict"]:
            continue
        steps = (abs(ORDER.index(a["verdict"]) - ORDER.index(b["verdict"]))
                 if a["verdict"] in ORDER and b["verdict"] in ORDER else None)
        follows = (a["verdict"] == "inconclusive" and a["lean"] == f"towards {b['verdict']}") or \
                  (b["verdict"] == "inconclusive" and b["lean"] == f"towards {a['verdict']}")
        rows.append({"claim": key, "before": a, "after": b, "steps": steps, "follows_the_lean": follows})
    return rows


def _number(text: str) -> float | None:
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def result_shifts(before: list[dict], after: list[dict], columns=RESULT_COLUMNS) -> dict[str, dict]:
    """Per column of ``reports/results.csv``: runs on both sides, how many are identical, and the median
    and largest absolute change (finite values only; a value finite on one side only is counted)."""
    key = ("group", "setup", "model", "seed")
    old = {tuple(r[k] for k in key): r for r in before}
    out = {}
    for col in columns:
        pairs = [(_number(old[tuple(r[k] for k in key)][col]), _number(r[col]))
                 for r in after if tuple(r[k] for k in key) in old]
        pairs = [(x, y) for x, y in pairs if x is not None and y is not None]
        finite = [abs(y - x) for x, y in pairs if abs(x) != float("inf") and abs(y) != float("inf")]
        out[col] = {"runs": len(pairs), "identical": sum(x == y for x, y in pairs),
                    "finite_on_one_side_only": sum((abs(x) == float("inf")) != (abs(y) == float("inf")) for x, y in pairs),
                    "median_abs_change": round(statistics.median(finite), 4) if finite else None,
                    "max_abs_change": round(max(finite), 4) if finite else None}
    return out


def compare(before_summaries: dict, after_summaries: dict, before_rows: list[dict], after_rows: list[dict]) -> dict:
    """The record: verdict counts on each side, the moved claims, the per-run shifts."""
    a, b = claims(before_summaries), claims(after_summaries)
    moved = moved_claims(a, b)
    return {"claims": len(set(a) & set(b)),
            "verdicts_before": dict(Counter(c["verdict"] for c in a.values())),
            "verdicts_after": dict(Counter(c["verdict"] for c in b.values())),
            "moved": moved,
            "reversed": [m["claim"] for m in moved if m["steps"] == 2],
            "results_csv": result_shifts(before_rows, after_rows)}


def _git_text(root: Path, rev: str, path: str) -> str | None:
    """``path`` as committed at ``rev`` (None where it has no such file)."""
    done = subprocess.run(["git", "show", f"{rev}:{path}"], cwd=root, capture_output=True, text=True)
    return done.stdout if done.returncode == 0 else None


def cpu_model_name() -> str | None:
    """The CPU's model name from ``/proc/cpuinfo`` (Linux), or None where there is none."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def machine() -> str:
    """This machine in one line: CPU model name, cores, torch's CPU capability."""
    import torch  # lazy: the comparison itself needs no torch

    name = cpu_model_name() or platform.processor() or platform.machine()
    return f"{name}, {os.cpu_count()} cores, torch {torch.__version__} (CPU capability {torch.backends.cpu.get_cpu_capability()})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.cross_machine", description=__doc__.splitlines()[0])
    parser.add_argument("--against", default="HEAD", help="git revision whose committed outputs to compare with")
    parser.add_argument("--root", default=".", help="the project (its working tree holds this machine's outputs)")
    parser.add_argument("--out", required=True, help="the record (JSON) to write")
    parser.add_argument("--note", default="", help="one line on how the working tree's outputs were made")
    ns = parser.parse_args(argv)
    root = Path(ns.root)
    after = dict(experiment_summaries(root / "reports"))  # the studies the report gathers
    committed = {name: _git_text(root, ns.against, f"reports/{name}/summary.json") for name in after}
    before = {name: json.loads(text) for name, text in committed.items() if text is not None}
    rows_before = list(csv.DictReader(io.StringIO(_git_text(root, ns.against, "reports/results.csv") or "")))
    rows_after = list(csv.DictReader(io.StringIO((root / "reports/results.csv").read_text(encoding="utf-8"))))
    record = {"against": subprocess.run(["git", "rev-parse", "--short", ns.against], cwd=root, capture_output=True,
                                        text=True, check=True).stdout.strip(),
              "this_machine": machine(), "note": ns.note,
              **compare(before, after, rows_before, rows_after)}
    Path(ns.out).write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    moved = record["moved"]
    print(f"{len(moved)} of {record['claims']} verdicts moved ({len(record['reversed'])} reversed); "
          f"{sum(m['follows_the_lean'] for m in moved)} followed the earlier lean -> {ns.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
