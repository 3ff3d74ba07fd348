"""Shards over machines that share a DVC remote (stagerun.shard, issue 15 item 4).

Fast: the split of every profile's runs (disjoint, covering, each upstream stage owned once, the
same whatever the order of the params' entries, balanced), shard specs, the CLI's errors, and the
dvc.yaml declarations that let DVC restore the per-run stages from its run-cache.
Slow: two git clones of the tiny profile sharing a local-directory remote; the first runs a shard
and pushes, the second collects: it reruns nothing of the shard, and its outputs are byte-identical.
"""

from __future__ import annotations

import json
import random
import re
import shutil
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from priorlab.config import load_params, write_raw
from tests.cluster_servers import covered_by_the_cluster_test
from stagerun.shard import cell_costs, ShardError, main, parse_shard, pretrain_cost, run_cost, split

ROOT = Path(__file__).resolve().parents[1]
PROFILES = ("tiny", "cpu", "paper")
UPSTREAM = ("data", "pretrain", "prior_init")


def _dvc_yaml() -> dict:
    return yaml.safe_load((ROOT / "dvc.yaml").read_text())


def _unrestorable_outs(stage: dict) -> list[str]:
    """Outputs that keep DVC from saving or restoring a stage's run (DVC 3.67: stage/cache.py
    ``_can_hash`` refuses ``persist``; Stage.run skips the run-cache for an uncached plain out)."""
    bad = []
    for section in ("outs", "metrics", "plots"):
        for out in stage.get(section, []):
            path, props = next(iter(out.items())) if isinstance(out, dict) else (out, {})
            if (props or {}).get("persist") or (section == "outs" and (props or {}).get("cache") is False):
                bad.append(path)
    return bad


PRE_EDIT = bool(_unrestorable_outs(_dvc_yaml()["stages"]["train"]["do"]))
needs_shard_edits = pytest.mark.skipif(
    PRE_EDIT, reason="dvc.yaml still declares persistent / uncached plain outs for the per-run stages "
                     "(apply the dvc.yaml + trainer edits of the shard design, issue 15 item 4)")


# --------------------------------------------------------------------------- the split


def _stage_owners(shards) -> dict[str, list[int]]:
    owners: dict[str, list[int]] = {}
    for s in shards:
        for stage in s.owns:
            owners.setdefault(stage, []).append(s.index)
    return owners


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("count", [1, 2, 3, 4, 7, 16])
def test_shards_are_disjoint_and_cover_every_run_and_upstream_stage(profile, count):
    params = load_params(ROOT / "profiles" / f"{profile}.yaml")
    shards = split(params, count)
    assert [s.index for s in shards] == list(range(count)) and all(s.count == count for s in shards)
    runs = [r for s in shards for r in s.runs]
    assert sorted(runs) == sorted(params.runs) and len(runs) == len(set(runs))
    cells = [c for s in shards for c in s.cells]  # every study cell exactly once
    study, sv = params.isa_study, params.sparse_vae_study
    expected_cells = [f"isa_fit@{m}-{seed}" for m in (study.models if study.setup else []) for seed in study.seeds]
    expected_cells += [f"sparse_vae_fit@{float(r)!r}" for r in (sv.rhos if sv.models else [])]
    expected_cells += ["sparse_vae_real"] if sv.movielens.models or sv.single_cell.models else []
    ms = params.mssc_study
    expected_cells += [f"mssc_fit@{m}-{b}" for m in ms.models for b in ms.bars]
    expected_cells += [f"mssc_patches@{m}" for m in ms.models]
    expected_cells += [f"mssc_ablation@{a}" for a in ms.ablations]  # issue 43's diagnosis arms are cells too
    expected_cells += [f"sparse_vae_ablation@{a}" for a in sv.movielens_ablations]
    assert sorted(cells) == sorted(expected_cells)
    owners = _stage_owners(shards)
    expected = {f"data@{d}" for d in params.datasets} | {f"{st}@{s}" for s in params.setups for st in UPSTREAM[1:]}
    assert set(owners) == expected and all(len(o) == 1 for o in owners.values())
    for s in shards:
        upstream = set()
        for run in s.runs:
            setup = params.runs[run].setup
            upstream |= {f"data@{params.setups[setup].dataset}", f"pretrain@{setup}", f"prior_init@{setup}"}
        upstream |= {f"data@{params.setups[study.setup].dataset}" for c in s.cells if c.startswith("isa_fit@")}
        for stage in s.owns:  # an owned pretraining reads its data set
            if not stage.startswith("data@"):
                upstream.add(f"data@{params.setups[stage.split('@')[1]].dataset}")
        assert upstream - set(s.owns) == set(s.needs), s.name
        assert all(owners[stage] == [o] and o != s.index for stage, o in s.needs.items())
        assert s.targets == [f"evaluate@{r}" for r in s.runs] + list(s.cells)


@pytest.mark.parametrize("profile", PROFILES)
def test_split_depends_on_the_params_only_not_on_the_order_of_their_entries(profile):
    params = load_params(ROOT / "profiles" / f"{profile}.yaml")
    rng = random.Random(0)
    for _ in range(3):
        shuffled = {k: dict(rng.sample(sorted(getattr(params, k).items()), len(getattr(params, k))))
                    for k in ("runs", "setups", "datasets", "models")}
        other = replace(params, **shuffled)
        for count in (2, 3, 5):
            assert split(other, count) == split(params, count)


@pytest.mark.parametrize("profile,counts", [("cpu", (2, 3, 4)), ("paper", (2, 3, 4, 8))])
def test_shards_are_balanced_by_estimated_cost(profile, counts):
    """A setup larger than a fair share is cut (paper: the 31 MNIST runs are about half the cost)."""
    params = load_params(ROOT / "profiles" / f"{profile}.yaml")
    for count in counts:
        shards = split(params, count)
        total = sum(s.cost for s in shards)
        assert total == pytest.approx(sum(run_cost(params, r) for r in params.runs)
                                      + sum(pretrain_cost(params, s) for s in params.setups)
                                      + sum(c for _, c in cell_costs(params).values()))
        assert max(s.cost for s in shards) <= 1.25 * total / count, (count, [round(s.cost / total, 3) for s in shards])


def test_a_shard_split_off_a_setup_waits_for_its_owner():
    params = load_params(ROOT / "profiles" / "paper.yaml")
    shards = split(params, 8)  # each MNIST pretraining replicate's runs (issue 42) are about 1/8 of the cost
    mnist = [s for s in shards if any(params.runs[r].setup == "mnist" for r in s.runs)]
    assert len(mnist) >= 2  # the MNIST setup is cut ...
    owner = [s for s in mnist if "pretrain@mnist" in s.owns]
    assert len(owner) == 1  # ... pretrained once, by the shard that holds its first piece
    assert all(s.needs.get("pretrain@mnist") == owner[0].index for s in mnist if s is not owner[0])


@pytest.mark.parametrize("text,message", [
    ("1", "expected INDEX/COUNT"), ("a/b", "expected INDEX/COUNT"), ("-1/2", "expected INDEX/COUNT"),
    ("2/2", "the index must be 0..1"), ("0/0", "the count must be at least 1"), ("1/2/3", "expected INDEX/COUNT"),
])
def test_bad_shard_specs_are_refused_with_the_fix(text, message):
    with pytest.raises(ShardError, match=re.escape(message)):
        parse_shard(text)


def test_shard_spec_counts_from_zero():
    assert parse_shard("0/1") == (0, 1) and parse_shard(" 3/4 ") == (3, 4)


def test_cli_reports_bad_specs_in_one_line(capsys):
    assert main(["plan", "--shard", "2/2"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "error: --shard '2/2': the index must be 0..1 (shards are counted from 0)"
    assert main(["run", "--shard", "0/2", "-j", "2", "--gpus", "0"]) == 2
    assert "give one per worker" in capsys.readouterr().err


def test_cli_plan_prints_every_shard(capsys, monkeypatch, tmp_path):
    write_raw(yaml.safe_load((ROOT / "profiles" / "tiny.yaml").read_text()), tmp_path)
    assert main(["-C", str(tmp_path), "plan", "--shards", "2", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    params = load_params(tmp_path / "params.yaml")
    assert [p["shard"] for p in plan] == ["0/2", "1/2"]
    assert sorted(r for p in plan for r in p["runs"]) == sorted(params.runs)
    assert main(["-C", str(tmp_path), "plan", "--shard", "1/2"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("shard 1/2: ") and "  owns  " in out


# --------------------------------------------------------------------------- dvc.yaml


@needs_shard_edits
def test_stages_a_shard_runs_can_be_restored_from_the_run_cache():
    stages = _dvc_yaml()["stages"]
    for name in (*UPSTREAM, "train", "evaluate", "supervised_ceiling"):
        stage = stages[name].get("do", stages[name])
        assert not _unrestorable_outs(stage), f"{name}: {_unrestorable_outs(stage)}"


# --------------------------------------------------------------------------- two clones, one remote


def _sh(cwd: Path, *cmd: str, env: dict | None = None) -> subprocess.CompletedProcess:
    from benchmarks.project_copy import pipeline_env

    proc = subprocess.run(cmd, cwd=cwd, env={**pipeline_env(cwd), **(env or {})}, capture_output=True, text=True)
    if proc.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    return proc


def _files(root: Path, lock_entry: dict) -> dict[str, bytes]:
    out = {}
    for o in lock_entry.get("outs", []):
        p = root / o["path"]
        for f in (sorted(q for q in p.rglob("*") if q.is_file()) if p.is_dir() else [p]):
            out[str(f.relative_to(root))] = f.read_bytes()
    return out


@pytest.mark.slow
@needs_shard_edits
@covered_by_the_cluster_test()  # a collector restoring what shards pushed from their own checkouts: test_slurm
def test_second_clone_restores_a_pushed_shard_and_reruns_nothing_of_it(tmp_path):
    """Clone A runs a shard of the tiny profile and pushes it to a local-directory remote; clone B
    (same commit) collects: every stage of A's shard, its study cell included, is restored from the
    run-cache, none runs again,
    their outputs are byte-identical to A's, and DVC finds B's pipeline up to date."""
    from benchmarks.project_copy import copy_project

    if shutil.which("git") is None:
        pytest.skip("git is required by DVC pipelines")
    a = copy_project(ROOT, tmp_path / "a")
    _sh(a, sys.executable, "-m", "priorlab.config", "use", "tiny")
    _sh(a, "git", "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qam", "tiny")
    b = tmp_path / "b"
    _sh(tmp_path, "git", "clone", "-q", str(a), str(b))
    for clone in (a, b):
        _sh(clone, sys.executable, "-m", "dvc", "remote", "add", "--local", "-d", "store", str(tmp_path / "remote"))

    params = load_params(a / "params.yaml")
    shard = next(s for s in split(params, 2) if not s.needs)  # one that needs no other shard
    t0 = time.perf_counter()
    ran_a = _sh(a, sys.executable, "-m", "stagerun.shard", "run", "--shard", shard.name, "--push", "-j", "2")
    t_shard = time.perf_counter() - t0
    t0 = time.perf_counter()
    collect = _sh(b, sys.executable, "-m", "stagerun.shard", "collect", "-j", "2")
    t_collect = time.perf_counter() - t0
    print(f"\nshard {shard.name} on clone A: {t_shard:.1f} s; collect on clone B: {t_collect:.1f} s")

    assert shard.cells, "the tiny profile's shard should train a study cell (isa_fit)"
    mine = set(shard.owns) | {f"{st}@{r}" for r in shard.runs for st in ("train", "evaluate")} | set(shard.cells)
    assert mine <= set(re.findall(r"running (\S+):", ran_a.stdout))  # A computed its shard itself
    log = collect.stdout + collect.stderr
    rerun = set(re.findall(r"running (\S+):", log))
    restored = set(re.findall(r"restored (\S+) from the run-cache", log))
    assert not mine & rerun, f"clone B ran again: {sorted(mine & rerun)}"
    assert mine <= restored, f"not restored on clone B: {sorted(mine - restored)}"
    others = {r for r in params.runs if r not in shard.runs}
    assert {f"train@{r}" for r in others} <= rerun  # what no shard pushed runs on the collector
    assert {"report", "figures"} <= rerun

    lock_a = yaml.safe_load((a / "dvc.lock").read_text())["stages"]
    lock_b = yaml.safe_load((b / "dvc.lock").read_text())["stages"]
    compared = 0
    for name in sorted(mine):
        assert lock_a[name]["outs"] == lock_b[name]["outs"], name
        files_a, files_b = _files(a, lock_a[name]), _files(b, lock_b[name])
        assert files_a.keys() == files_b.keys() and all(files_a[k] == files_b[k] for k in files_a), name
        compared += len(files_a)
    assert compared > 30
    assert "up to date" in _sh(b, sys.executable, "-m", "dvc", "status").stdout
    assert (b / "reports" / "README.md").is_file()


def test_dvc_lock_held_by_another_process_is_one_line(monkeypatch, capsys):
    """A second shard in the same checkout (or an orphan of a killed job) holds DVC's lock: one line."""
    from dvc.lock import LockError

    import stagerun.shard as shard_module

    def held(*args, **kwargs):
        raise LockError("Unable to acquire lock")

    monkeypatch.setattr(shard_module, "cmd_run", held)
    assert main(["-C", str(ROOT), "run", "--shard", "0/2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "holds this project's lock" in err


def test_a_shard_stopped_by_a_signal_runs_no_further_step(monkeypatch, capsys):
    """Cancelled or pre-empted (the runner got SIGTERM): the shard ends with 143 after that run and
    does not go on to its next step (nor to waiting for other shards)."""
    import stagerun.repro as repro
    import stagerun.shard as shard_module

    calls = []

    def stopped_run(targets, jobs, gpus, root, log):
        calls.append(list(targets))
        return repro.Outcome(ran=["data@smiley"], stopped=["data@dsprites"], signal=15)

    monkeypatch.setattr(repro, "reproduce", stopped_run)
    monkeypatch.setattr(shard_module, "restore_only", lambda root, targets, log=None: ([], []))
    monkeypatch.setattr(shard_module, "_has_remote", lambda root, remote: False)
    assert main(["-C", str(ROOT), "run", "--shard", "0/1"]) == 143
    assert len(calls) == 1 and all(t.startswith("data@") or t in shard_module.EVERY_SHARD for t in calls[0])
    assert set(shard_module.EVERY_SHARD) <= set(calls[0])  # computed by every shard, in its first step
    out = capsys.readouterr().out
    assert "interrupted (SIGTERM): stopped 1 running stage(s) (data@dsprites), recorded 1 finished" in out


def test_the_runner_names_no_paper_and_no_model_kind():
    """issue 44: what the shards know of a study (its cells, their costs) and of a model kind (its step cost)
    is declared by the study and the kind (priorlab.pipeline.study_cells, ModelParams.step_cost); the
    machinery's code names neither (a docstring's example command aside)."""
    import re

    names = re.compile(r"isa_|mssc|sparse_vae|fmvae|vsc|beta_tcvae|factor_vae")
    for path in sorted((ROOT / "src" / "stagerun").glob("*.py")):
        code = [line for line in path.read_text().splitlines() if "python -m stagerun" not in line]
        assert not [line for line in code if names.search(line)], path.name


def test_declared_step_costs():
    from priorlab.config import BetaTCVAEParams, FactorialMixtureParams, SetupParams, VAEParams, VSCParams

    assert (VAEParams.step_cost, BetaTCVAEParams.step_cost, VSCParams.step_cost, FactorialMixtureParams.step_cost) == (
        1.0, 1.7, 2.1, 6.5)
    assert SetupParams(dataset="d", latent_dim=2, encoder="conv", decoder="conv").step_cost == 1.8
    assert SetupParams(dataset="d", latent_dim=2).step_cost == 1.0
