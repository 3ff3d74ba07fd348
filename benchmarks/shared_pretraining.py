"""Does a shared pretraining narrow a claim's interval?  At the cpu profile paper 002's Smiley VSC seeds share
the 15k-step spike pre-training of ``smiley<d>_vsc`` (the budget has no room for one per seed), so their
intervals are conditional on it.  This reruns those seeds, in a git clone of HEAD, each on its own
pretraining replicate ``<setup>_r<seed>`` (as the paper profile does) and compares every claim of the
``vsc_experiments`` stage with the committed ones (issue 26).

    python -m benchmarks.shared_pretraining --out reports/shared_pretraining_cpu.json

The clone uses this checkout's DVC cache (``dvc cache dir``), so only the replicates' stages and what
depends on them run (cpu profile: 8 spike pre-trainings, ~18 min on 2 workers); ``--project DIR`` reruns
in an existing clone (a rerun restores what it already ran).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from benchmarks.project_copy import pipeline_env
from priorlab.config import PARAMS_FILE, SECTION_FILES, parse_params, read_raw, write_raw
from priorlab.io import write_json

GROUP, KIND, STUDY = "vsc_experiments/smiley", "vsc", "vsc_experiments"


def independent_replicates(raw: dict, group: str = GROUP, kind: str = KIND) -> tuple[dict, dict[str, str]]:
    """``raw`` params with every run of ``group`` whose model is of ``kind`` and whose seed is not its
    setup's own moved onto a pretraining replicate of that setup, ``<setup>_r<seed>`` (the setup with
    ``seed: <seed>``, placed after it); run names follow as ``<setup>_r<seed>-<model>-<seed>``, in place.
    Returns the new params and the map old run -> new run."""
    runs, setups = raw["runs"], raw["setups"]
    moved: dict[str, str] = {}
    replicate_of: dict[str, str] = {}
    new_setups: dict[str, dict] = {}
    for name, run in runs.items():
        setup = setups[run["setup"]]
        if run.get("group") != group or raw["models"][run["model"]]["kind"] != kind:
            continue
        if run["seed"] == setup.get("seed", 0):
            continue
        replicate = f"{run['setup']}_r{run['seed']}"
        if replicate in setups and setups[replicate] != {**setup, "seed": run["seed"]}:
            raise ValueError(f"setups.{replicate} exists and is not {run['setup']} at seed {run['seed']}")
        new_setups.setdefault(run["setup"], {})[replicate] = {**setup, "seed": run["seed"]}
        moved[name], replicate_of[name] = f"{replicate}-{run['model']}-{run['seed']}", replicate
    out = dict(raw)
    out["setups"] = {}
    for name, setup in setups.items():
        out["setups"][name] = setup
        for replicate, spec in sorted(new_setups.get(name, {}).items()):
            out["setups"].setdefault(replicate, spec)
    out["runs"] = {moved.get(name, name): {**run, "setup": replicate_of.get(name, run["setup"])}
                   for name, run in runs.items()}
    return out, moved


def _part_row(part: dict) -> dict:
    return {k: (round(part[k], 4) if isinstance(part[k], float) else part[k])
            for k in ("label", "value", "low", "high", "n", "verdict")}


def compare(shared: dict, independent: dict) -> list[dict[str, Any]]:
    """Per claim of two ``vsc_experiments`` summaries (same claims, in order): its verdict and interval
    parts with the seeds sharing a pretraining and with one each."""
    rows = []
    by_key = {c["key"]: c for c in independent["claims"]}
    for c in shared["claims"]:
        other = by_key.get(c["key"])
        if other is None:
            raise ValueError(f"claim {c['key']} is missing from the independent-replicate summary")
        rows.append({"key": c["key"], "claim": c["claim"],
                     **{arm: {"verdict": x["verdict"], "effect": x["effect"], "measured": x["measured"],
                              "parts": [_part_row(p) for p in x["parts"]]}
                        for arm, x in (("shared", c), ("independent", other))},
                     "verdict_changed": c["verdict"] != other["verdict"]})
    return rows


def clone(root: Path, dst: Path) -> Path:
    """A git clone of ``root``'s HEAD at ``dst`` using ``root``'s DVC cache."""
    subprocess.run(["git", "clone", "-q", str(root), str(dst)], check=True)
    if (root / ".datasets").exists() and not (dst / ".datasets").exists():
        (dst / ".datasets").symlink_to((root / ".datasets").resolve())
    subprocess.run([sys.executable, "-m", "dvc", "cache", "dir", "--local", str((root / ".dvc" / "cache").resolve())],
                   cwd=dst, env=pipeline_env(dst), check=True)
    return dst


def _git(project: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=project, capture_output=True, check=True, text=True).stdout


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.shared_pretraining", description=__doc__.split("\n\n")[0])
    ap.add_argument("--project", type=Path, default=None,
                    help="the clone to run in (made from this checkout's HEAD when it does not exist)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", type=Path, default=None)
    ns = ap.parse_args(argv)
    root = Path.cwd()
    project = ns.project or root.parent / f"{root.name}-shared-pretraining"
    if not project.exists():
        clone(root, project)
    raw: dict = {}
    for rel in dict.fromkeys([PARAMS_FILE, *SECTION_FILES.values()]):  # the committed params: reruns are idempotent
        raw.update(yaml.safe_load(_git(project, "show", f"HEAD:{rel}")) or {})
    grown, moved = independent_replicates(raw)
    parse_params(grown)  # the one typed check, before any work
    if read_raw(project / PARAMS_FILE) != grown:
        write_raw(grown, project)
    print(f"{len(moved)} run(s) on their own pretraining replicate: " + ", ".join(sorted(moved.values())))
    subprocess.run([sys.executable, "-m", "stagerun.repro", "-j", str(ns.jobs), STUDY], cwd=project,
                   env=pipeline_env(project), check=True)
    shared = json.loads(_git(project, "show", f"HEAD:reports/{STUDY}/summary.json"))
    independent = json.loads((project / "reports" / STUDY / "summary.json").read_text())
    rows = compare(shared, independent)
    for r in rows:
        print(f"{r['key']:32s} shared {r['shared']['verdict']:15s} {r['shared']['effect']}\n"
              f"{'':32s} own    {r['independent']['verdict']:15s} {r['independent']['effect']}")
    if ns.out:
        commit = _git(project, "rev-parse", "--short", "HEAD").strip()
        write_json(ns.out, {"commit": commit, "profile": raw.get("profile"), "moved_runs": moved, "claims": rows})
        print(f"wrote {ns.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
