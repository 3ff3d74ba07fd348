"""The preloaded stage process (stagerun.prefork): a forked stage behaves as `python script ARGS`."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from stagerun import prefork

PROBE = """\
import json, os, sys
import torch
record = {"argv": sys.argv, "cwd": os.getcwd(), "worker": os.environ.get("PRIORLAB_WORKER"),
          "own_session": os.getsid(0) == os.getpid() == os.getpgrp(), "path0": sys.path[0],
          "name": __name__, "draw": torch.randn(3, generator=torch.Generator().manual_seed(0)).tolist()}
open(sys.argv[1], "w").write(json.dumps(record))
how = sys.argv[2]
if how == "raise":
    raise ValueError("a bug in the stage")
if how == "message":
    sys.exit("error: one line")
if how == "pool":  # joblib's process pool, left for the interpreter's exit to stop (as scikit-learn does)
    from joblib import Parallel, delayed
    assert Parallel(n_jobs=2)(delayed(abs)(-i) for i in range(4)) == [0, 1, 2, 3]
    sys.exit(0)
if how == "sleep":
    open("sleeping", "w").close()
    import time; time.sleep(60)
sys.exit(int(how))
"""


def test_script_command_forks_only_plain_python_script_commands():
    env = {"PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")}
    assert prefork.script_command("python stages/train.py --run a-vae-0", env) == ["stages/train.py", "--run", "a-vae-0"]
    assert prefork.script_command(f"{sys.executable} long.py", env) == ["long.py"]
    for cmd in ("python stages/a.py && echo x", "python stages/a.py > log", "python stages/a.py $X",
                "python 'stages/a b.py'", "python -m stagerun.repro", "sh stages/a.py", "python", "echo a.py",
                'python "unclosed'):
        assert prefork.script_command(cmd, env) is None, cmd
    other = {"PATH": "/nonexistent"}  # `python` is not this interpreter (or not found): a shell runs it
    assert prefork.script_command("python stages/a.py", other) is None


def test_stage_imports_are_the_top_level_imports_of_the_stage_scripts(tmp_path):
    (tmp_path / "a.py").write_text("import sys\nfrom priorlab.cli import run_stage\nfrom . import x\n")
    (tmp_path / "b.py").write_text("import json, os.path\ndef f():\n    import torch\n")
    (tmp_path / "broken.py").write_text("def (:\n")
    assert prefork.stage_imports(tmp_path) == ["json", "os.path", "priorlab.cli", "sys"]
    root = Path(__file__).resolve().parents[1]
    assert {"priorlab.cli", "priorlab.pipeline"} <= set(prefork.stage_imports(root / "stages"))
    preloaded = prefork.preload_modules(root / "stages")
    assert {"priorlab.metrics.mig_chen", "priorlab.plots", "torch._dynamo"} <= set(preloaded)  # lazy imports too


def _wait(server: prefork.Preloaded, pid: int, timeout: float = 60.0) -> tuple[int, float]:
    deadline = time.monotonic() + timeout
    while (done := server.poll(pid)) is None:
        assert time.monotonic() < deadline, "the forked stage never exited"
        time.sleep(0.02)
    return done


@pytest.fixture()
def server(tmp_path):
    """The preloaded process, its (and its children's) stderr in ``tmp_path/stderr``."""
    (tmp_path / "stages").mkdir()
    (tmp_path / "stages" / "probe.py").write_text(PROBE)
    (tmp_path / "work").mkdir()
    saved = os.dup(2)
    with open(tmp_path / "stderr", "wb") as err:
        os.dup2(err.fileno(), 2)
        try:
            preloaded = prefork.Preloaded(tmp_path / "stages")
        finally:
            os.dup2(saved, 2)
            os.close(saved)
    yield preloaded
    preloaded.close()
    assert preloaded.proc.returncode == (-signal.SIGKILL if preloaded.ended else 0)  # end-of-file ends it


def test_a_forked_stage_is_python_script_args_in_its_own_session(server, tmp_path):
    script = str(tmp_path / "stages" / "probe.py")
    work = str(tmp_path / "work")
    pid = server.spawn([script, "out.json", "3"], work, {"PRIORLAB_WORKER": "1"})
    status, rss_mib = _wait(server, pid)
    record = json.loads((tmp_path / "work" / "out.json").read_text())
    assert status == 3 and rss_mib > 50  # the child's own peak RSS (torch is in it)
    assert record["argv"] == [script, "out.json", "3"] and record["cwd"] == work and record["worker"] == "1"
    assert record["own_session"] and record["name"] == "__main__" and record["path0"] == str(tmp_path / "stages")
    # the same draw as a fresh interpreter's
    assert record["draw"] == [1.5409960746765137, -0.293428897857666, -2.1787893772125244]

    for how, expected, stderr in (("0", 0, ""), ("raise", 1, "ValueError: a bug in the stage"),
                                  ("message", 1, "error: one line")):
        status, _ = _wait(server, server.spawn([script, f"{how}.json", how], work, {}))
        assert status == expected, how
        assert stderr in (tmp_path / "stderr").read_text()
        assert json.loads((tmp_path / "work" / f"{how}.json").read_text())["worker"] is None  # per-request env


def test_a_forked_stage_is_stopped_through_its_process_group(server, tmp_path):
    work = tmp_path / "work"
    pid = server.spawn([str(tmp_path / "stages" / "probe.py"), "s.json", "sleep"], str(work), {})
    deadline = time.monotonic() + 60
    while not (work / "sleeping").exists():
        assert time.monotonic() < deadline
        time.sleep(0.02)
    os.killpg(pid, signal.SIGTERM)  # what the runner sends when it stops
    status, _ = _wait(server, pid)
    assert status == -signal.SIGTERM


def test_the_preloaded_process_outlives_a_cancel_and_its_loss_is_a_failed_stage_not_a_crash(server, tmp_path):
    work = tmp_path / "work"
    script = str(tmp_path / "stages" / "probe.py")
    assert _wait(server, server.spawn([script, "a.json", "0"], str(work), {}))[0] == 0  # ready
    os.kill(server.proc.pid, signal.SIGTERM)  # a scheduler's cancel signals every process of the job
    time.sleep(0.2)
    pid = server.spawn([script, "s.json", "sleep"], str(work), {})  # still serving
    while not (work / "sleeping").exists():
        time.sleep(0.02)
    os.kill(server.proc.pid, signal.SIGKILL)  # now it is gone, its child runs on
    time.sleep(0.2)
    assert server.poll(pid) is None and server.ended
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while (done := server.poll(pid)) is None:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert done == (prefork.LOST, 0.0)
    with pytest.raises(prefork.Ended):
        server.spawn([script, "b.json", "0"], str(work), {})


def test_a_forked_stage_exits_as_the_interpreter_does_with_a_process_pool_left_running(server, tmp_path):
    """Threads and executors are shut down before the atexit functions run: else multiprocessing waits for
    loky's workers until their idle timeout (300 s)."""
    start = time.monotonic()
    pid = server.spawn([str(tmp_path / "stages" / "probe.py"), "p.json", "pool"], str(tmp_path / "work"), {})
    assert _wait(server, pid, timeout=120)[0] == 0
    assert time.monotonic() - start < 30


def test_a_runner_done_before_the_preloading_is_no_traceback(server, tmp_path):
    server.close()  # at once: the preloaded process is still importing
    assert server.proc.wait(60) == 0
    assert "Traceback" not in (tmp_path / "stderr").read_text()
