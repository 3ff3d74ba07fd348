"""Checksum-verified downloads and the local data-set cache folder.

``fetch`` streams a URL (``http(s)://`` or ``file://``, via ``urllib``) into a
temporary file next to the destination, hashes it on the way, and renames it
into place only when the SHA-256 matches: the destination never holds a
partial or unverified file.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

from priorlab.io import sha256_file, umask_mode

_CHUNK = 1 << 20
_HEX64 = re.compile(r"[0-9a-f]{64}")


class DownloadError(OSError):
    """A download failed (unreachable URL, I/O error); the message names the URL, file and fix."""


def _check_hex(expected: str) -> str:
    expected = expected.strip().lower()
    if not _HEX64.fullmatch(expected):
        raise ValueError(f"expected sha256 must be 64 hex digits, got {expected!r}")
    return expected


def verify_sha256(path: str | os.PathLike, expected: str) -> str:
    """Raise ``ValueError`` unless the file's SHA-256 is ``expected``; return the digest."""
    expected = _check_hex(expected)
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file to verify")
    got = sha256_file(path)
    if got != expected:
        raise ValueError(
            f"{path}: sha256 mismatch: expected {expected}, got {got}. The file is corrupt, "
            "truncated or a different version: delete it and fetch it again from the official source"
        )
    return got


def fetch(url: str, dest: str | os.PathLike, sha256: str, timeout: float = 60.0) -> Path:
    """Download ``url`` to ``dest`` and verify its SHA-256; atomic (temp file + rename).

    An existing ``dest`` with the right checksum is kept without downloading.
    On a checksum mismatch the temporary file is removed and ``ValueError`` is
    raised; an unreachable URL raises ``DownloadError``.  In both cases ``dest``
    is left as it was.
    """
    expected = _check_hex(sha256)
    if timeout <= 0:
        raise ValueError(f"timeout must be positive, got {timeout}")
    dest = Path(dest)
    if dest.is_file() and sha256_file(dest) == expected:
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".part")
    tmp = Path(tmp_name)
    try:
        digest = hashlib.sha256()
        with os.fdopen(fd, "wb") as out:
            try:
                with urllib.request.urlopen(url, timeout=timeout) as response:
                    for chunk in iter(lambda: response.read(_CHUNK), b""):
                        digest.update(chunk)
                        out.write(chunk)
            except (urllib.error.URLError, OSError, ValueError) as exc:
                raise DownloadError(
                    f"could not download {url} to {dest}: {exc}. Check the URL and the network, "
                    f"or fetch the file by other means and place it at {dest} "
                    f"(expected sha256 {expected})"
                ) from exc
        got = digest.hexdigest()
        if got != expected:
            raise ValueError(
                f"{url}: sha256 mismatch for {dest.name}: expected {expected}, got {got}; "
                f"nothing was written to {dest}. The source serves a different or corrupt file"
            )
        os.chmod(tmp, umask_mode())
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)
    return dest


def datasets_cache_dirs() -> list[Path]:
    """Candidate ``.datasets/`` folders: under the working directory and the source checkout root.

    The source checkout root is where ``pyproject.toml`` sits three levels
    above this package (``src/priorlab/data``); it is absent for an installed wheel.
    """
    candidates = [Path.cwd() / ".datasets"]
    root = Path(__file__).resolve().parents[3]
    if (root / "pyproject.toml").is_file():
        candidates.append(root / ".datasets")
    unique: list[Path] = []
    for c in candidates:
        if c.resolve() not in {u.resolve() for u in unique}:
            unique.append(c)
    return unique
