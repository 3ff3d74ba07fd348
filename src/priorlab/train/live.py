"""The dvclive folder of a training phase, saved inside its checkpoint and put back on resume.

DVC deletes a stage's outputs before it runs the stage again, unless they are ``persist: true``; and
a stage with a persistent output is never saved to, nor restored from, DVC's run-cache (which is what
lets one machine reuse the runs another machine pushed, :mod:`stagerun.shard`).  So the curves are
plain outputs and the checkpoint carries them instead: :func:`snapshot` reads every file of the
folder when a checkpoint is written, :func:`restore` writes exactly those files back when training
resumes from it.  Rows logged after the checkpoint (work lost with a killed run) are thereby gone,
and a resumed run ends with the same files as an uninterrupted one.

A snapshot is a plain ``dict`` (``{"version": 1, "files": {posix path: bytes}}``), so it goes into
``torch.save`` with the rest of the checkpoint and loads with ``weights_only=True``.
"""

from __future__ import annotations

import shutil
from pathlib import Path, PurePosixPath

from priorlab.io import write_bytes_atomic

VERSION = 1


def snapshot(live_dir: str | Path) -> dict:
    """Every file under ``live_dir`` (its contents, by path relative to it); empty if it does not exist."""
    live_dir = Path(live_dir)
    files: dict[str, bytes] = {}
    if live_dir.is_dir():
        for path in sorted(live_dir.rglob("*")):
            if path.is_file() and not path.name.startswith("."):  # no temp files of an atomic write
                files[path.relative_to(live_dir).as_posix()] = path.read_bytes()
    return {"version": VERSION, "files": files}


def restore(live_dir: str | Path, snap: dict) -> None:
    """Make ``live_dir`` hold exactly the files of ``snap`` (what :func:`snapshot` returned)."""
    if not isinstance(snap, dict) or snap.get("version") != VERSION or not isinstance(snap.get("files"), dict):
        raise ValueError(f"not a dvclive snapshot of version {VERSION}: {type(snap).__name__}")
    live_dir = Path(live_dir)
    for name in snap["files"]:
        rel = PurePosixPath(name)
        if rel.is_absolute() or ".." in rel.parts or not rel.parts:
            raise ValueError(f"dvclive snapshot: unsafe path {name!r}")
    if live_dir.is_dir():
        shutil.rmtree(live_dir)
    elif live_dir.exists():
        live_dir.unlink()
    live_dir.mkdir(parents=True, exist_ok=True)
    for name, data in snap["files"].items():
        write_bytes_atomic(live_dir / PurePosixPath(name), data)
