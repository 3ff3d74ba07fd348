"""The pipeline on a Slurm cluster (stagerun.slurm, issue 30).

Fast: the job scripts, the GPUs a task uses, the collect job's refusal while a shard is missing,
and a push that puts objects before run-cache entries.  Slow (a git copy of the project each):
``submit`` against a stand-in ``sbatch`` (what it submits, the dependency, the worktrees and their
remotes, resubmitting only unfinished shards, refusals); and a real single-node Slurm and an sshd (tests/cluster_servers.py) run the tiny profile as a
2-task array plus collect against an SSH DVC remote; one task is killed mid-stage and resubmitted.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
import yaml

from benchmarks.project_copy import pipeline_env
from stagerun import dvc_adapter, shard, slurm
from stagerun.slurm import Submission
from tests import cluster_servers
from tests.tiny_pipeline import dvc, lock_outs, sh, tiny_copy

# --------------------------------------------------------------------------- job scripts


def test_array_script_runs_one_shard_per_task_and_requeues():
    sub = Submission("/p", "a" * 40, 4, jobs=2, gpus_per_task=1, python="/v/bin/python")
    text = slurm.array_script(sub, [0, 2])
    assert text.startswith("#!/bin/bash\n")
    assert "#SBATCH --array=0,2\n" in text and "#SBATCH --requeue\n" in text
    assert "#SBATCH --gpus-per-task=1\n" in text and "#SBATCH --cpus-per-task=2\n" in text
    assert f"#SBATCH --output=/p/.slurm/{'a' * 12}-4/logs/shard-%a-%A.out" in text
    assert text.rstrip().endswith(f'-m stagerun.slurm -C /p task --submission {"a" * 12}-4 --index "$SLURM_ARRAY_TASK_ID"')
    cpu = slurm.array_script(Submission("/p", "a" * 40, 4, gpus_per_task=0), [1])
    assert "gpus" not in cpu
    assert "stagerun.slurm -C /p collect --submission" in slurm.collect_script(sub)


def test_the_jobs_command_lines_parse():
    sub = Submission("/p q", "a" * 40, 2)
    for script, command in ((slurm.array_script(sub, [0, 1]), "task"), (slurm.collect_script(sub), "collect")):
        words = shlex.split(script.splitlines()[-1].replace('"$SLURM_ARRAY_TASK_ID"', "1"))
        ns = slurm.parser().parse_args(words[words.index("stagerun.slurm") + 1:])
        assert (ns.command, ns.root, ns.submission) == (command, "/p q", sub.name)
        assert "export PYTHONPATH='/p q/" in script  # the job's own code: the task's worktree, or the checkout


@pytest.mark.parametrize("value, expected", [("", []), ("0", ["0"]), ("3,5", ["3", "5"]),
                                             ("GPU-1a, GPU-2b", ["GPU-1a", "GPU-2b"])])
def test_a_task_uses_the_gpus_slurm_gave_it(value, expected):
    assert slurm.visible_gpus({"CUDA_VISIBLE_DEVICES": value}) == expected


def test_a_task_starts_one_stage_per_gpu(monkeypatch):
    sub = Submission("/p", "a" * 40, 2, jobs=2, gpus_per_task=2)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,7")
    assert slurm.shard_args(sub, "collect") == ["collect", "-j", "2", "--gpus", "4,7"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert slurm.shard_args(Submission("/p", "a" * 40, 2, jobs=3), "collect") == ["collect", "-j", "3"]


# --------------------------------------------------------------------------- submit, with a stand-in sbatch


@pytest.fixture(scope="module")
def checkout(tmp_path_factory) -> Path:
    """The tiny profile in a git copy of the project, with a local-directory default remote."""
    dst = tiny_copy(tmp_path_factory.mktemp("checkout"))
    dvc(dst, "remote", "add", "--local", "-d", "store", "../remote")
    return dst


@pytest.fixture
def fake_sbatch(tmp_path, monkeypatch) -> Path:
    """An ``sbatch`` on PATH that records its arguments and answers job ids 101, 102, ..."""
    record = tmp_path / "sbatch.calls"
    exe = tmp_path / "bin" / "sbatch"
    exe.parent.mkdir()
    exe.write_text(f"#!/bin/sh\necho \"$@\" >> {record}\necho $((100 + $(wc -l < {record})))\n")
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{exe.parent}{os.pathsep}{os.environ['PATH']}")
    return record


def _submit(checkout: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "stagerun.slurm", "-C", str(checkout), "submit", *args],
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(checkout / "src")})


@pytest.mark.slow
def test_submit_sends_the_array_then_a_collect_that_waits_for_all_of_it(checkout, fake_sbatch):
    proc = _submit(checkout, "--shards", "2", "-j", "1", "--sbatch-arg=--partition=gpu --time=1:00:00")
    assert proc.returncode == 0, proc.stderr
    assert "submitted shard(s) 0/2, 1/2" in proc.stdout and "array job 101" in proc.stdout
    array, collect = fake_sbatch.read_text().splitlines()
    assert array.startswith("--parsable --partition=gpu --time=1:00:00 ") and array.endswith("shards.sbatch")
    assert "--dependency=afterany:101" in collect and collect.endswith("collect.sbatch")
    sub = Submission.load(next((checkout / ".slurm").iterdir()))
    assert sub.count == 2 and sub.jobs == 1 and len(sub.commit) == 40
    for i in (0, 1):  # each task works in a worktree of the commit, with the checkout's remote
        wt = sub.worktree(i)
        assert sh(wt, "git", "rev-parse", "HEAD").stdout.strip() == sub.commit
        remotes = dvc(wt, "remote", "list").stdout.split()
        assert remotes[0] == "store" and Path(remotes[1]).resolve() == (checkout.parent / "remote").resolve()
        assert "store" in dvc(wt, "remote", "default").stdout
    assert "stagerun.slurm" not in sh(checkout, "git", "status", "--porcelain").stdout  # .slurm/ is ignored


@pytest.mark.slow
def test_a_second_submit_sends_only_the_unfinished_shards(checkout, fake_sbatch):
    sub = Submission.load(next((checkout / ".slurm").iterdir()))
    slurm._write_atomic(sub.done_file(1), "{}\n")
    proc = _submit(checkout, "--shards", "2", "-j", "1")
    assert proc.returncode == 0, proc.stderr
    assert "submitted shard(s) 0/2 of" in proc.stdout
    assert "#SBATCH --array=0\n" in (sub.dir / "shards.sbatch").read_text()
    slurm._write_atomic(sub.done_file(0), "{}\n")
    proc = _submit(checkout, "--shards", "2", "-j", "1")
    assert "every shard of" in proc.stdout and "collect job only" in proc.stdout
    assert "--dependency" not in fake_sbatch.read_text().splitlines()[-1]
    assert _submit(checkout, "--shards", "2", "-j", "1", "--again").stdout.count("0/2, 1/2") == 1


def test_the_collect_job_refuses_while_a_shard_is_missing(checkout, tmp_path, capsys):
    sub = Submission(str(checkout), "b" * 40, 3)
    sub.save()
    slurm._write_atomic(sub.done_file(1), "{}\n")
    assert slurm.main(["-C", str(checkout), "collect", "--submission", sub.name]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "shard(s) 0/3, 2/3 did not finish" in err and "--shards 3" in err


@pytest.mark.slow
@pytest.mark.parametrize("change, message", [
    ("params", "params.yaml differ from it: commit them first"),
    ("remote", "no default DVC remote"),
    ("sbatch", "sbatch not found"),
    ("shards", "--shards must be at least 1"),
])
def test_submit_refuses_in_one_line(checkout, tmp_path, monkeypatch, capsys, change, message):
    args = ["--shards", "0" if change == "shards" else "2"]
    if change == "params":
        (checkout / "params.yaml").write_text((checkout / "params.yaml").read_text() + "\n# edited\n")
    if change == "remote":
        dvc(checkout, "remote", "default", "--local", "--unset")
    if change == "sbatch":  # a PATH with git and this Python only
        (tmp_path / "bin").mkdir()
        (tmp_path / "bin" / "git").symlink_to(shutil.which("git"))
        monkeypatch.setenv("PATH", str(Path(sys.executable).parent) + os.pathsep + str(tmp_path / "bin"))
    try:
        status = slurm.main(["-C", str(checkout), "submit", *args])
    finally:
        if change == "params":
            sh(checkout, "git", "checkout", "-q", "--", "params.yaml")
        if change == "remote":
            dvc(checkout, "remote", "default", "--local", "store")
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1 and message in err, err


def test_push_sends_objects_before_run_cache_entries(monkeypatch):
    """A push cut short after the objects leaves no entry whose objects the remote lacks; objects that
    failed stop it before any entry is pushed."""
    calls = []

    class Repo:
        pass

    import contextlib

    monkeypatch.setattr(dvc_adapter, "open_repo", lambda root, lock=True: contextlib.nullcontext(Repo()))
    monkeypatch.setattr(shard, "_remote", lambda repo, remote: "store")
    monkeypatch.setattr(dvc_adapter, "run_cache_entries", lambda repo: [("k", "v")])
    monkeypatch.setattr(dvc_adapter, "push_entries", lambda repo, name: calls.append("entries"))
    failed = {"n": 0}

    def transfer(repo, entries, name, jobs, direction):
        calls.append("objects")
        return 3, failed["n"]

    monkeypatch.setattr(dvc_adapter, "transfer_objects", transfer)
    shard.push(".", log=lambda m: None)
    assert calls == ["objects", "entries"]
    calls.clear()
    failed["n"] = 1
    with pytest.raises(shard.UserError, match="could not be pushed"):
        shard.push(".", log=lambda m: None)
    assert calls == ["objects"]


# --------------------------------------------------------------------------- a real Slurm and SSH remote


def _log_lines(sub: Submission, pattern: str) -> list[Path]:
    return sorted((sub.dir / "logs").glob(pattern))


def _wait_for_line(cluster, path_glob, pattern: str, timeout: float) -> str:
    """The first group of ``pattern`` once a log file shows it; fails at once when no job is left."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        texts = [path.read_text() for path in path_glob()]
        for text in texts:
            found = re.search(pattern, text)
            if found:
                return found.group(1)
        if not cluster.queue():
            raise AssertionError(f"the jobs ended without a line matching {pattern!r}:\n" + "\n".join(texts)[-3000:])
        time.sleep(0.5)
    raise AssertionError(f"no line matching {pattern!r} after {timeout:.0f} s")


def _remote_is_whole(remote: Path) -> int:
    """Every run-cache entry in the remote names only objects the remote has; returns the count."""
    entries = [p for p in (remote / "runs").glob("*/*/*") if p.is_file()]
    for entry in entries:
        for out in yaml.safe_load(entry.read_text()).get("outs", []):
            md5 = out["md5"]
            assert (remote / "files" / "md5" / md5[:2] / md5[2:]).is_file(), f"{entry}: {out['path']} missing"
    return len(entries)


@pytest.mark.slow
def test_tiny_profile_as_a_slurm_array_with_an_ssh_remote(tiny_serial, tmp_path):
    """The tiny profile as a 2-task array plus collect, on a real single-node Slurm, sharing an SSH
    DVC remote: task 0 is cancelled (scancel) mid-stage; the collect job then refuses and leaves the
    checkout alone; the remote holds no entry it cannot restore; a second submit sends only shard 0,
    which restores what it finished and runs the rest; the collect job restores every shard's work
    (no training stage runs there) and its outputs are byte-identical to the fixture's run; every
    stage ran once across the tasks, but for the one killed mid-way; `dvc status` is clean."""
    reason = cluster_servers.missing()
    if reason:
        pytest.skip(reason)
    project = tiny_copy(tmp_path / "project")
    remote = tmp_path / "remote"
    remote.mkdir()
    with cluster_servers.local_cluster(tmp_path / "cluster") as cluster:
        dvc(project, "remote", "add", "--local", "-d", "store", cluster.ssh_url(remote))
        dvc(project, "remote", "modify", "--local", "store", "keyfile", str(cluster.key))

        def submit(jobs: int) -> str:
            proc = cluster.run([sys.executable, "-m", "stagerun.slurm", "submit", "--shards", "2", "-j", str(jobs),
                                "--poll", "2"], cwd=project, env=pipeline_env(project))
            return proc.stdout

        first = submit(1)  # two tasks of one CPU each on the node's two
        assert "submitted shard(s) 0/2, 1/2" in first, first
        job = re.search(r"array job (\d+)", first).group(1)
        sub = Submission.load(next((project / ".slurm").iterdir()))
        _wait_for_line(cluster, lambda: _log_lines(sub, f"shard-0-{job}.out"), r"running (evaluate@\S+):", 600)
        cluster.run(["scancel", f"{job}_0"])  # mid-stage, late in the shard's work, as a user's cancel or a
        cluster.wait_idle(600)                # pre-emption: SIGTERM, SIGKILL after KillWait (30 s, Slurm's default)
        first_log = _log_lines(sub, f"shard-0-{job}.out")[0].read_text()
        # the stage running at the cancel: that evaluate, or one after it (a forked stage can end within a second)
        stopped = re.search(r"^stopped (\S+)$", first_log, re.M)
        assert stopped, first_log[-2000:]
        killed_stage = stopped.group(1)
        assert f"stopped {killed_stage}" in first_log and "run it again to continue" in first_log, first_log[-2000:]
        assert "waiting for" not in first_log.split(f"stopped {killed_stage}")[1]  # no further step
        collect_log = _log_lines(sub, "collect-*.out")[-1].read_text()
        assert "shard(s) 0/2 did not finish" in collect_log and "nothing was collected" in collect_log
        assert not (project / "dvc.lock").exists()  # the checkout is left alone
        assert _remote_is_whole(remote) > 0
        assert (sub.done_file(1)).is_file() and not sub.done_file(0).is_file()

        second = submit(2)  # shard 0 alone: both CPUs
        assert "submitted shard(s) 0/2 of" in second and "1/2" not in second.split("collect")[0], second
        cluster.wait_idle(600)
        logs = {p.name: p.read_text() for p in (sub.dir / "logs").iterdir()}
        collect_log = _log_lines(sub, "collect-*.out")[-1].read_text()
        assert "0 failed" in collect_log and "training stage(s) ran here" not in collect_log, collect_log[-3000:]
        _remote_is_whole(remote)

    assert not cluster_servers.leftovers(tmp_path / "cluster")  # every server and job stopped, namespace gone
    assert "up to date" in dvc(project, "status").stdout
    assert lock_outs(project) == tiny_serial.outs  # byte-identical to the fixture's run
    again = sh(project, sys.executable, "-m", "stagerun.repro", "-j", "2")
    assert "0 stage(s) ran" in again.stdout, again.stdout
    ran = Counter(s for name, text in logs.items() if name.startswith("shard-") for s in re.findall(r"running (\S+):", text))
    twice = {s for s, n in ran.items() if n > 1} - set(shard.EVERY_SHARD)  # every shard computes them for itself
    assert twice == {killed_stage} and ran[killed_stage] == 2, ran
    at_collect = set(re.findall(r"running (\S+):", collect_log))
    assert not at_collect & set(ran), at_collect & set(ran)
    trained = {s for s in lock_outs(project) if s.split("@")[0] in ("data", "pretrain", "prior_init", "train",
                                                                       "evaluate", "isa_fit", "mssc_fit")}
    assert trained <= set(ran), trained - set(ran)
    assert not list((project / ".slurm").glob("*/work/*"))  # worktrees removed after the collect
    assert json.loads(sub.done_file(0).read_text())["shard"] == "0/2"

