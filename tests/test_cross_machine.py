"""The cross-machine comparison (benchmarks/cross_machine.py): which verdicts moved between the committed
outputs and this machine's, whether each move followed the earlier lean, and how far the runs moved."""

from __future__ import annotations

import math

from benchmarks.cross_machine import compare, moved_claims, result_shifts


def _claim(key: str, verdict: str, lean: str = "", effect: str = "0.1 [0, 0.2]") -> dict:
    return {"key": key, "verdict": verdict, "lean": lean, "effect": effect}


def test_moves_are_counted_in_steps_and_checked_against_the_earlier_lean():
    before = {"a": {"verdict": "inconclusive", "lean": "towards reproduced", "effect": ""},
              "b": {"verdict": "not reproduced", "lean": "", "effect": ""},
              "c": {"verdict": "reproduced", "lean": "", "effect": ""},
              "d": {"verdict": "inconclusive", "lean": "towards reproduced", "effect": ""},
              "e": {"verdict": "untestable", "lean": "", "effect": ""},
              "f": {"verdict": "reproduced", "lean": "", "effect": ""}}
    after = {"a": {"verdict": "reproduced", "lean": "", "effect": ""},                          # as it leaned
             "b": {"verdict": "inconclusive", "lean": "towards not reproduced", "effect": ""},  # still leaning so
             "c": {"verdict": "not reproduced", "lean": "", "effect": ""},                      # reversed
             "d": {"verdict": "not reproduced", "lean": "", "effect": ""},                      # against its lean
             "e": {"verdict": "inconclusive", "lean": "towards reproduced", "effect": ""},
             "f": {"verdict": "reproduced", "lean": "", "effect": ""}}                          # unmoved
    got = {m["claim"]: (m["steps"], m["follows_the_lean"]) for m in moved_claims(before, after)}
    assert got == {"a": (1, True), "b": (1, True), "c": (2, False), "d": (1, False), "e": (None, False)}


def test_the_record_counts_verdicts_and_names_the_reversals():
    before = {"s": {"claims": [_claim("x", "reproduced"), _claim("y", "inconclusive", "towards not reproduced")]}}
    after = {"s": {"claims": [_claim("x", "not reproduced"), _claim("y", "not reproduced")]}}
    record = compare(before, after, [], [])
    assert record["claims"] == 2 and record["reversed"] == ["x"]
    assert record["verdicts_before"] == {"reproduced": 1, "inconclusive": 1}
    assert record["verdicts_after"] == {"not reproduced": 2}
    assert [m["follows_the_lean"] for m in record["moved"]] == [False, True]


def test_run_shifts_count_identical_values_and_keep_infinities_apart():
    row = {"group": "g", "setup": "s", "model": "m"}
    before = [{**row, "seed": "0", "test ELBO": "-10.0"}, {**row, "seed": "1", "test ELBO": "-inf"},
              {**row, "seed": "2", "test ELBO": "-12.0"}, {**row, "seed": "3", "test ELBO": ""}]
    after = [{**row, "seed": "0", "test ELBO": "-10.0"}, {**row, "seed": "1", "test ELBO": "-11.0"},
             {**row, "seed": "2", "test ELBO": "-12.5"}, {**row, "seed": "3", "test ELBO": "-1.0"}]
    got = result_shifts(before, after, columns=("test ELBO",))["test ELBO"]
    assert got == {"runs": 3, "identical": 1, "finite_on_one_side_only": 1,
                   "median_abs_change": 0.25, "max_abs_change": 0.5}
    assert not math.isinf(got["max_abs_change"])
