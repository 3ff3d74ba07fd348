"""The parallel runner (`python -m stagerun.repro`) on a small DVC project of shell stages.

The end-to-end test (tests/test_pipeline_e2e.py) checks its outputs against plain `dvc repro` of one
run's chain of the tiny profile; these check its scheduling and bookkeeping quickly: independent stages overlap, a stage
runs only after its upstream, `dvc status` is clean afterwards, an unchanged upstream rerun does not
rerun its downstream, a failure stops new launches and records what finished, GPUs per worker.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from stagerun.repro import main, worker_envs

DVC_YAML = {
    "stages": {
        "a": {"cmd": "sleep 0.3 && date +%s.%N > a.start && echo $A > a.txt", "outs": ["a.txt"]},
        "b": {"cmd": "date +%s.%N > b.start && sleep 1.5 && cat a.txt > b.txt && date +%s.%N > b.end",
              "deps": ["a.txt"], "outs": ["b.txt"]},
        "c": {"cmd": "date +%s.%N > c.start && sleep 1.5 && cat a.txt a.txt > c.txt && date +%s.%N > c.end"
                     " && echo $CUDA_VISIBLE_DEVICES,$PRIORLAB_WORKER >> workers.log",
              "deps": ["a.txt"], "outs": ["c.txt"]},
        "d": {"cmd": "cat b.txt c.txt > d.txt", "deps": ["b.txt", "c.txt"], "outs": ["d.txt"]},
    }
}


def _dvc(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dvc", *args], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, "DVC_NO_ANALYTICS": "1"})


@pytest.fixture()
def project(tmp_path, monkeypatch):
    if shutil.which("git") is None:
        pytest.skip("git is required by DVC")
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    assert _dvc(tmp_path, "init", "-q").returncode == 0
    (tmp_path / "dvc.yaml").write_text(yaml.safe_dump(DVC_YAML, sort_keys=False))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("A", "one")
    return tmp_path


def _run(*argv: str) -> int:
    return main(list(argv))


def test_independent_stages_overlap_and_the_lock_is_what_dvc_expects(project):
    assert _run("-j", "2", "--timings", "timings.json") == 0
    ignored = subprocess.run(["git", "check-ignore", "a.txt", "b.txt", "c.txt", "d.txt"], cwd=project,
                             capture_output=True, text=True).stdout.split()
    assert ignored == ["a.txt", "b.txt", "c.txt", "d.txt"]  # git ignores the outputs, as after `dvc repro`
    assert (project / "d.txt").read_text() == "one\none\none\n"  # b: a; c: a twice
    start = {s: float((project / f"{s}.start").read_text()) for s in "abc"}
    end = {s: float((project / f"{s}.end").read_text()) for s in "bc"}
    assert start["b"] > start["a"] and start["c"] > start["a"]          # after their upstream
    assert start["b"] < end["c"] and start["c"] < end["b"]              # side by side
    status = _dvc(project, "status")
    assert "up to date" in status.stdout, status.stdout
    lock = yaml.safe_load((project / "dvc.lock").read_text())
    assert set(lock["stages"]) == set("abcd")
    timings = json.loads((project / "timings.json").read_text())
    assert set(timings["stages"]) == set("abcd") and timings["jobs"] == 2
    assert all(t["wall_s"] > 0 and t["max_rss_mib"] > 0 for t in timings["stages"].values())
    assert 0 < timings["runner_cpu_s"]
    assert _run("-j", "2") == 0  # nothing to do: nothing reruns
    assert "up to date" in _dvc(project, "status").stdout


def test_the_runner_reports_its_own_cpu_not_the_stages(project, capsys):
    """issue 44: the summary line and --timings give the runner process's own CPU; a stage that burns
    3 s of CPU in its own process is not counted in it."""
    burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 3.0:\n    pass\n"
    (project / "burn.py").write_text(burn)
    (project / "dvc.yaml").write_text(yaml.safe_dump(
        {"stages": {"burn": {"cmd": f"{sys.executable} burn.py && echo done > burn.txt", "outs": ["burn.txt"]}}}))
    assert _run("-j", "1", "--no-preload", "--timings", "timings.json") == 0
    line = capsys.readouterr().out.strip().splitlines()[-1]
    timings = json.loads((project / "timings.json").read_text())
    assert timings["stages"]["burn"]["wall_s"] >= 3.0
    assert 0 < timings["runner_cpu_s"] < 2.0, timings  # the stage's 3 s are its own
    shown = re.search(r"the runner's own CPU (\d+\.\d) s \(", line)
    assert shown and line.endswith("% of one core)"), line
    assert abs(float(shown.group(1)) - timings["runner_cpu_s"]) <= 0.051, line  # one decimal of the same value


def test_the_runner_looks_for_ready_stages_only_after_a_change(project, monkeypatch):
    """issue 44: while a stage runs, the runner polls for its exit every 50 ms but looks for ready stages
    only after a stage starts, ends or is skipped (a look every poll was a fifth of its own CPU over a
    full cpu run); the stages still run in order."""
    from stagerun import repro

    (project / "dvc.yaml").write_text(yaml.safe_dump({"stages": {
        "slow": {"cmd": "sleep 2 && echo s > slow.txt", "outs": ["slow.txt"]},
        "after": {"cmd": "cat slow.txt > after.txt", "deps": ["slow.txt"], "outs": ["after.txt"]}}}))
    looks = []
    original = repro._Run.ready
    monkeypatch.setattr(repro._Run, "ready", lambda self: looks.append(len(self.done)) or original(self))
    assert _run("-j", "2", "--no-preload") == 0
    assert (project / "after.txt").read_text() == "s\n"
    assert len(looks) <= 4, looks  # a look per poll: about 40 in the 2 s


def test_after_a_failed_dvc_repro_the_runner_ignores_the_outputs_dvc_recorded_but_unignored(project):
    """A failing `dvc repro` keeps the stages it finished in dvc.lock but takes back their .gitignore entries
    (DVC's scm_context undoes its ignores on an error): `git add -A` would then commit a.txt to git.  The
    runner finds `a` up to date and ignores its output again."""
    spec = yaml.safe_load((project / "dvc.yaml").read_text())
    spec["stages"]["b"]["cmd"] = "exit 3"
    (project / "dvc.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    assert _dvc(project, "repro", "b").returncode != 0
    assert "a" in yaml.safe_load((project / "dvc.lock").read_text())["stages"]

    def ignored(path: str) -> bool:
        return subprocess.run(["git", "check-ignore", "-q", path], cwd=project).returncode == 0

    assert not ignored("a.txt")  # DVC's own behaviour, which this test works around
    spec["stages"]["b"]["cmd"] = DVC_YAML["stages"]["b"]["cmd"]
    (project / "dvc.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    assert _run("-j", "1", "c") == 0  # `a` is up to date: only c runs
    assert ignored("a.txt") and ignored("c.txt")


def test_unchanged_upstream_rerun_leaves_downstream_alone(project):
    assert _run("-j", "2") == 0
    b_mtime = (project / "b.txt").stat().st_mtime_ns
    lock = yaml.safe_load((project / "dvc.yaml").read_text())
    lock["stages"]["a"]["cmd"] += " && true"  # a's command changed, its output did not
    (project / "dvc.yaml").write_text(yaml.safe_dump(lock, sort_keys=False))
    assert _run("-j", "2") == 0
    assert (project / "b.txt").stat().st_mtime_ns == b_mtime  # b was skipped, as `dvc repro` skips it
    assert "up to date" in _dvc(project, "status").stdout


def test_a_failure_stops_new_stages_and_records_the_finished_ones(project, capsys):
    spec = yaml.safe_load((project / "dvc.yaml").read_text())
    spec["stages"]["b"]["cmd"] = "exit 3"
    (project / "dvc.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    from stagerun.repro import HISTORY

    (project / HISTORY).parent.mkdir(parents=True, exist_ok=True)
    (project / HISTORY).write_text(json.dumps({"b": 42.0}))  # b's last full run
    assert _run("-j", "2") == 1
    assert "stage b failed (exit status 3)" in capsys.readouterr().out
    lock = yaml.safe_load((project / "dvc.lock").read_text())
    assert "a" in lock["stages"] and "c" in lock["stages"]  # c was running: it finished and was recorded
    assert "b" not in lock["stages"] and not (project / "d.txt").exists()
    walls = json.loads((project / HISTORY).read_text())
    assert walls["b"] == 42.0 and walls["c"] > 1.0  # issue 44: a failed stage keeps its last full wall


def test_a_failed_rerun_leaves_the_recorded_outputs_in_place(project, capsys):
    """issue 44: a stage failing on its rerun (a NaN-stopped training) no longer leaves the workspace
    without its outputs until the next run: the runner removed them before launching it, as DVC does,
    and puts dvc.lock's version back from the cache; the stage stays stale."""
    assert _run("-j", "2") == 0
    before = (project / "b.txt").read_text()
    spec = yaml.safe_load((project / "dvc.yaml").read_text())
    spec["stages"]["b"]["cmd"] = "echo half-written > b.txt && exit 3"  # its rerun fails
    (project / "dvc.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    assert _run("-j", "1", "b") == 1
    assert "b: put back its recorded b.txt (dvc.lock's; the stage stays stale)" in capsys.readouterr().out
    assert (project / "b.txt").read_text() == before
    assert "changed command" in _dvc(project, "status", "b").stdout


def test_targets_and_gpus_per_worker(project):
    assert _run("-j", "2", "--gpus", "3,5", "c") == 0
    assert (project / "c.txt").exists() and not (project / "b.txt").exists()  # c and its upstream only
    assert (project / "workers.log").read_text().strip() in {"3,0", "5,1"}


def test_an_unknown_target_is_one_clear_error(project, capsys):
    assert _run("-j", "2", "no-such-stage") == 2
    assert capsys.readouterr().err.strip() == "error: unknown stage 'no-such-stage' (see `dvc stage list`)"
    assert not (project / "dvc.lock").exists()


def test_worker_envs_are_checked():
    assert worker_envs(2, ["0", "1"])[1] == {"PRIORLAB_WORKER": "1", "CUDA_VISIBLE_DEVICES": "1"}
    assert [e["CUDA_VISIBLE_DEVICES"] for e in worker_envs(4, ["0"] * 4)] == ["0"] * 4  # four workers on one card
    with pytest.raises(ValueError, match="one per worker"):
        worker_envs(3, ["0"])
    with pytest.raises(ValueError, match="at least 1"):
        worker_envs(0, None)


def test_critical_path_rank_puts_long_chains_first():
    from stagerun.repro import critical_path_rank

    class Stage:  # hashable by identity, like DVC's stages
        def __init__(self, name):
            self.addressing = name

    a, b, c, study = (Stage(n) for n in ("a", "b", "c", "study"))
    upstream = {a: set(), b: {a}, c: {b}, study: set()}
    rank = critical_path_rank([a, b, c, study], upstream, {"a": 1.0, "b": 2.0, "c": 3.0, "study": 5.0})
    assert rank[a] == 6.0 and rank[b] == 5.0 and rank[c] == 3.0 and rank[study] == 5.0
    assert critical_path_rank([a, b, c, study], upstream, {})[a] == 3.0  # never timed: 1 s each


def test_history_falls_back_to_the_committed_bench_per_kind(tmp_path):
    from stagerun.repro import BENCH, HISTORY, _read_history, _write_history

    (tmp_path / BENCH).parent.mkdir(parents=True)
    (tmp_path / BENCH).write_text(json.dumps({"pipeline": {"by_kind": {"train": {"n": 4, "sum_wall_s": 40.0}}}}))
    assert _read_history(str(tmp_path)) == {"kind:train": 10.0}
    _write_history(str(tmp_path), {"train@a": 3.0})
    _write_history(str(tmp_path), {"report": 1.0})
    assert _read_history(str(tmp_path)) == {"kind:train": 10.0, "train@a": 3.0, "report": 1.0}
    assert (tmp_path / HISTORY).is_file()


PARAMS = """\
threads: 1
train: {steps: 10, batch_size: 64}
models:
  vsc: {kind: vsc, num_components: [1, 4], beta: 2.0}
  vae: {kind: vae}
7: seven
"""
KEYS = ["threads", "train", "train.steps", "models.vsc", "models.vsc.num_components.1", "models.va*.kind",
        "7", "absent", "models.vsc.absent", "models.vsc.num_components.5"]


def test_parse_params_once_returns_what_dvc_reads_and_sees_edits(tmp_path):
    import dvc.dependency.param as dvc_param
    from dvc.fs import LocalFileSystem

    from stagerun.dvc_adapter import parse_params_once

    fs, path = LocalFileSystem(), str(tmp_path / "params.yaml")
    (tmp_path / "params.yaml").write_text(PARAMS)
    original = dvc_param.read_param_file
    expected = original(fs, path, KEYS, flatten=True)
    whole, nested = original(fs, path), original(fs, path, ["models.vsc", "threads"], flatten=False)
    assert expected["models.vsc.num_components.1"] == 4 and "absent" not in expected  # the fixture reaches every case
    calls = []
    with parse_params_once():
        assert dvc_param.read_param_file is not original
        real_load = dvc_param.load_path
        dvc_param.load_path = lambda *a, **k: calls.append(a[0]) or real_load(*a, **k)
        try:
            for _ in range(3):
                got = dvc_param.read_param_file(fs, path, KEYS, flatten=True)
                assert got == expected
                got["train"]["steps"] = -1  # a caller's edit does not reach the next caller
            assert dvc_param.read_param_file(fs, path) == whole
            assert dvc_param.read_param_file(fs, path, ["models.vsc", "threads"], flatten=False) == nested
            assert len(calls) == 1  # parsed once
            (tmp_path / "params.yaml").write_text(PARAMS.replace("steps: 10", "steps: 200"))
            assert dvc_param.read_param_file(fs, path, ["train.steps"], flatten=True) == {"train.steps": 200}
            assert len(calls) == 2
        finally:
            dvc_param.load_path = real_load
    assert dvc_param.read_param_file is original


def test_parse_params_once_leaves_other_filesystems_to_dvc(tmp_path):
    import dvc.dependency.param as dvc_param

    from stagerun.dvc_adapter import parse_params_once

    class OtherFS:  # not the workspace (e.g. a git revision): DVC's own reader must serve it
        pass

    (tmp_path / "p.yaml").write_text("a: 2\n")  # a workspace file of the same path exists
    seen = []
    original = dvc_param.read_param_file
    with parse_params_once():
        patched = dvc_param.read_param_file
        dvc_param.read_param_file = original
        try:
            import unittest.mock as mock

            with mock.patch.object(dvc_param, "load_path", side_effect=lambda *a, **k: seen.append(a) or {"a": 1}):
                assert patched(OtherFS(), str(tmp_path / "p.yaml"), ["a"], flatten=True) == {"a": 1}
                assert patched(OtherFS(), str(tmp_path / "p.yaml"), ["a"], flatten=True) == {"a": 1}
        finally:
            dvc_param.read_param_file = patched
    assert len(seen) == 2  # read each time, not kept


def test_an_untested_dvc_is_refused_with_one_line(project, monkeypatch, capsys):
    """The runner drives DVC internals (issue 25): any release but the tested minor one is refused
    before DVC is touched, with one line naming the found version and the two ways out."""
    import stagerun.dvc_adapter as dvc_adapter
    import stagerun.repro as repro
    from priorlab.errors import UserError

    assert repro.require_tested_dvc is dvc_adapter.require_tested_dvc  # still importable from the runner
    dvc_adapter.require_tested_dvc("3.67.1")
    dvc_adapter.require_tested_dvc()  # the installed one is the pinned one
    for bad in ("3.68.0", "4.0.1", "3", "dev"):
        with pytest.raises(UserError, match="plain `dvc repro`"):
            dvc_adapter.require_tested_dvc(bad)
    monkeypatch.setattr(dvc_adapter, "TESTED_DVC", (2, 0))
    assert _run("-j", "1") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "tested with dvc 2.0.x, found dvc 3.67" in err[0]
    assert not (project / "dvc.lock").exists() and not (project / "a.txt").exists()  # nothing ran


def test_dvc_still_reads_params_through_the_function_the_runner_replaces(project):
    """``parse_params_once`` swaps ``dvc.dependency.param.read_param_file``; if DVC stopped looking the
    function up there, the swap would silently do nothing: DVC's own ``Stage.changed`` must call it."""
    import dvc.dependency.param as dvc_param

    from stagerun.dvc_adapter import open_repo, parse_params_once

    (project / "params.yaml").write_text("x: 1\ny: {z: 2}\n")
    (project / "dvc.yaml").write_text(yaml.safe_dump(
        {"stages": {"p": {"cmd": "echo p > p.txt", "params": ["x", "y.z"], "outs": ["p.txt"]}}}))
    assert _dvc(project, "repro").returncode == 0  # a lock entry with the params' values
    calls = []
    with parse_params_once():
        patched = dvc_param.read_param_file

        def counting(*args, **kwargs):
            calls.append(args[1])
            return patched(*args, **kwargs)

        dvc_param.read_param_file = counting
        try:
            with open_repo(project) as repo:  # as the runner holds it (with DVC's repository lock)
                stage = next(s for s in repo.index.stages if s.name == "p")
                assert not stage.changed()  # up to date: decided by comparing the params read now
        finally:
            dvc_param.read_param_file = patched
    assert calls and all(str(c).endswith("params.yaml") for c in calls)


# --------------------------------------------------------------------------- the runner owns its stages (issue 29)

LONG_STAGE = """\
import os, sys, time
from pathlib import Path
from priorlab.runtime import die_with_runner
die_with_runner()
Path("long.pid").write_text(str(os.getpid()))
for i in range(int(os.environ.get("LONG_S", "60")) * 10):
    time.sleep(0.1)
    Path("long.progress").write_text(str(i))  # what an orphan would go on writing
Path("long.txt").write_text("done")
"""


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for a reaper counts as ended)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


def _wait_for(path: Path, timeout: float = 30.0) -> None:
    deadline = __import__("time").monotonic() + timeout
    while not path.exists():
        assert __import__("time").monotonic() < deadline, f"{path} never appeared"
        __import__("time").sleep(0.05)


@pytest.fixture()
def long_project(project):
    (project / "long.py").write_text(LONG_STAGE)
    spec = {"stages": {"quick": {"cmd": "echo quick > quick.txt", "outs": ["quick.txt"]},
                       "long": {"cmd": f"{sys.executable} long.py", "deps": ["long.py"], "outs": ["long.txt"]}}}
    (project / "dvc.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return project


def _runner(project: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "stagerun.repro", "-j", "2", *args], cwd=project,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "DVC_NO_ANALYTICS": "1"})


@pytest.mark.parametrize("launch", [(), ("--no-preload",)], ids=["forked", "spawned"])
def test_a_stage_dies_with_its_runner_even_on_kill_9_and_the_next_run_needs_no_manual_step(long_project, launch):
    import signal as sig
    import time

    runner = _runner(long_project, *launch)
    _wait_for(long_project / "long.progress")
    pid = int((long_project / "long.pid").read_text())
    runner.send_signal(sig.SIGKILL)
    runner.wait(10)
    time.sleep(2.0)
    assert not _alive(pid), "the stage outlived its runner"
    progress = (long_project / "long.progress").read_text()
    time.sleep(0.5)
    assert (long_project / "long.progress").read_text() == progress  # nothing writes on after the runner
    os.environ["LONG_S"] = "0"
    try:
        assert _run("-j", "2") == 0
    finally:
        del os.environ["LONG_S"]
    assert (long_project / "long.txt").read_text() == "done"
    assert "changed" not in _dvc(long_project, "status").stdout


@pytest.mark.parametrize("launch", [(), ("--no-preload",)], ids=["forked", "spawned"])
def test_sigint_stops_the_running_stages_records_the_finished_ones_and_ends_in_one_line(long_project, launch):
    import signal as sig

    runner = _runner(long_project, *launch)
    _wait_for(long_project / "long.pid")
    _wait_for(long_project / "quick.txt")
    pid = int((long_project / "long.pid").read_text())
    runner.send_signal(sig.SIGINT)
    out, err = runner.communicate(timeout=30)
    assert runner.returncode == 130
    assert err.strip().splitlines() == [err.strip()] and err.startswith("interrupted (SIGINT): stopped 1 running "
                                                                         "stage(s) (long); 1 finished")
    assert "Traceback" not in out + err and not _alive(pid)
    lock = yaml.safe_load((long_project / "dvc.lock").read_text())
    assert "quick" in lock["stages"] and "long" not in lock["stages"]


def test_a_second_runner_while_one_runs_is_one_line(long_project):
    import signal as sig

    first = _runner(long_project, "long")
    _wait_for(long_project / "long.pid")
    second = _runner(long_project, "quick")
    out, err = second.communicate(timeout=60)
    assert second.returncode == 2 and "Traceback" not in err
    assert err.strip().splitlines() == [err.strip()] and "holds this project's lock" in err
    first.send_signal(sig.SIGTERM)
    _, err = first.communicate(timeout=30)
    assert first.returncode == 143 and err.startswith("interrupted (SIGTERM)")


def _runner_done(project: Path, *args: str) -> subprocess.CompletedProcess:
    """The runner in its own process (DVC's logger, set up in-process by an earlier test, may hold a
    closed capture stream)."""
    return subprocess.run([sys.executable, "-m", "stagerun.repro", *args], cwd=project, capture_output=True,
                          text=True, env={**os.environ, "DVC_NO_ANALYTICS": "1"})


def test_record_writes_the_lock_of_outputs_on_disk_without_running(project):
    assert _runner_done(project, "-j", "2").returncode == 0
    spec = yaml.safe_load((project / "dvc.yaml").read_text())
    spec["stages"]["a"]["cmd"] += "  # a comment: the command changed, its output did not"
    (project / "dvc.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    assert "changed" in _dvc(project, "status").stdout
    start = (project / "a.start").read_text()
    done = _runner_done(project, "--record", "a")
    assert done.returncode == 0 and "recorded 1 stage(s)" in done.stdout, done.stderr
    assert (project / "a.start").read_text() == start  # nothing ran
    assert "up to date" in _dvc(project, "status").stdout
    (project / "a" / ".gitignore").unlink(missing_ok=True)
    (project / ".gitignore").write_text("")  # a recorded output git does not ignore yet: recording ignores it
    assert _runner_done(project, "--record", "a").returncode == 0
    assert subprocess.run(["git", "check-ignore", "a.txt"], cwd=project, capture_output=True).returncode == 0


def test_a_whole_record_drops_the_lock_entries_of_stages_the_pipeline_no_longer_has(project):
    """DVC keeps a removed stage's dvc.lock entry forever (the cpu profile's lock held 36, of runs renamed
    when their replicates got their own pretraining); a whole --record drops them, a targeted one does not."""
    assert _runner_done(project, "-j", "2").returncode == 0
    lock = yaml.safe_load((project / "dvc.lock").read_text())
    lock["stages"]["gone@old-run"] = dict(lock["stages"]["a"])
    (project / "dvc.lock").write_text(yaml.safe_dump(lock, sort_keys=False))
    assert _runner_done(project, "--record", "a").returncode == 0
    assert "gone@old-run" in yaml.safe_load((project / "dvc.lock").read_text())["stages"]
    done = _runner_done(project, "--record")
    assert done.returncode == 0 and "dropped 1 entry of stages the pipeline no longer has" in done.stdout, done.stdout
    stages = yaml.safe_load((project / "dvc.lock").read_text())["stages"]
    assert "gone@old-run" not in stages and "a" in stages
    assert "up to date" in _dvc(project, "status").stdout


def test_a_stage_that_does_not_write_its_output_fails_in_one_line(project):
    spec = yaml.safe_load((project / "dvc.yaml").read_text())
    spec["stages"]["b"]["cmd"] = "true"  # exits 0, writes nothing
    (project / "dvc.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    done = _runner_done(project, "-j", "2")
    assert done.returncode == 1 and "Traceback" not in done.stdout + done.stderr
    assert "error: stage b exited 0 but DVC cannot record it: output 'b.txt' does not exist" in done.stdout
    lock = yaml.safe_load((project / "dvc.lock").read_text())
    assert "a" in lock["stages"] and "b" not in lock["stages"]


@pytest.mark.parametrize("change, message", [({"lr": -1.0}, "train.lr"), (None, "not valid YAML")])
def test_an_invalid_params_file_starts_nothing(project, capsys, change, message):
    """issue 44: the runner runs make repro's params check first (one line, exit 2, no stage started,
    nothing of DVC's touched), whether a value is out of range or the YAML does not parse."""
    from priorlab.config import write_raw

    raw = yaml.safe_load((Path(__file__).resolve().parents[1] / "profiles" / "tiny.yaml").read_text())
    raw["train"] = {**raw["train"], **(change or {})}
    if change:
        write_raw(raw, project)
    else:
        (project / "params.yaml").write_text("a: [\n")
    assert _run("-j", "2") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and message in err[0]
    assert not (project / "a.txt").exists() and not (project / "dvc.lock").exists()


def test_dry_names_the_stale_stages_and_those_downstream_of_them(project, capsys):
    """issue 44: --dry lists the stages stale now and, apart, those below them that a run executes too
    once the stale ones change their outputs (here a's output changes: b, c and then d rerun)."""
    assert _run("-j", "2") == 0
    capsys.readouterr()
    spec = yaml.safe_load((project / "dvc.yaml").read_text())
    spec["stages"]["a"]["cmd"] = spec["stages"]["a"]["cmd"].replace("echo $A", "echo changed")
    (project / "dvc.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    assert _run("--dry") == 0
    out = capsys.readouterr().out
    assert "stale: a:" in out and all(f"downstream: {s} " in out for s in "bcd")
    assert "1 stage(s) stale and 3 downstream of them" in out
    assert not (project / "a.txt").read_text().startswith("changed")  # nothing ran
    assert _run("-j", "2") == 0
    assert "4 stage(s) ran" in capsys.readouterr().out  # what --dry announced


BATCH_YAML = {
    "stages": {
        "t": {
            "foreach": ["x", "y", "z"],
            "do": {
                "cmd": "echo ${item} > out_${item} && echo alone ${item} >> calls.log",
                "meta": {"batch_mode": "MODE", "batch_plan": f"{sys.executable} plan.py",
                         "batch_cmd": f"{sys.executable} batch.py", "batch_key": "${item}"},
                "outs": ["out_${item}"],
            },
        },
        "u": {"cmd": "cat out_x out_y out_z > u.txt", "deps": ["out_x", "out_y", "out_z"], "outs": ["u.txt"]},
    }
}
PLAN = "import json, sys\nkeys = sys.argv[1].split(',')\nprint(json.dumps([[k for k in keys if k != 'z']]))\n"
BATCH = ("import sys\nkeys = sys.argv[1].split(',')\nfor k in keys:\n    open(f'out_{k}', 'w').write(k + '\\n')\n"
         "open('calls.log', 'a').write('batch ' + ','.join(keys) + '\\n')\n")


@pytest.mark.parametrize("mode", ["vectorised", "separate"])
def test_a_declared_batch_runs_its_ready_stages_in_one_process_each_recorded_as_its_own(project, mode):
    """A stage's ``meta`` may declare a batch (issue 47: the seeds of one arm trained as one model): the
    runner asks ``batch_plan`` which ready stages go together and runs ``batch_cmd`` once for them;
    each is recorded as its stage (the lock is what a separate run's would be, `dvc status` clean).
    Under ``batch_mode: separate`` nothing is asked and each stage runs its own command."""
    text = yaml.safe_dump(BATCH_YAML, sort_keys=False).replace("MODE", mode)
    (project / "dvc.yaml").write_text(text)
    (project / "plan.py").write_text(PLAN)
    (project / "batch.py").write_text(BATCH)
    assert _run("-j", "1") == 0
    calls = sorted((project / "calls.log").read_text().splitlines())
    if mode == "vectorised":
        assert calls == ["alone z", "batch x,y"] or calls == ["alone z", "batch y,x"], calls
    else:
        assert calls == ["alone x", "alone y", "alone z"], calls
    assert (project / "u.txt").read_text() == "x\ny\nz\n"
    assert "up to date" in _dvc(project, "status").stdout
    lock = yaml.safe_load((project / "dvc.lock").read_text())["stages"]
    assert {"t@x", "t@y", "t@z", "u"} <= set(lock) and lock["t@x"]["cmd"] == "echo x > out_x && echo alone x >> calls.log"
    assert _run("-j", "1") == 0 and sorted((project / "calls.log").read_text().splitlines()) == calls  # no rerun


def test_a_batch_whose_plan_fails_runs_its_stages_alone(project, capsys):
    (project / "dvc.yaml").write_text(yaml.safe_dump(BATCH_YAML, sort_keys=False).replace("MODE", "vectorised"))
    (project / "plan.py").write_text("raise SystemExit('no plan here')\n")
    (project / "batch.py").write_text(BATCH)
    assert _run("-j", "1") == 0
    assert sorted((project / "calls.log").read_text().splitlines()) == ["alone x", "alone y", "alone z"]
    assert "gave no batches (no plan here)" in capsys.readouterr().out


def test_no_run_cache_runs_a_changed_stage_that_the_run_cache_would_restore(project, capsys):
    """A stage whose outputs are gone is restored from DVC's run-cache, as `dvc repro` does; with
    ``--no-run-cache`` (as `dvc repro --no-run-cache`) its command runs."""
    assert _run("-j", "2") == 0
    (project / "b.start").unlink()
    (project / "b.txt").unlink()
    capsys.readouterr()
    assert _run("-j", "2", "b") == 0
    assert "restored b from the run-cache" in capsys.readouterr().out and not (project / "b.start").exists()
    (project / "b.txt").unlink()
    assert _run("-j", "2", "--no-run-cache", "b") == 0
    out = capsys.readouterr().out
    assert "running b:" in out and "restored" not in out.replace("0 restored", "") and (project / "b.start").exists()
    assert "up to date" in _dvc(project, "status").stdout
