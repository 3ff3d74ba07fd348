"""End to end: the tiny profile in a temporary git copy of the project (a `dvc repro` killed mid-way,
finished by the runner; tests/tiny_pipeline.py).

Checks the outputs and metric ranges, kill -9 + resume, byte-identical
reruns under plain `dvc repro`, that a param change reruns only the stages it affects, that bad
params fail cleanly without touching dvc.lock, and a push → wipe → pull
round trip through a local DVC remote.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path

import pytest
import yaml

from benchmarks.project_copy import copy_project
from priorlab.metric_registry import headline
from tests.cluster_servers import covered_by_the_cluster_test
from tests.tiny_pipeline import dvc, lock_outs, param_texts, read_params, restore_params, sh, write_params

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow

RUNS = [f"{s}-{m}-0" for s in ("smiley", "dsprites") for m in ("vae", "beta_vae")]


@pytest.fixture(scope="module")
def project(tiny_serial) -> Path:
    """A git copy of the project on the tiny profile, after one complete `dvc repro` (conftest)."""
    return tiny_serial.path


def test_outputs_and_metric_ranges(project):
    for run in RUNS:
        m = json.loads((project / "models" / "evaluate" / "baselines" / f"{run}.json").read_text())  # the record
        assert json.loads((project / "metrics" / "baselines" / f"{run}.json").read_text()) == headline(m)
        t = m["test"]
        assert -2000 < t["elbo"] < 0 and t["kl"] >= 0
        assert t["elbo"] == pytest.approx(t["log_lik"] - t["kl"], abs=1e-3)
        assert t["iw_log_likelihood"] >= t["elbo"] - 1.0
        assert 0 <= m["active_dims"] <= m["latent_dim"]
        d = m["disentanglement"]
        assert 0 <= d["mig"] <= 1 and 0 <= d["sap"] <= 1 and 0 <= d["factor_vae_score"]["eval_accuracy"] <= 1
        assert m["settings"]["profile"] == "tiny" and "scikit-learn" in m["versions"]
        for fig in ("curves", "reconstructions", "traversals"):
            assert (project / "reports" / "figures" / run / f"{fig}.png").stat().st_size > 1000
    report = (project / "reports" / "README.md").read_text()
    assert all(run.rsplit("-", 1)[0].split("-")[0] in report for run in RUNS) and "MIG" in report
    assert not list((project / ".checkpoints").rglob("*.pt")), "checkpoints are removed on completion"
    assert "dsprites-beta_vae-0" in dvc(project, "metrics", "show").stdout
    # issue 43: the diagnosis stage ran (downstream of everything), one file per study it covers
    from priorlab.studies.diagnosis import DIAGNOSES

    index = (project / "reports" / "diagnosis" / "README.md").read_text()
    assert all(f"[`{study}`]({study}.md)" in index and (project / "reports" / "diagnosis" / f"{study}.md").is_file()
               for study in DIAGNOSES)


def test_metrics_show_of_each_group_fits_a_screen(project):
    """`dvc metrics show metrics/<group>`: a row per run or study cell, a column per headline number."""
    tables = {p.name: dvc(project, "metrics", "show", f"metrics/{p.name}", env={"COLUMNS": "250"}).stdout.splitlines()
              for p in (project / "metrics").iterdir() if p.is_dir()}
    shown = {group: table for group, table in tables.items() if table}  # a group this profile's stages write
    assert {"baselines", "isa_experiments", "mssc_experiments"} <= set(shown), tables
    for group, table in shown.items():
        assert len(table) > 1 and max(map(len, table)) <= 250, (group, max(map(len, table)))


def test_metrics_show_lists_only_the_files_this_profiles_stages_write(project):
    """A metrics file another profile left behind (a profile switch in place) is not in `dvc metrics show`."""
    stale = project / "metrics" / "baselines" / "other_profile-vae-0.json"
    stale.write_text('{"test": {"elbo": -1.0}}\n')
    try:
        shown = dvc(project, "metrics", "show").stdout
    finally:
        stale.unlink()
    assert "dsprites-beta_vae-0" in shown and "other_profile-vae-0" not in shown


def test_em_model_on_vector_data_skips_pretraining_and_resumes_after_kill(project):
    """PPCA (online EM, no optimiser) on the float vector data set: pretraining skipped, curves only
    (no image figures), in the report, and a kill -9 mid-training resumes to the same model."""
    run = "synthetic-ppca-0"
    pre = json.loads((project / "models" / "pretrain" / "synthetic" / "meta.json").read_text())
    assert pre["skipped"] and not (project / "models" / "pretrain" / "synthetic" / "model.pt").exists()
    m = json.loads((project / "models" / "evaluate" / "baselines" / f"{run}.json").read_text())
    assert "test" not in m and m["latent_dim"] == 2 and m["model_extras"]["test_log_likelihood"] > -50
    assert sorted(p.name for p in (project / "reports" / "figures" / run).iterdir()) == ["curves.png"]
    assert run.split("-")[0] in (project / "reports" / "README.md").read_text()
    lock = yaml.safe_load((project / "dvc.lock").read_text())
    before = {o["path"]: o["md5"] for o in lock["stages"][f"train@{run}"]["outs"]}
    killed = dvc(project, "repro", "-f", "-s", f"train@{run}", check=False, env={"PRIORLAB_KILL_AT_STEP": "30"})
    assert killed.returncode != 0 and list((project / ".checkpoints" / "train").glob("*.pt"))
    # forced: DVC would restore the completed run's outputs (dvc.lock, run-cache); resume from the checkpoint
    dvc(project, "repro", "-f", "-s", f"train@{run}")
    lock = yaml.safe_load((project / "dvc.lock").read_text())
    after = {o["path"]: o["md5"] for o in lock["stages"][f"train@{run}"]["outs"]}
    assert after[f"models/train/baselines/{run}"] == before[f"models/train/baselines/{run}"]
    assert not list((project / ".checkpoints").rglob("*.pt"))


def test_plain_dvc_repro_writes_the_runners_outputs_and_an_uninterrupted_pretraining_the_resumed_one(project):
    """The fixture's first pretraining (pretrain@smiley) was killed mid-way by SIGKILL and resumed by the
    project's runner, which ran every stage.  Plain `dvc repro -f` of one run's whole chain (its data, the
    pretraining uninterrupted, setup_runs, prior_init, train, evaluate) writes every output byte for byte
    as the runner did: the same models, curves and metrics."""
    before = lock_outs(project)
    proc = dvc(project, "repro", "-f", "evaluate@smiley-vae-0")
    ran = set(re.findall(r"Running stage '(\S+)'", proc.stdout))
    assert {"data@smiley", "pretrain@smiley", "setup_runs", "prior_init@smiley", "train@smiley-vae-0",
            "evaluate@smiley-vae-0"} <= ran, ran
    after = lock_outs(project)
    assert {stage: after[stage] for stage in ran} == {stage: before[stage] for stage in ran}
    assert ("reports/live/pretrain/smiley", dict(before["pretrain@smiley"])["reports/live/pretrain/smiley"]) in \
        after["pretrain@smiley"]  # the curves too: the resumed run logged exactly the uninterrupted one's


def test_joint_training_param_reruns_only_downstream(project):
    params = read_params(project)
    params["train"]["lr"] = params["train"]["lr"] * 2
    write_params(project, params)
    status = json.loads(dvc(project, "status", "--json").stdout)
    # only the stages that read train.* themselves (the report prints the settings, the diagnosis compares them with the papers)
    assert status and all(name.startswith("train@") or name in ("report", "diagnosis") for name in status), status
    assert {f"train@{r}" for r in RUNS} <= set(status), status
    # the parallel runner (what `make repro` runs) on one run's chain: its training reruns, its evaluation
    # follows (its input changed), nothing upstream does; the other runs' retraining is the same code
    run = "smiley-beta_vae-0"
    proc = sh(project, sys.executable, "-m", "stagerun.repro", "-j", "2", f"evaluate@{run}")
    ran = set(re.findall(r"running (\S+):", proc.stdout))
    assert ran == {f"train@{run}", f"evaluate@{run}"}, ran
    diff = dvc(project, "metrics", "diff", "HEAD").stdout
    assert f"{run}.json" in diff and "elbo" in diff and "log_lik" in diff, diff
    sh(project, "git", "checkout", "-q", "--", ".")  # back to the committed params, lock and metrics
    dvc(project, "checkout", "-q")
    assert "up to date" in dvc(project, "status").stdout


def test_a_runner_only_edit_leaves_every_stage_up_to_date(project):
    """issue 44: the machinery (``src/stagerun``) is no stage's dependency, so editing it stales nothing; an
    edit of the science package (``src/priorlab``) stales the stages, as it should."""
    for path, stale in ((project / "src" / "stagerun" / "repro.py", False), (project / "src" / "priorlab" / "io.py", True)):
        original = path.read_text()
        path.write_text(original + "\n# an edit\n")
        try:
            out = dvc(project, "status").stdout
        finally:
            path.write_text(original)
        assert ("up to date" not in out) == stale, out[:500]
    assert "up to date" in dvc(project, "status").stdout


def test_bad_params_fail_cleanly(project):
    lock = (project / "dvc.lock").read_text()
    good = param_texts(project)
    params = read_params(project)
    params["pretrain"]["lr"] = -1.0
    write_params(project, params)
    proc = dvc(project, "repro", check=False)
    assert proc.returncode != 0
    assert "error: pretrain.lr must be > 0, got -1.0" in proc.stderr + proc.stdout
    assert (project / "dvc.lock").read_text() == lock
    assert not [p for p in project.rglob(".*.tmp") if ".dvc" not in p.parts]  # no half-written temp files
    restore_params(good)
    dvc(project, "checkout", "-q")  # DVC moved the stage's outputs aside; the cache restores them
    assert "up to date" in dvc(project, "status").stdout


def test_remote_round_trip(project, tmp_path):
    remote = tmp_path / "remote"
    dvc(project, "remote", "add", "-d", "local", str(remote))
    dvc(project, "push")
    shutil.rmtree(project / ".dvc" / "cache")
    for d in ("data", "models"):
        shutil.rmtree(project / d)
    sh(project, "git", "checkout", "-q", "--", "data", "models")  # the .gitignore files DVC keeps in git
    dvc(project, "pull")
    status = dvc(project, "status")
    assert "up to date" in status.stdout, status.stdout
    assert (project / "data" / "dsprites" / "data.npz").exists()


def test_fmvae_prior_params_rerun_only_prior_init_and_after(project):
    """Paper 001: changing K or Delta of a factorial mixture model leaves data and pretrain alone, and
    retrains that run only: setup_runs rewrites the setups' slices of the params, and only the setup
    whose file changed (the one that run starts from) reruns its prior_init; the other setups' stages
    stay up to date (issue 44: no prior_init@ tracks the whole models and runs sections)."""
    params = read_params(project)
    params["models"]["fmvae_ss"]["num_components"] = [3, 8]
    params["models"]["fmvae_ss"]["delta"] = 5.0
    write_params(project, params)
    status = json.loads(dvc(project, "status", "--json").stdout)
    run = "dsprites-fmvae_ss-0"
    # The studies' aggregating stages track the whole models section (DVC cannot list a profile-dependent
    # set of keys), as do the stages that write slices of it (param_slices: each study stage's entries;
    # benchmark_plan: each cell's); every per-run stage and study cell outside this run is untouched.
    in_process = {"isa_experiments", "mssc_experiments", "sparse_vae_experiments", "diagnosis", "benchmark_plan"}
    assert set(status) - in_process == {"setup_runs", "param_slices", f"train@{run}"}, status
    proc = sh(project, sys.executable, "-m", "stagerun.repro", "-j", "2")
    ran = set(re.findall(r"running (\S+):", proc.stdout))
    assert "param_slices" in ran and not {s for s in ran if s.split("@")[0] in (  # their slices are unchanged
        "sparse_vae_fit", "sparse_vae_real", "sparse_vae_ablation", "supervised_ceiling", "mssc_patches")}, ran
    assert {s for s in ran if s.startswith("prior_init@")} == {"prior_init@dsprites"}, ran
    assert {s for s in ran if s.startswith("train@")} == {f"train@{run}"}, ran
    assert not any(s.startswith("benchmark_fit@") for s in ran), ran  # no benchmark prior changed
    assert not any(s.startswith(("data@", "pretrain@")) for s in ran), ran
    assert "up to date" in dvc(project, "status").stdout
    sh(project, "git", "checkout", "-q", "--", ".")
    dvc(project, "checkout", "-q")
    assert "up to date" in dvc(project, "status").stdout


def test_a_study_models_param_reruns_only_its_cells(project):
    """Paper 004's study models are stages (isa_fit, one per model entry and seed): changing the ISA
    prior's p0 makes only that model's cell (and the aggregating study) stale, never the β-VAE's cell;
    changing the study's training steps makes every cell stale."""
    original = param_texts(project)
    try:
        params = read_params(project)
        params["models"]["isa_vae"]["prior"]["p0"] = 2.3
        write_params(project, params)
        status = set(json.loads(dvc(project, "status", "--json").stdout))
        assert {"isa_fit@isa_vae-0", "isa_experiments"} <= status and "isa_fit@isa_beta_vae-0" not in status, status
        restore_params(original)
        params = read_params(project)
        params["isa_study"]["train"]["steps"] += 1
        write_params(project, params)
        status = set(json.loads(dvc(project, "status", "--json").stdout))
        assert {"isa_fit@isa_vae-0", "isa_fit@isa_beta_vae-0", "isa_experiments"} <= status, status
        assert not any(s.startswith(("train@", "pretrain@", "data@")) for s in status), status
    finally:
        restore_params(original)
    assert "up to date" in dvc(project, "status").stdout


BLOCK_DVC = """import importlib.abc, importlib.machinery, sys
class _Missing(importlib.abc.Loader):  # as on a machine without them: importing raises
    def create_module(self, spec):
        raise ModuleNotFoundError(f"No module named {spec.name!r}", name=spec.name)
    def exec_module(self, module):
        pass
class _Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("dvc", "dvclive"):
            return importlib.machinery.ModuleSpec(name, _Missing())
sys.meta_path.insert(0, _Block())
"""


def test_a_target_runs_from_its_plan_where_dvc_cannot_be_imported(project, tmp_path):
    """What a lent GPU machine (torch, no DVC) does: the plan of isa_experiments, exported here with
    DVC, runs in a bare copy whose every Python process (the runner and each stage) fails to import
    dvc / dvclive; the study comes out with the numbers of the DVC run."""
    plan = tmp_path / "plan.json"
    sh(project, sys.executable, "-m", "stagerun.plan", "export", "isa_experiments", "--out", str(plan))
    stages = [s["name"] for s in json.loads(plan.read_text())["stages"]]
    assert stages[:2] == ["code", "data@dsprites"] and stages[-1] == "isa_experiments", stages
    assert {"isa_fit@isa_vae-0", "isa_fit@isa_beta_vae-0"} <= set(stages) and len(stages) == 5, stages
    bare = copy_project(ROOT, tmp_path / "bare")
    sh(bare, sys.executable, "-m", "priorlab.config", "use", "tiny")
    block = tmp_path / "block"
    block.mkdir()
    (block / "sitecustomize.py").write_text(BLOCK_DVC)
    env = {"PYTHONPATH": f"{block}{os.pathsep}{bare / 'src'}"}
    assert sh(bare, sys.executable, "-c", "import dvc", check=False, env=env).returncode != 0
    (bare / "reports" / "isa_experiments").mkdir(parents=True, exist_ok=True)
    (bare / "reports" / "isa_experiments" / "stale.png").write_text("an earlier run's figure")
    proc = sh(bare, sys.executable, "-m", "stagerun.plan", "run", str(plan), "-j", "2", "--record",
              str(tmp_path / "record.json"), env=env)
    assert "5 stage(s) ran, 0 failed" in proc.stdout, proc.stdout
    out, ref = bare / "reports" / "isa_experiments", project / "reports" / "isa_experiments"
    assert (out / "README.md").is_file() and (out / "latents_isa_vae.png").is_file()
    assert not (out / "stale.png").exists()  # outputs go before a stage runs, as with dvc repro
    assert (out / "results.csv").read_text() == (ref / "results.csv").read_text()
    assert json.loads((out / "summary.json").read_text()) == json.loads((ref / "summary.json").read_text())
    bad = sh(bare, sys.executable, "-m", "stagerun.plan", "run", str(tmp_path / "none.json"), check=False, env=env)
    assert bad.returncode == 2 and bad.stderr.startswith("error: no plan file"), bad.stderr


@covered_by_the_cluster_test()  # the shards' runners (-j 1, -j 2) and the collector's match the fixture's run there
def test_serial_runner_matches_the_parallel_run(tiny_serial, tmp_path):
    """`python -m stagerun.repro -j 1` (one stage at a time) on a fresh copy gives byte for byte the
    outputs of the fixture's run on two workers (what `make repro` runs), leaves a dvc.lock DVC finds up
    to date, and a second call runs nothing."""
    ser = copy_project(ROOT, tmp_path)
    sh(ser, sys.executable, "-m", "priorlab.config", "use", "tiny")
    sh(ser, sys.executable, "-m", "stagerun.repro", "-j", "1")
    assert "up to date" in dvc(ser, "status").stdout
    again = sh(ser, sys.executable, "-m", "stagerun.repro", "-j", "1")
    assert "0 stage(s) ran" in again.stdout, again.stdout
    # the outputs kept in git (cache: false) hash the same too: byte-identical, no wall-clock fields
    assert lock_outs(ser) == tiny_serial.outs
    assert len(tiny_serial.outs) > 30


@pytest.mark.slow
def test_make_demo_runs_the_tiny_profile_in_a_worktree_and_leaves_the_checkout_alone(tmp_path):
    """Issue 29: a newcomer's first look (`make demo`) must not touch the committed results."""
    if shutil.which("make") is None or shutil.which("git") is None:
        pytest.skip("make and git are needed")
    dst = copy_project(ROOT, tmp_path / "p")  # a git repository with one commit
    params = param_texts(dst)
    venv = Path(sys.executable).parents[1]
    done = sh(dst, "make", "-o", f"{venv}/bin/.installed", "-o", ".datasets/.installed", "demo", f"VENV={venv}",
              "DEMO_TARGETS=data@smiley")
    assert "demo: the tiny profile's results are in .demo/reports/" in done.stdout
    assert (dst / ".demo" / "params.yaml").read_text().splitlines()[2] == "profile: tiny"
    assert (dst / ".demo" / "data" / "smiley").is_dir() and not (dst / "data" / "smiley").exists()
    assert param_texts(dst) == params
    assert sh(dst, "git", "status", "--porcelain").stdout == ""  # nothing of the checkout changed
