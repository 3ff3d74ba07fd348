"""benchmarks.shared_pretraining: the VSC seeds that share a pretraining move onto replicates of their own,
nothing else moves, the result is a valid profile, and the claim comparison reports verdict changes."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from benchmarks.shared_pretraining import compare, independent_replicates
from priorlab.config import parse_params

ROOT = Path(__file__).resolve().parents[1]


def test_only_the_vsc_seeds_sharing_a_pretraining_move_and_the_profile_stays_valid():
    raw = yaml.safe_load((ROOT / "profiles" / "cpu.yaml").read_text())
    grown, moved = independent_replicates(raw)
    sharing = {name for name, r in raw["runs"].items()
               if r["group"] == "vsc_experiments/smiley" and raw["models"][r["model"]]["kind"] == "vsc"
               and r["seed"] != raw["setups"][r["setup"]].get("seed", 0)}  # not the seed of its setup's pretraining
    assert set(moved) == sharing and len(sharing) >= 4  # issue 42: seeds 3 and 4 share r0 / r1 with seeds 0 / 1
    for old, new in moved.items():
        run = grown["runs"][new]
        base = raw["runs"][old]["setup"]
        assert run["setup"] == f"{base}_r{run['seed']}" and new.startswith(run["setup"] + "-")
        assert grown["setups"][run["setup"]] == {**raw["setups"][base], "seed": run["seed"]}
        assert old not in grown["runs"]
    untouched = set(raw["runs"]) - set(moved)
    assert all(grown["runs"][name] == raw["runs"][name] for name in untouched)
    assert list(grown["runs"]) == [moved.get(name, name) for name in raw["runs"]]  # in place
    parse_params(grown)
    assert independent_replicates(grown)[1] == {}  # idempotent


def test_a_clashing_replicate_setup_is_refused():
    raw = yaml.safe_load((ROOT / "profiles" / "cpu.yaml").read_text())
    raw["setups"]["smiley18_vsc_r3"] = {**raw["setups"]["smiley18_vsc"], "seed": 3, "latent_dim": 5}
    with pytest.raises(ValueError, match="smiley18_vsc_r3 exists"):
        independent_replicates(raw)


def _claim(key: str, verdict: str, value: float) -> dict:
    return {"key": key, "claim": key, "verdict": verdict, "effect": f"{value}", "measured": "",
            "parts": [{"label": "", "value": value, "low": value - 1, "high": value + 1, "n": 5, "verdict": verdict}]}


def test_compare_flags_verdict_changes_and_a_missing_claim():
    shared = {"claims": [_claim("a", "reproduced", 2.0), _claim("b", "inconclusive", 0.1)]}
    own = {"claims": [_claim("b", "inconclusive", 0.2), _claim("a", "inconclusive", 0.5)]}
    rows = compare(shared, own)
    assert [(r["key"], r["verdict_changed"]) for r in rows] == [("a", True), ("b", False)]
    assert rows[0]["independent"]["parts"][0]["value"] == 0.5
    with pytest.raises(ValueError, match="claim b is missing"):
        compare(shared, {"claims": own["claims"][1:]})


def test_the_clone_uses_the_checkouts_dvc_cache(tmp_path):
    import subprocess
    import sys

    from benchmarks.shared_pretraining import clone

    root = tmp_path / "root"
    root.mkdir()
    git = ["git", "-c", "user.email=t@priorlab", "-c", "user.name=t"]
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    subprocess.run([sys.executable, "-m", "dvc", "init", "-q"], cwd=root, check=True)
    subprocess.run([*git, "commit", "-qm", "init"], cwd=root, check=True)
    project = clone(root, tmp_path / "clone")
    out = subprocess.run([sys.executable, "-m", "dvc", "cache", "dir"], cwd=project, capture_output=True, text=True,
                         check=True).stdout.strip()
    assert Path(out) == (root / ".dvc" / "cache").resolve()
