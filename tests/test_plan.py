"""stagerun.plan's runner on hand-written plans (no DVC): order, output removal, failure, bad files.
The export from dvc.yaml and a whole target without DVC: tests/test_pipeline_e2e.py."""

from __future__ import annotations

import json
import re
import sys

import pytest

from priorlab.errors import UserError
from stagerun.plan import PLAN_VERSION, load_plan, main, run

PY = sys.executable


def stage(name, cmd, after=(), outs=(), persist=()):
    return {"name": name, "cmd": cmd, "wdir": ".", "after": list(after), "outs": list(outs), "persist": list(persist)}


def write(tmp_path, stages):
    path = tmp_path / "plan.json"
    path.write_text(json.dumps({"version": PLAN_VERSION, "targets": ["b"], "stages": stages}))
    return path


def test_a_stage_runs_after_its_upstream_on_fresh_outputs_with_persistent_ones_kept(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "stale.png").write_text("an earlier run's figure")
    (tmp_path / "kept.txt").write_text("persistent\n")
    make_a = f"{PY} -c \"import pathlib; pathlib.Path('a.txt').write_text('a')\""
    make_b = (f"{PY} -c \"import pathlib; p = pathlib.Path('out'); p.mkdir(); "
              f"(p / 'b.txt').write_text(pathlib.Path('a.txt').read_text() + 'b'); "
              f"open('kept.txt', 'a').write('again\\n')\"")
    plan = load_plan(write(tmp_path, [stage("a", make_a, outs=["a.txt"]),
                                      stage("b", make_b, ["a"], ["out", "kept.txt"], ["kept.txt"])]))
    outcome = run(plan, root=tmp_path, jobs=2, log=lambda m: None)
    assert outcome["ran"] == ["a", "b"] and not outcome["failed"]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["b.txt"]  # the stale file went first
    assert (tmp_path / "out" / "b.txt").read_text() == "ab"
    assert (tmp_path / "kept.txt").read_text() == "persistent\nagain\n"


def test_a_failure_stops_new_stages_and_exits_1(tmp_path, capsys):
    path = write(tmp_path, [stage("a", f"{PY} -c \"raise SystemExit(3)\""),
                            stage("b", f"{PY} -c \"open('b', 'w')\"", ["a"], ["b"])])
    assert main(["run", str(path), "--record", str(tmp_path / "rec.json")]) == 1
    rec = json.loads((tmp_path / "rec.json").read_text())
    assert rec["failed"] == ["a"] and rec["not_run"] == ["b"] and not (tmp_path / "b").exists()
    assert "FAILED a (exit 3)" in capsys.readouterr().out


@pytest.mark.parametrize("content, message", [
    ("{", "is not a plan (JSON"),
    (json.dumps({"version": 1, "stages": []}), f"is not a version-{PLAN_VERSION} plan"),
    (json.dumps({"version": PLAN_VERSION, "stages": [stage("b", "true", ["a"])]}), "waits for a, which does not come before"),
])
def test_bad_plans_are_one_clear_error(tmp_path, content, message):
    path = tmp_path / "plan.json"
    path.write_text(content)
    with pytest.raises(UserError, match=re.escape(message)):
        load_plan(path)
