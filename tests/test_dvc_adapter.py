"""One adapter for DVC's internals (issue 25, item 3): only ``stagerun.dvc_adapter`` imports DVC,
and its run-cache restore — the one the parallel runner and the shards share — restores a stage
whose inputs match a cached run and reports a miss with the stage's outputs removed."""

from __future__ import annotations

import ast
import contextlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "priorlab"
ADAPTER = SRC / "stagerun" / "dvc_adapter.py"


def dvc_imports(path: Path) -> list[str]:
    """``line: module`` of every import of ``dvc`` (or a submodule) in ``path``, at any depth."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names = [node.module or ""]
        else:
            continue
        found += [f"{node.lineno}: {n}" for n in names if n == "dvc" or n.startswith("dvc.")]
    return found


def test_only_the_adapter_imports_dvc():
    offenders = {str(p.relative_to(SRC)): dvc_imports(p) for p in sorted(SRC.rglob("*.py")) if p != ADAPTER}
    offenders = {p: found for p, found in offenders.items() if found}
    assert not offenders, f"import DVC through stagerun.dvc_adapter only: {offenders}"
    assert dvc_imports(ADAPTER)  # the walker sees function-level imports
    assert not dvc_imports(PACKAGE / "train" / "trainer.py")  # dvclive is not dvc


def _dvc(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dvc", *args], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, "DVC_NO_ANALYTICS": "1"})


def test_restore_from_the_run_cache_says_whether_it_restored(tmp_path, monkeypatch):
    from stagerun import dvc_adapter

    if shutil.which("git") is None:
        pytest.skip("git is required by DVC")
    monkeypatch.chdir(tmp_path)  # DVC names stages relative to the working directory
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    assert _dvc(tmp_path, "init", "-q").returncode == 0
    (tmp_path / "dvc.yaml").write_text(yaml.safe_dump({"stages": {
        "p": {"cmd": "echo ${x} > p.txt", "params": ["x"], "outs": ["p.txt"]},
        "q": {"cmd": "cat p.txt p.txt > q.txt", "deps": ["p.txt"], "outs": ["q.txt"]}}}))
    for x in (1, 2):  # two runs of p (and q) in the run-cache; dvc.lock holds x=2's
        (tmp_path / "params.yaml").write_text(f"x: {x}\n")
        assert _dvc(tmp_path, "repro").returncode == 0, _dvc(tmp_path, "repro").stderr

    def restore_all(target: str = "q") -> dict[str, bool | None]:
        """Each stage up to ``target`` -> restored (True), not in the run-cache (False), up to date (None)."""
        with dvc_adapter.open_repo(tmp_path) as repo:
            stages = dvc_adapter.select(repo, [target])
            upstream = dvc_adapter.upstream(repo, stages)
            got = {s.addressing: dvc_adapter.restore(repo, s) if dvc_adapter.changed(s, upstream[s]) else None
                   for s in stages}
            dvc_adapter.write_lock([s for s in stages if got[s.addressing]])
        return got

    (tmp_path / "params.yaml").write_text("x: 1\n")
    assert restore_all() == {"p": True, "q": True}
    assert (tmp_path / "q.txt").read_text() == "1\n1\n"
    assert "up to date" in _dvc(tmp_path, "status").stdout  # saved, committed and in dvc.lock
    assert restore_all() == {"p": None, "q": None}
    (tmp_path / "params.yaml").write_text("x: 3\n")  # no such run: p's output goes, as `dvc repro` removes it
    assert restore_all("p") == {"p": False} and not (tmp_path / "p.txt").exists()
    with dvc_adapter.open_repo(tmp_path, lock=False) as repo:
        with pytest.raises(dvc_adapter.UnknownStageError, match="unknown stage 'nope'"):
            dvc_adapter.select(repo, ["nope"])
        assert [s.addressing for s in dvc_adapter.select(repo, None)] == ["p", "q"]
        # q's dependency p.txt is gone (p missed above): no restore, nothing removed, no DVC traceback
        (q,) = [s for s in dvc_adapter.select(repo, ["q"]) if s.addressing == "q"]
        assert dvc_adapter.restore(repo, q) is False and (tmp_path / "q.txt").read_text() == "1\n1\n"


@pytest.mark.parametrize("content, cleared", [("", True), ('{"read": {}, "wri', True), ('{"read": {}, "write": {}}', False)])
def test_a_torn_rwlock_left_by_a_killed_run_is_removed_under_the_repository_lock(tmp_path, content, cleared):
    """A run killed mid-write leaves DVC's rwlock file cut short; the next run removes it (no manual step)
    and DVC can lock stages again, while a whole one is left alone."""
    from stagerun import dvc_adapter

    if shutil.which("git") is None:
        pytest.skip("git is required by DVC")
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    assert _dvc(tmp_path, "init", "-q").returncode == 0
    rwlock = tmp_path / ".dvc" / "tmp" / "rwlock"
    rwlock.parent.mkdir(parents=True, exist_ok=True)
    rwlock.write_text(content)
    with dvc_adapter.open_repo(tmp_path):
        assert rwlock.exists() != cleared
    (tmp_path / "dvc.yaml").write_text(yaml.safe_dump({"stages": {"p": {"cmd": "echo 1 > p.txt", "outs": ["p.txt"]}}}))
    assert _dvc(tmp_path, "repro").returncode == 0  # DVC reads and rewrites the rwlock here


def test_the_runner_skips_dvcs_path_lock_only_as_its_sole_user(tmp_path, monkeypatch):
    """Issue 44 (the no-op's cost): under the repository lock the runner skips DVC's per-path lock
    (two file rewrites per take, three takes per staleness check) and gets DVC's answers; a live
    process's entry in that lock (a plain ``dvc repro`` running a stage) keeps DVC's lock in force."""
    import dvc.rwlock

    from stagerun import dvc_adapter

    if shutil.which("git") is None:
        pytest.skip("git is required by DVC")
    monkeypatch.chdir(tmp_path)
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    assert _dvc(tmp_path, "init", "-q").returncode == 0
    (tmp_path / "dvc.yaml").write_text(yaml.safe_dump({"stages": {
        "p": {"cmd": "echo ${x} > p.txt", "params": ["x"], "outs": ["p.txt"]},
        "q": {"cmd": "cat p.txt p.txt > q.txt", "deps": ["p.txt"], "outs": ["q.txt"]}}}))
    (tmp_path / "params.yaml").write_text("x: 1\n")
    assert _dvc(tmp_path, "repro").returncode == 0
    rwlock = tmp_path / ".dvc" / "tmp" / "rwlock"
    original = dvc.rwlock.rwlock

    def staleness(skip: bool) -> tuple[dict, bool, bool]:
        """Each stage -> changed, whether the path lock was skipped, whether its file was rewritten."""
        rwlock.write_text('{"read": {}, "write": {}}')
        before = rwlock.stat().st_mtime_ns
        os.utime(rwlock, ns=(before - 10**9, before - 10**9))  # a rewrite now moves the mtime
        with dvc_adapter.open_repo(tmp_path) as repo:
            with dvc_adapter.sole_path_locker(repo) if skip else contextlib.nullcontext(False) as skipped:
                stages = dvc_adapter.select(repo, None)
                up = dvc_adapter.upstream(repo, stages)
                got = {s.addressing: dvc_adapter.changed(s, up[s]) for s in stages}
            assert dvc.rwlock.rwlock is original  # DVC's own lock is back after the block
        return got, skipped, rwlock.stat().st_mtime_ns != before - 10**9

    assert staleness(skip=False) == ({"p": False, "q": False}, False, True)  # DVC rewrote its lock file
    assert staleness(skip=True) == ({"p": False, "q": False}, True, False)   # the same answers, no rewrite
    (tmp_path / "params.yaml").write_text("x: 2\n")
    assert staleness(skip=True)[0] == staleness(skip=False)[0] == {"p": True, "q": False}

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    held = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        for pid, skips in ((dead.pid, True), (held.pid, False)):
            rwlock.write_text(json.dumps({"read": {}, "write": {str(tmp_path / "q.txt"): {"pid": pid, "cmd": "dvc repro"}}}))
            with dvc_adapter.open_repo(tmp_path) as repo:
                assert dvc_adapter.foreign_path_locks(repo) == ([] if skips else [pid])
                with dvc_adapter.sole_path_locker(repo) as skipped:
                    assert skipped is skips
                    (q,) = [s for s in dvc_adapter.select(repo, ["q"]) if s.addressing == "q"]
                    if skips:
                        dvc_adapter.changed(q, [])
                    else:  # q's output is being written by that process: DVC refuses, as without the runner
                        with pytest.raises(Exception, match="q.txt"):
                            dvc_adapter.changed(q, [])
    finally:
        held.kill()
        held.wait()


def _entry(name: str, md5: str, path: str) -> dict:
    return {name: {"cmd": f"python stages/x.py --run {name}", "deps": [{"path": path, "hash": "md5", "md5": md5,
                                                                          "size": 12}],
                   "params": {"params.yaml": {"train": {"lr": 0.001, "steps": 40}}},
                   "outs": [{"path": f"models/train/{name}", "hash": "md5", "md5": md5 + ".dir", "size": 3,
                             "nfiles": 1}]}}


def test_the_lock_splice_writes_the_bytes_of_dvcs_own_dump():
    """The runner's lock write (splice_lock: each entry dumped alone, put in place or appended) gives
    the file DVC's whole-file round trip gives (Lockfile.dump_stages: parse, update, dump), long wrapped
    paths included."""
    import io

    from dvc.utils.serialize._yaml import _dump, parse_yaml_for_update

    from stagerun.dvc_adapter import splice_lock

    long = "models/prior_init/fmnist60_vsc_a001_r1/fmnist60_vsc_a001_r1-vsc_a001-1-a-long-enough-path-to-wrap"
    stages = {}
    for i, name in enumerate(["data@a", "train@b-1", "evaluate@c.0"]):
        stages.update(_entry(name, f"{i:032x}", long if i == 1 else "data/a"))

    def dvc_dump(data) -> str:
        stream = io.StringIO()
        _dump(data, stream)
        return stream.getvalue()

    text = dvc_dump({"schema": "2.0", "stages": stages})
    updates = [_entry("train@b-1", "f" * 32, long + "/x"), _entry("new@d", "e" * 32, long)]
    expected = parse_yaml_for_update(text, "dvc.lock")  # what Lockfile.dump_stages does
    for u in updates:
        expected["stages"].update(u)
    assert splice_lock(text, updates) == dvc_dump(expected)
    assert splice_lock(text, [_entry("data@a", f"{0:032x}", "data/a")]) == text  # an unchanged entry: same bytes
    assert splice_lock("stages: {}\n", updates) is None  # not DVC's layout: DVC's own dump does it
    shared = [3, 8]  # a list a YAML merge key shares between two models: DVC anchors it, the splice writes it out
    entry = _entry("train@b-1", "f" * 32, "data/a")
    entry["train@b-1"]["params"]["params.yaml"]["models"] = {"m": {"k": shared}, "m_long": {"k": shared}}
    spliced = splice_lock(text, [entry])
    assert "&id" not in spliced and yaml.safe_load(spliced)["stages"]["train@b-1"] == json.loads(json.dumps(entry["train@b-1"]))
    # another entry aliasing an anchor of a replaced one (PyYAML's dump of a shared list): only DVC's whole dump
    shared_text = yaml.safe_dump({"schema": "2.0", "stages": {"a": {"outs": shared}, "b": {"outs": shared}}}, sort_keys=False)
    assert "*id001" in shared_text and splice_lock(shared_text, [{"a": {"outs": [1]}}]) is None
    assert yaml.safe_load(splice_lock(shared_text, [{"b": {"outs": [1]}}]))["stages"] == {"a": {"outs": [3, 8]}, "b": {"outs": [1]}}
