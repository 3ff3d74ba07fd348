"""Atomic output writing, the array-file manifest and the digest of a source folder.

Every output is written to a temporary file in the destination directory and
renamed into place, so a killed stage never leaves a half-written file.
"""

from __future__ import annotations

import contextlib
import fnmatch
import glob
import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from priorlab.errors import DataError


def umask_mode() -> int:
    """The mode a plain ``open(path, "w")`` gives a new file: 0o666 less the process's umask (``mkstemp``
    makes 0o600 files, which the rest of a lab group could not read)."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


@contextlib.contextmanager
def atomic_path(path: str | Path, suffix: str = "") -> Iterator[Path]:
    """Yield a temporary path next to ``path`` (mode: the umask's, as a plain write would give);
    rename it onto ``path`` on success."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix or ".tmp", dir=path.parent)
    os.fchmod(fd, umask_mode())
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.replace(tmp_path, path)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


def remove_temporaries(path: str | Path) -> list[Path]:
    """Remove the temporaries :func:`atomic_path` left beside ``path`` (``.<name>.<random><suffix>``)
    when a signal killed its writer before it could clean up; only where no other process is writing
    ``path`` (a stage's own checkpoint).  Returns what it removed."""
    path = Path(path)
    gone = sorted(path.parent.glob(f".{glob.escape(path.name)}.*")) if path.parent.is_dir() else []
    for p in gone:
        p.unlink(missing_ok=True)
    return gone


def write_bytes_atomic(path: str | Path, data: bytes, mode: int | None = None) -> Path:
    """Write ``data`` to ``path`` through a temporary file and an atomic rename (file mode ``mode``,
    default the umask's)."""
    with atomic_path(path, suffix=".part") as tmp:
        tmp.write_bytes(data)
        if mode is not None:
            os.chmod(tmp, mode)
    return Path(path)


def write_json(path: str | Path, obj: Any) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(obj, indent=2, sort_keys=True, default=_json_default) + "\n")


def write_json_folder(folder: str | Path, files: dict[str, Any]) -> Path:
    """Replace ``folder`` by one JSON file ``<name>.json`` per entry of ``files`` (written into a
    sibling temporary folder, then renamed: no stale file of an earlier grid survives, and a killed
    stage leaves the old folder whole)."""
    folder = Path(folder)
    tmp = folder.with_name(f".{folder.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for name, obj in files.items():
        write_json(tmp / f"{name}.json", obj)
    shutil.rmtree(folder, ignore_errors=True)
    tmp.replace(folder)
    return folder


def read_json(path: str | Path) -> Any:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: file not found")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}: corrupt JSON ({exc.msg} at line {exc.lineno})") from exc


def as_read_back(obj: Any) -> Any:
    """``obj`` as :func:`write_json` writes it and :func:`read_json` reads it back (tuples become lists,
    NumPy scalars numbers): what a recorded file is compared with."""
    return json.loads(json.dumps(obj, sort_keys=True, default=_json_default))


def _json_default(obj):
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def write_npz(path: str | Path, **arrays: np.ndarray) -> None:
    """Write compressed arrays atomically (``np.savez_compressed``)."""
    with atomic_path(path, suffix=".npz") as tmp:
        np.savez_compressed(tmp, **arrays)


def pack_flags(flags) -> str:
    """0/1 flags (e.g. which test points a classifier got right) as a compact JSON string: the hex of
    their bits, most significant first (:func:`unpack_flags` inverts it given the count)."""
    return np.packbits(np.asarray(flags, bool)).tobytes().hex()


def unpack_flags(text: str, n: int) -> np.ndarray:
    """The ``n`` 0/1 flags of a :func:`pack_flags` string (``uint8``)."""
    bits = np.unpackbits(np.frombuffer(bytes.fromhex(text), np.uint8))
    if len(bits) < n or len(bits) - n >= 8:
        raise DataError(f"a packed flag string of {len(bits)} bits cannot hold {n} flags")
    return bits[:n]


def read_npz(path: str | Path) -> dict[str, np.ndarray]:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: array file not found (run `dvc repro` to build it)")
    try:
        with np.load(path, allow_pickle=False) as f:
            return {k: f[k] for k in f.files}
    except Exception as exc:  # zipfile.BadZipFile, ValueError, EOFError, ...
        raise DataError(f"{path}: corrupt array file ({exc}); delete it and rerun `dvc repro`") from exc


def sha256_file(path: str | Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


DIGEST_SKIPPED = ("__pycache__", "*.pyc", "*.egg-info")
"""Names :func:`tree_digest` leaves out (a folder's name: all below it), as ``.dvcignore`` keeps them out of
DVC's hash of a folder (``tests/test_stage_deps.py`` checks that the two list the same files)."""


def tree_digest(root: str | Path) -> dict[str, str]:
    """The sha256 of every file under ``root``, by its POSIX path relative to ``root``, in sorted order,
    without what :data:`DIGEST_SKIPPED` names: it changes exactly when DVC's hash of the folder does."""
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"{root}: folder not found")

    def skipped(name: str) -> bool:
        return any(fnmatch.fnmatchcase(name, pattern) for pattern in DIGEST_SKIPPED)

    digest = {}
    for folder, subfolders, files in os.walk(root):
        subfolders[:] = [d for d in subfolders if not skipped(d)]
        for name in files:
            if not skipped(name):
                path = Path(folder) / name
                digest[path.relative_to(root).as_posix()] = sha256_file(path)
    return dict(sorted(digest.items()))


def array_manifest(arrays: dict[str, np.ndarray]) -> dict[str, dict[str, Any]]:
    """Shapes and dtypes of a set of arrays, for the data manifest."""
    return {k: {"shape": list(v.shape), "dtype": str(v.dtype)} for k, v in arrays.items()}


def save_torch(path: str | Path, obj: Any) -> None:
    """``torch.save`` atomically, byte-reproducibly (serialised in memory: torch names the
    archive's inner folder after the file, which would embed the random temp name)."""
    import io

    import torch

    buffer = io.BytesIO()
    torch.save(obj, buffer)
    with atomic_path(path, suffix=".pt") as tmp:
        tmp.write_bytes(buffer.getvalue())


def load_torch(path: str | Path) -> Any:
    import torch

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: checkpoint not found")
    try:
        return torch.load(path, map_location="cpu", weights_only=False)
    except Exception as exc:
        raise DataError(f"{path}: corrupt checkpoint ({exc})") from exc


def save_figure(path: str | Path, fig) -> None:
    """Save a matplotlib figure as PNG atomically and close it."""
    import matplotlib.pyplot as plt

    with atomic_path(path, suffix=".png") as tmp:
        fig.savefig(tmp, format="png", dpi=110, bbox_inches="tight", metadata={"Software": None})
    plt.close(fig)
