"""The one place the library touches DVC's internals (issue 25): :mod:`stagerun.repro` and
:mod:`stagerun.shard` import DVC only through these functions.

Tested with DVC 3.67 (:data:`TESTED_DVC`; ``requirements.txt`` pins dvc==3.67.1).  None of this is
DVC's public API; what it relies on:

* ``dvc.repo.Repo`` and ``dvc.repo.lock_repo`` — a project and its repository lock;
* ``repo.index.stages`` and ``repo.index.graph`` — the stages and their graph, whose edges point
  upstream (from a stage to the stages it depends on);
* ``Stage.frozen``, ``Stage.changed(upstream=...)``, ``Stage.remove_outs``, ``Stage.save(run_cache=...)``,
  ``Stage.commit``, and ``Output.use_cache/is_metric/is_plot`` (DVC's rule for a run-cache entry);
* ``repo.stage_cache``: ``restore`` (``dvc.stage.cache.RunCacheNotFoundError``), ``cache_dir`` (the
  layout ``runs/<key[:2]>/<key>/<value>``), the private ``_load_cache``, ``get_used_objs``,
  ``push`` and ``pull``;
* ``repo.cloud.push/pull(objs, jobs=, remote=, odb=)`` and ``repo.config`` (``core.remote``, ``remote``);
* ``dvc.config.Config(dvc_dir=...)`` and its ``edit("local")``, to copy remotes into a worktree;
* ``ProjectFile.dump_stages(stages, update_pipeline=False)`` (``stage.dvcfile``), for ``dvc.lock``;
* ``dvc.dependency.param.read_param_file`` / ``load_path`` and ``dvc.fs.LocalFileSystem``, which
  :func:`parse_params_once` swaps for a caching reader;
* ``dvc.rwlock.rwlock`` (looked up by ``dvc.stage.decorators.rwlocked`` at each call), the layout of
  ``repo.tmp_dir``'s ``rwlock`` file and ``repo.lock.is_locked``, which :func:`sole_path_locker` reads and swaps.

Every function here refuses an untested DVC (:func:`require_tested_dvc`) before it touches DVC.
Stages and the project are DVC's own objects; callers read only a stage's ``addressing``, ``cmd``
and ``wdir`` and the project's ``root_dir`` off them.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from pathlib import Path
from typing import Iterator, Sequence

from priorlab.errors import UserError
from stagerun.prefork import process_alive

TESTED_DVC = (3, 67)
"""The DVC release (major, minor) whose internals :mod:`stagerun.repro` and :mod:`stagerun.shard`
drive through this module (see the module docstring) — not a public API."""


class UnknownStageError(UserError):
    """A target that names no stage (with a command) of the project."""

    def __init__(self, stage: str):
        super().__init__(f"unknown stage {stage!r} (see `dvc stage list`)")
        self.stage = stage


def require_tested_dvc(version: str | None = None) -> None:
    """Refuse, with one line, a DVC other than :data:`TESTED_DVC` (``version``: the installed one)."""
    if version is None:
        from importlib.metadata import version as installed

        version = installed("dvc")
    try:
        found = tuple(int(p) for p in version.split(".")[:2])
    except ValueError:
        found = ()
    if found != TESTED_DVC:
        tested = ".".join(map(str, TESTED_DVC))
        raise UserError(f"the parallel runner drives DVC internals tested with dvc {tested}.x, found dvc {version}: "
                        f"install the pinned one (pip install -r requirements.txt) or run plain `dvc repro`")


def user_situation(exc: BaseException) -> str | None:
    """One line for a DVC exception that is a user's situation, not a bug (None for any other):
    another DVC process holding the repository lock, or a checkout that would overwrite a file DVC
    has not cached."""
    from dvc.exceptions import ConfirmRemoveError
    from dvc.lock import LockError

    if isinstance(exc, LockError):
        return ("another DVC process (`make repro`, `dvc repro`, `dvc exp run`, ...) holds this project's lock "
                "(.dvc/tmp/lock): wait for it to end, or stop it, then run again")
    if isinstance(exc, ConfirmRemoveError):
        return (f"DVC will not overwrite a file it has not cached ({exc}): a stage of an interrupted run wrote it; "
                "delete that file (or `dvc checkout --force <stage>`), then run again")
    return None


# --------------------------------------------------------------------------- the project and its stages


@contextlib.contextmanager
def open_repo(root: str | Path, lock: bool = True) -> Iterator:
    """DVC's project at ``root`` for the block, holding its repository lock (``lock``); closed after."""
    require_tested_dvc()
    from dvc.repo import Repo, lock_repo

    with Repo(str(root)) as repo:
        with lock_repo(repo) if lock else contextlib.nullcontext():
            if lock:
                clear_torn_rwlock(repo)
            yield repo


def clear_torn_rwlock(repo) -> bool:
    """Remove DVC's ``.dvc/tmp/rwlock`` when it is not readable JSON; True when it did.  DVC rewrites that
    file whole each time it locks a stage's dependencies and outputs, so a process killed mid-write
    (``kill -9`` of a run) leaves it empty, and every later DVC command then stops with
    ``RWLockFileCorruptedError`` until someone deletes it.  Called with the repository lock held: no
    DVC process is using the file, so an unreadable one holds no lock of anyone's."""
    import json

    path = Path(repo.tmp_dir) / "rwlock"
    try:
        json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return False
    except (ValueError, UnicodeDecodeError):
        path.unlink(missing_ok=True)
        return True
    return False


def foreign_path_locks(repo) -> list[int]:
    """The live processes, other than this one, holding an entry in DVC's per-path lock file
    (``.dvc/tmp/rwlock``: the deps and outputs of a stage a DVC process is checking or running)."""
    try:
        held = json.loads((Path(repo.tmp_dir) / "rwlock").read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError, UnicodeDecodeError):
        return []  # none yet, or torn (clear_torn_rwlock removes it under the repository lock)
    infos = [*held.get("write", {}).values(), *(i for lst in held.get("read", {}).values() for i in lst)]
    pids = {info.get("pid") for info in infos if isinstance(info, dict)}
    return sorted(pid for pid in pids if isinstance(pid, int) and pid != os.getpid() and process_alive(pid))


@contextlib.contextmanager
def sole_path_locker(repo) -> Iterator[bool]:
    """Within this block, with ``repo``'s repository lock held, skip DVC's per-path lock when no other
    live process holds an entry in it; yields whether it is skipped (DVC's lock is back after the block).

    DVC takes that lock (``dvc.stage.decorators.rwlocked``) three times per ``Stage.changed`` (the
    stage, its deps, its outputs) and once per ``save``/``commit``, and each take rewrites two small
    files, the lock's JSON and its guard, twice (take and release): about 0.25 ms on an idle disk, 1.9 ms
    while training stages write (a truncation waits for the file system's journal), measured on a 2-core
    Intel Xeon VM (ext4).  Skipping it took the runner's no-op over the cpu profile's 336 stages from
    a median 4.7 s to 3.6 s there (4 interleaved runs each).  It guards nothing here: DVC takes it only while holding
    the repository lock (``rwlocked`` asserts so), which this runner holds for its whole run; the one
    process that can hold an entry without the repository lock is a plain ``dvc repro`` whose stage
    command is running (DVC lets the repository lock go then, keeping its stage's entries), and with
    such an entry present DVC's lock stays, so the runner still refuses to touch that stage's paths."""
    import dvc.rwlock

    assert repo.lock.is_locked, "hold the repository lock (open_repo) first"
    if foreign_path_locks(repo):
        yield False
        return

    @contextlib.contextmanager
    def no_path_lock(tmp_dir, fs, cmd, read, write, hardlink):
        yield

    original = dvc.rwlock.rwlock
    dvc.rwlock.rwlock = no_path_lock
    try:
        yield True
    finally:
        dvc.rwlock.rwlock = original


def command_stages(repo) -> list:
    """The stages of ``repo`` that have a command, in DVC's order."""
    return [s for s in repo.index.stages if s.cmd]


def upstream(repo, stages) -> dict:
    """Each of ``stages`` -> the stages it depends on directly, from one reading of DVC's graph (its
    edges point upstream)."""
    graph = repo.index.graph
    return {s: set(graph.successors(s)) for s in stages}


def select(repo, targets: Sequence[str] | None) -> list:
    """The stages of ``targets`` and everything upstream of them, upstream first, as ``dvc repro
    TARGETS`` takes them (every stage with a command without targets); a target must name a stage
    with a command (:class:`UnknownStageError`)."""
    import networkx as nx

    stages = command_stages(repo)
    graph = repo.index.graph
    if not targets:
        chosen = set(stages)
    else:
        by_name = {s.addressing: s for s in stages}
        unknown = [t for t in targets if t not in by_name]
        if unknown:
            raise UnknownStageError(unknown[0])
        chosen = set()
        for t in targets:
            chosen |= {by_name[t]} | nx.descendants(graph, by_name[t])  # edges point upstream in DVC's graph
    return list(reversed(list(nx.topological_sort(graph.subgraph(chosen)))))


def changed(stage, upstream_stages) -> bool:
    """Whether ``dvc repro`` would reproduce ``stage`` now that ``upstream_stages`` are done: not frozen
    and changed (``Stage.changed``: its command, deps, params or outs differ from ``dvc.lock``)."""
    return not stage.frozen and stage.changed(upstream=list(upstream_stages))


def restore(repo, stage) -> bool:
    """Bring a changed ``stage`` up to date from the run-cache as ``dvc repro`` tries first; whether it did.

    As ``Stage.run``, the outputs go first, persistent ones kept (a checkout from the run-cache refuses
    to overwrite files it has not cached, e.g. a git-tracked metrics file: ``ConfirmRemoveError``), so
    when no run with these inputs is cached they are gone and the stage's command is to run.  A
    restored stage is saved and committed; its ``dvc.lock`` entry is for :func:`write_lock`.  A stage
    with a missing dependency is not restored (nothing is removed): its command runs and says what is
    missing.
    """
    from dvc.stage.cache import RunCacheNotFoundError

    if not all(dep.exists for dep in stage.deps):
        return False  # DVC's run-cache lookup would raise on the missing path; the stage's own run reports it
    stage.remove_outs(ignore_remove=False, force=False)
    try:
        repo.stage_cache.restore(stage)
    except RunCacheNotFoundError:
        return False
    stage.save()
    stage.commit()
    return True


def put_back_recorded(stage) -> tuple[list[str], list[str]]:
    """After ``stage``'s command failed: put back, from the cache, the outputs ``dvc.lock``
    records for it, which were removed before it ran (:func:`restore`, as ``dvc repro`` does), so the
    workspace is what the lock says (the stage stays stale) rather than without them, e.g. a NaN-stopped
    training's last model and summary, not the ``{}`` it began.  Returns the outputs put back and those it
    cannot put back: uncached ones (metrics and curves kept in git: ``git checkout`` has them)."""
    from dvc.exceptions import DvcException

    back, not_back = [], []
    for out in stage.outs:
        if not (out.hash_info and out.hash_info.value):
            continue  # never recorded
        if not out.use_cache:
            not_back.append(str(out))
            continue
        try:
            out.checkout(force=True)  # over whatever the failed run left (a half-written summary)
        except DvcException:
            not_back.append(str(out))
        else:
            back.append(str(out))
    return back, not_back


class RecordError(UserError):
    """DVC could not record a stage whose command exited 0 (e.g. it did not write a declared output)."""


def save_run(stage) -> None:
    """Save and commit ``stage`` after its command exited 0, as ``Stage.run`` does: with a run-cache
    entry unless it has an uncached plain output (not a metric or plot).  A :class:`RecordError` when
    DVC cannot (a declared output missing, ...)."""
    from dvc.exceptions import DvcException

    no_cache_outs = any(not o.use_cache for o in stage.outs if not (o.is_metric or o.is_plot))
    try:
        stage.save(run_cache=not no_cache_outs)
        stage.commit()
    except DvcException as exc:
        raise RecordError(f"stage {stage.addressing} exited 0 but DVC cannot record it: {exc}") from exc


def keep_ignored(stage) -> None:
    """Git-ignore the cached outputs of an up-to-date ``stage`` that git does not ignore yet.  A failed
    ``dvc repro`` keeps the stages it finished in ``dvc.lock`` but takes back the ``.gitignore`` entries it
    added for them (DVC's ``scm_context`` undoes its ignores on an error): a ``git add -A`` afterwards
    would commit those outputs to git, and DVC then refuses to rerun them."""
    for out in stage.outs:
        if out.use_cache and out.use_scm_ignore:
            stage.repo.scm_context.ignore(out.fspath)


def write_lock(stages: Sequence) -> None:
    """Write the ``dvc.lock`` entries of the saved ``stages``: each entry dumped alone by DVC's own YAML
    writer and put in place of its old text (or appended): DVC's own dump (``Lockfile.dump_stages``,
    :func:`splice_lock` says where they differ) at the cost of the entries written.  DVC re-parses and re-dumps the whole
    file for every dump (about 2 x 4 s of one core for the cpu profile's 24,000 lines), which the runner
    did every 20 s while stages finished.  A missing or unexpected lock file is left to DVC's dump."""
    if not stages:
        return
    from dvc.stage import serialize

    path = Path(stages[0].dvcfile.path).with_suffix(".lock")  # DVC's: dvc.yaml -> dvc.lock
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    spliced = splice_lock(text, [serialize.to_lockfile(s) for s in stages])
    if spliced is None:
        stages[0].dvcfile.dump_stages(list(stages), update_pipeline=False)
        return
    if spliced != text:
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(spliced, encoding="utf-8")
        os.replace(tmp, path)
        stages[0].repo.scm_context.track_file(os.path.relpath(path, stages[0].repo.root_dir))


def _yaml_lines(data: dict) -> list[str]:
    """``data`` as DVC's YAML writer dumps it (``dvc.utils.serialize``), as lines with their ends."""
    import io

    from dvc.utils.serialize._yaml import _dump

    stream = io.StringIO()
    _dump(data, stream)
    return stream.getvalue().splitlines(keepends=True)


def splice_lock(text: str, entries: Sequence[dict]) -> str | None:
    """``text`` (a ``dvc.lock``) with each of ``entries`` (``{stage name: entry}``, as
    ``serialize.to_lockfile`` gives them) in place of that stage's block, or appended after the last
    block as DVC appends a new key; None when ``text`` is not the two-key file DVC writes.  The bytes
    are DVC's own dump's, but where an entry holds one object twice (a list a YAML merge key shares
    between two models): DVC writes it as an anchor and an alias numbered across the whole file, this
    writes the value out twice (the same data to any YAML reader).  When another entry refers to an
    anchor that a replaced entry defines (a file another writer made), it returns None as well."""
    lines = text.splitlines(keepends=True)
    header = ["schema: '2.0'\n", "stages:\n"]
    if lines[:2] != header:
        return None
    keys: list[str] = []
    blocks: dict[str, list[str]] = {}
    for line in lines[2:]:
        if line.startswith("  ") and not line.startswith("   "):
            keys.append(line)
            blocks[line] = [line]
        elif keys and line.startswith("   "):
            blocks[keys[-1]].append(line)
        else:
            return None  # anything else: not a file this splice understands
    new = []
    for entry in entries:
        entry = json.loads(json.dumps(entry))  # values the entry repeats (merged params) written out, not as anchors
        dumped = _yaml_lines({"schema": "2.0", "stages": entry})
        if dumped[:2] != header:
            return None
        new.append(dumped[2:])
    replaced = {block[0] for block in new}
    defined = {a for key in replaced & set(blocks) for a in _ANCHOR.findall("".join(blocks[key]))}
    if defined & {a for key in keys if key not in replaced for a in _ALIAS.findall("".join(blocks[key]))}:
        return None  # another entry refers to an anchor a replaced one defines: only a whole dump keeps both
    for block in new:
        if block[0] not in blocks:
            keys.append(block[0])
        blocks[block[0]] = block
    return "".join(header + [line for key in keys for line in blocks[key]])


_ANCHOR = re.compile(r"&([^\s,\[\]{}]+)")
_ALIAS = re.compile(r"\*([^\s,\[\]{}]+)")
"""YAML anchors and aliases (a ``*`` or ``&`` inside a plain string may match too: then DVC's own dump runs)."""


def prune_lock(repo) -> list[str]:
    """Drop the ``dvc.lock`` entries of stages the pipeline no longer has (a renamed run, a removed
    ``foreach`` item): DVC keeps them forever; returns their names.  Edited through DVC's own YAML
    round trip, so the rest of the file stays byte for byte as DVC wrote it."""
    from dvc.utils.serialize import modify_yaml

    lock = Path(repo.root_dir) / "dvc.lock"
    if not lock.is_file():
        return []
    names = {s.addressing for s in repo.index.stages}
    with modify_yaml(str(lock)) as data:
        gone = [name for name in data.get("stages", {}) if name not in names]
        for name in gone:
            del data["stages"][name]
    return gone


# --------------------------------------------------------------------------- remotes and the run-cache


def default_remote(repo) -> str | None:
    """The name of the project's default remote (``core.remote``), if any."""
    return repo.config["core"].get("remote")


def has_remote(repo, name: str) -> bool:
    """Whether a remote ``name`` is configured."""
    return name in repo.config.get("remote", {})


def copy_remotes(src_root: str | Path, dst_root: str | Path) -> str | None:
    """Give the project at ``dst_root`` (a worktree of the same repository) the remotes of ``src_root``
    and its default remote, in ``dst_root``'s local config; returns the default's name.  Uses
    ``dvc.config.Config``, whose load makes a relative path (a local-directory remote, a key file)
    absolute and whose save writes it relative to the new config's folder: the same place."""
    require_tested_dvc()
    from dvc.config import Config

    src = Config(dvc_dir=str(Path(src_root) / ".dvc"))
    remotes = {name: dict(opts) for name, opts in src.get("remote", {}).items()}
    default = src["core"].get("remote")
    with Config(dvc_dir=str(Path(dst_root) / ".dvc")).edit("local") as conf:
        conf["remote"] = remotes
        if default:
            conf["core"]["remote"] = default
    return default


def run_cache_entries(repo) -> list[tuple[str, str]]:
    """``(key, value)`` of every run-cache entry in the local cache."""
    root = Path(repo.stage_cache.cache_dir)
    return sorted((p.parent.name, p.name) for p in root.glob("*/*/*") if p.is_file()) if root.is_dir() else []


def entry_cmd(repo, key: str, value: str) -> str | None:
    """The command of the run-cache entry ``(key, value)`` (None for an unreadable one)."""
    entry = repo.stage_cache._load_cache(key, value)
    return entry.get("cmd") if entry else None


def push_entries(repo, remote: str) -> None:
    """Push the local run-cache entries (not the objects they name: :func:`transfer_objects`)."""
    repo.stage_cache.push(remote)


def pull_entries(repo, remote: str) -> None:
    """Pull the remote's run-cache entries (not the objects they name: :func:`transfer_objects`)."""
    repo.stage_cache.pull(remote)


def transfer_objects(repo, entries, remote: str, jobs: int | None, direction: str) -> tuple[int, int]:
    """Push or pull (``direction``) the objects that the run-cache ``entries`` name, cached and
    git-tracked outputs alike; returns (transferred, failed)."""
    used = repo.stage_cache.get_used_objs(entries, remote=remote, force=True, jobs=jobs)
    moved = failed = 0
    for odb, objs in used.items():
        if not objs:
            continue
        call = repo.cloud.push if direction == "push" else repo.cloud.pull
        result = call(objs, jobs=jobs, remote=remote, odb=odb)
        moved += len(result.transferred)
        failed += len(result.failed)
    return moved, failed


# --------------------------------------------------------------------------- params: parse once


_GLOB = frozenset("*?[]")


def lookup(config, key_path: str):
    """``config[k1][k2]...`` for the dotted ``key_path`` (list items by index), as ``dpath.get`` finds
    it; ``KeyError`` when absent.  Callers send glob patterns to dpath itself."""
    node = config
    for part in key_path.split("."):
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise KeyError(key_path)
    return node


@contextlib.contextmanager
def parse_params_once():
    """Within this block, DVC parses each params file once per version (path, mtime, size).

    ``Stage.changed`` re-reads and re-parses ``params.yaml`` for every stage that depends on it
    (``dvc.dependency.param.read_param_file``) and then walks the whole parsed tree once per
    parameter (``dpath.get``): about 20 ms a stage, 2 s of a no-op over the cpu profile's 103
    stages.  This swaps in a version of that function that keeps the parsed file while its stat is
    unchanged and looks dotted keys up directly, returning what DVC's returns.
    """
    require_tested_dvc()
    from copy import deepcopy

    import dpath
    import dvc.dependency.param as dvc_param
    from dvc.fs import LocalFileSystem

    original = dvc_param.read_param_file
    parsed: dict = {}

    def read_param_file(fs, path, key_paths=None, flatten=False, **load_kwargs):
        if not isinstance(fs, LocalFileSystem):  # e.g. a git revision's files: DVC's own reader
            return original(fs, path, key_paths, flatten, **load_kwargs)
        try:
            st = os.stat(path)
        except (OSError, TypeError):
            return original(fs, path, key_paths, flatten, **load_kwargs)
        stamp = (st.st_mtime_ns, st.st_size, tuple(sorted(load_kwargs.items())))
        if parsed.get(path, (None,))[0] != stamp:
            parsed[path] = (stamp, dvc_param.load_path(path, fs, **load_kwargs))
        config = parsed[path][1]
        if not key_paths:
            return deepcopy(config)
        if not flatten:  # DVC's nested form, from the kept parse
            nested: dict = {}
            for key_path in dict.fromkeys(key_paths):
                dpath.merge(nested, deepcopy(dpath.search(config, key_path, separator=".")), separator=".")
            return nested
        found = {}
        for key_path in key_paths:
            try:
                found[key_path] = deepcopy(get(config, key_path))  # DVC parses afresh: callers may keep it
            except KeyError:
                continue
        return found

    def get(config, key_path: str):
        if not _GLOB & set(key_path):
            try:
                return lookup(config, key_path)
            except KeyError:
                pass  # dpath may still read it (e.g. a non-string key)
        return dpath.get(config, key_path, separator=".")

    dvc_param.read_param_file = read_param_file
    try:
        yield
    finally:
        dvc_param.read_param_file = original
