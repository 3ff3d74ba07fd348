"""Fashion-MNIST (Xiao, Rasul & Vollgraf 2017): loader for the IDX files and their downloader.

Offline source: the Debian package ``dataset-fashion-mnist`` installs the four
``*-ubyte.gz`` files in ``/usr/share/datasets/fashion-mnist``.  Debian
recompressed them (gzip mtime 2020-06-05, no file name in the header), so the
``.gz`` files differ byte-wise from Zalando's, but their decompressed content
is the official one: its SHA-256 (``RAW_SHA256``) is what the loader checks,
whichever copy it reads.  Checksums recorded here:

- ``RAW_SHA256``: of the decompressed IDX files, computed from the Debian copy;
  the matching MD5s (e.g. train images ``f4a8712d...``) are the ones other
  projects list for the decompressed official files.
- ``OFFICIAL_GZ_MD5``: the ``.gz`` checksums Zalando publishes (README).
- ``OFFICIAL_GZ_SHA256``: SHA-256 of the official ``.gz`` files as listed by
  third-party checksum tables (two independent ones agree); not computable
  offline.  ``download`` verifies against these.
- ``DEBIAN_GZ_SHA256``: of the Debian package's recompressed ``.gz`` files
  (package version 0.0~git20200523.55506a9-1).

Usage: ``python -m priorlab.data.fashion_mnist download DIR`` or ``... check [DIR]``.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
from pathlib import Path

import numpy as np

from priorlab.data.download import datasets_cache_dirs, fetch
from priorlab.data.idx import parse_idx, read_idx_bytes

ENV_VAR = "PRIORLAB_FASHION_MNIST"
DEBIAN_DIR = Path("/usr/share/datasets/fashion-mnist")
CLASS_NAMES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
               "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot")

#: split key -> IDX file stem (the file on disk is ``<stem>.gz`` or ``<stem>``).
FILES = {
    "x_train": "train-images-idx3-ubyte",
    "y_train": "train-labels-idx1-ubyte",
    "x_test": "t10k-images-idx3-ubyte",
    "y_test": "t10k-labels-idx1-ubyte",
}
RAW_SHA256 = {
    "train-images-idx3-ubyte": "c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888",
    "train-labels-idx1-ubyte": "bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9",
    "t10k-images-idx3-ubyte": "5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b",
    "t10k-labels-idx1-ubyte": "0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34",
}
OFFICIAL_GZ_MD5 = {
    "train-images-idx3-ubyte": "8d4fb7e6c68d591d4c3dfef9ec88bf0d",
    "train-labels-idx1-ubyte": "25c81989df183df01b3e8a0aad5dffbe",
    "t10k-images-idx3-ubyte": "bef4ecab320f06d8554ea6380940ec79",
    "t10k-labels-idx1-ubyte": "bb300cfdad3c16e7a12a480ee83cd310",
}
OFFICIAL_GZ_SHA256 = {
    "train-images-idx3-ubyte": "08dc20ab1689590a0bcd66e874647b6ee8464e2d501b5a3f1f78831db19a3fdc",
    "train-labels-idx1-ubyte": "b0197879cbda89f3dc7b894f9fd52b858e68ea4182b6947c9d8c2b67e5f18dcc",
    "t10k-images-idx3-ubyte": "78dcbbfb5a27efaf1b6c1d616caca68560be8766c5bffcb2791df9273a534229",
    "t10k-labels-idx1-ubyte": "42bd18137a62d5998cdeae52bf3a0676ac6b706f5cf8439b47bb5b151ae3dccf",
}
DEBIAN_GZ_SHA256 = {
    "train-images-idx3-ubyte": "b0564c3eedabfbf835052cff8503ea422014ce006caf5b757f851416ee8300c7",
    "train-labels-idx1-ubyte": "0ae29f65d86684f32d1b9c85147786c547b9c6aebcaf235f0400a0cce308b056",
    "t10k-images-idx3-ubyte": "cc1d090a38ace84dfa1aa66e3ada7c336ef481a96936906477e6dd344da56eaa",
    "t10k-labels-idx1-ubyte": "8d3605d196f4be44669e46906da9733c8131fef761fdbfec72c424d5222f1a05",
}
#: Official mirrors, tried in order (Zalando's README links the S3 one).
BASE_URLS = (
    "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",
    "https://github.com/zalandoresearch/fashion-mnist/raw/master/data/fashion/",
)
SHAPES = {"x_train": (60000, 28, 28), "y_train": (60000,), "x_test": (10000, 28, 28), "y_test": (10000,)}


def _file_in(directory: Path, stem: str) -> Path | None:
    for name in (f"{stem}.gz", stem):
        if (directory / name).is_file():
            return directory / name
    return None


def _complete(directory: Path) -> bool:
    return all(_file_in(directory, stem) is not None for stem in FILES.values())


def candidate_dirs(root: str | os.PathLike | None = None) -> list[Path]:
    """Folders searched, in order: ``root``, ``$PRIORLAB_FASHION_MNIST``, the Debian path,
    then ``.datasets/fashion-mnist`` under the working directory / source checkout."""
    dirs: list[Path] = []
    if root is not None:
        dirs.append(Path(root))
    if os.environ.get(ENV_VAR):
        dirs.append(Path(os.environ[ENV_VAR]))
    dirs.append(DEBIAN_DIR)
    dirs.extend(d / "fashion-mnist" for d in datasets_cache_dirs())
    return dirs


def find_fashion_mnist(root: str | os.PathLike | None = None) -> Path:
    """The first candidate folder holding all four files; an explicit ``root`` must hold them."""
    if root is not None and not _complete(Path(root)):
        missing = [s for s in FILES.values() if _file_in(Path(root), s) is None]
        raise FileNotFoundError(
            f"{root}: Fashion-MNIST files missing: {', '.join(f'{m}.gz' for m in missing)}. "
            f"Fetch them with `python -m priorlab.data.fashion_mnist download {root}`"
        )
    tried = candidate_dirs(root)
    for d in tried:
        if _complete(d):
            return d
    raise FileNotFoundError(
        "Fashion-MNIST not found; looked in: " + ", ".join(map(str, tried))
        + f". Fix: `apt-get install dataset-fashion-mnist` (Debian/Ubuntu), or "
        f"`python -m priorlab.data.fashion_mnist download DIR` and set {ENV_VAR}=DIR"
    )


def load_fashion_mnist(root: str | os.PathLike | None = None, verify: bool = True) -> dict[str, np.ndarray]:
    """Load Fashion-MNIST: ``x_train`` uint8 [60000,28,28], ``y_train`` uint8 [60000], ``x_test``, ``y_test``.

    With ``verify`` the decompressed content of each file must match ``RAW_SHA256``.
    """
    directory = find_fashion_mnist(root)
    out: dict[str, np.ndarray] = {}
    for key, stem in FILES.items():
        path = _file_in(directory, stem)
        data = read_idx_bytes(path)
        if verify:
            got = hashlib.sha256(data).hexdigest()
            if got != RAW_SHA256[stem]:
                raise ValueError(
                    f"{path}: decompressed content sha256 {got} is not the official "
                    f"{RAW_SHA256[stem]}; the file is corrupt or not Fashion-MNIST "
                    "(reinstall dataset-fashion-mnist or download again)"
                )
        arr = parse_idx(data, name=str(path))
        if arr.shape != SHAPES[key] or arr.dtype != np.uint8:
            raise ValueError(f"{path}: expected uint8 {SHAPES[key]}, got {arr.dtype} {arr.shape}")
        out[key] = arr
    return out


def download(dest: str | os.PathLike, base_urls: tuple[str, ...] = BASE_URLS, timeout: float = 60.0) -> Path:
    """Fetch the four official ``.gz`` files into ``dest``, each verified against ``OFFICIAL_GZ_SHA256``.

    Mirrors are tried in order per file; the errors of all mirrors are reported if none works.
    """
    dest = Path(dest)
    for stem in FILES.values():
        errors: list[str] = []
        for base in base_urls:
            try:
                fetch(base + f"{stem}.gz", dest / f"{stem}.gz", OFFICIAL_GZ_SHA256[stem], timeout)
                break
            except (OSError, ValueError) as exc:
                errors.append(str(exc))
        else:
            raise OSError(f"could not fetch {stem}.gz from any mirror:\n  " + "\n  ".join(errors))
    return dest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m priorlab.data.fashion_mnist")
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("download", help="fetch the official files into DIR").add_argument("dir")
    sub.add_parser("check", help="load and summarise").add_argument("dir", nargs="?")
    args = parser.parse_args(argv)
    if args.cmd == "download":
        print(download(args.dir))
        return 0
    data = load_fashion_mnist(args.dir)
    print(find_fashion_mnist(args.dir))
    for key, arr in data.items():
        print(f"{key}: {arr.dtype} {arr.shape} mean {arr.mean():.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
