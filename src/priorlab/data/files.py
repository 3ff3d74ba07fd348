"""Observations read from a file: ``.npz``, ``.npy``, ``.csv``, ``.parquet`` and ``.h5ad``.

:func:`read_observations` returns the rows (checked by :func:`priorlab.data.arrays.observations`) with
optional class labels and ground-truth factors:

* ``.npz``: the array ``x`` (or the file's only array); ``labels`` / ``factors`` name further arrays;
* ``.npy``: one array of observations;
* ``.csv`` / ``.parquet``: one row per observation; ``labels`` names a column taken out as the classes,
  every other column must be numeric (``.parquet`` needs pandas with ``pyarrow`` or ``fastparquet``);
* ``.h5ad``: AnnData's HDF5 layout read with ``h5py`` alone (``anndata`` is not needed): ``X`` or
  ``layers/<layer>``, dense or sparse (CSR / CSC); ``labels`` names an ``obs`` column (categorical or
  plain).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from priorlab.data.arrays import as_array, class_codes, observations
from priorlab.errors import DataError

SUFFIXES = (".npz", ".npy", ".csv", ".parquet", ".h5ad")


@dataclass(frozen=True)
class FileData:
    """What a file holds: observations, and the class labels / factors it was asked for."""

    x: np.ndarray
    labels: np.ndarray | None = None
    class_names: list[str] | None = None
    factors: np.ndarray | None = None


def read_observations(path: str | Path, *, key: str = "x", layer: str | None = None, labels: str | None = None,
                      factors: str | None = None) -> FileData:
    """The observations of ``path`` (see the module's list of formats); a :class:`DataError` names the
    file and the problem."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        raise DataError(f"{path}: unknown file type {suffix or '(none)'!r}; priorlab reads {', '.join(SUFFIXES)}")
    if not path.is_file():
        raise DataError(f"{path}: file not found")
    if layer is not None and suffix != ".h5ad":
        raise DataError(f"{path}: layer={layer!r} applies to .h5ad files")
    if factors is not None and suffix != ".npz":
        raise DataError(f"{path}: factors are read from .npz files (an array of integer factor values)")
    try:
        if suffix == ".npz":
            raw_x, raw_y, raw_f = _npz(path, key, labels, factors)
        elif suffix == ".npy":
            if labels is not None:
                raise DataError(f"{path}: a .npy file holds one array; pass labels in a .npz, .csv or .h5ad file")
            raw_x, raw_y, raw_f = np.load(path, allow_pickle=False), None, None
        elif suffix == ".h5ad":
            raw_x, raw_y, raw_f = *_h5ad(path, layer, labels), None
        else:
            raw_x, raw_y, raw_f = *_table(path, suffix, labels), None
        x = observations(raw_x)
    except DataError as exc:
        raise DataError(f"{path}: {exc}") from None
    y, names = (None, None) if raw_y is None else class_codes(raw_y, len(x), f"{path}: labels {labels!r}")
    f = None
    if raw_f is not None:
        f = np.asarray(raw_f)
        if f.ndim != 2 or len(f) != len(x) or not np.issubdtype(f.dtype, np.integer):
            raise DataError(f"{path}: factors {factors!r} must be integers [{len(x)}, K], got {f.dtype} {list(f.shape)}")
    return FileData(x, y, names, f)


def _npz(path: Path, key: str, labels: str | None, factors: str | None):
    with np.load(path, allow_pickle=False) as z:
        names = list(z.files)
        if key not in names and len(names) == 1 and labels is None and factors is None:
            key = names[0]
        for name in (key, labels, factors):
            if name is not None and name not in names:
                raise DataError(f"no array {name!r}; arrays: {', '.join(names)}")
        return z[key], None if labels is None else z[labels], None if factors is None else z[factors]


def _table(path: Path, suffix: str, labels: str | None):
    import pandas as pd

    if suffix == ".csv":
        frame = pd.read_csv(path)
    else:
        try:
            frame = pd.read_parquet(path)
        except ImportError as exc:
            raise DataError(f"reading .parquet needs pyarrow or fastparquet (pip install pyarrow): {exc}") from None
    y = None
    if labels is not None:
        if labels not in frame.columns:
            raise DataError(f"no column {labels!r}; columns: {', '.join(map(str, frame.columns))}")
        y = frame.pop(labels).to_numpy()
    return as_array(frame), y


def _h5ad(path: Path, layer: str | None, labels: str | None):
    from priorlab.data.pbmc import require_h5py  # lazy: +4 modules, ~47 ms at import priorlab.data.files

    h5py = require_h5py()
    with h5py.File(path, "r") as f:
        if layer is None:
            node = f["X"]
        else:
            if "layers" not in f or layer not in f["layers"]:
                have = ", ".join(f["layers"]) if "layers" in f else "none"
                raise DataError(f"no layer {layer!r}; layers: {have}")
            node = f["layers"][layer]
        x = _h5_matrix(h5py, node)
        y = None if labels is None else _h5_obs_column(h5py, f, labels)
    return x, y


def _h5_matrix(h5py, node) -> np.ndarray:
    """A dense dataset, or AnnData's sparse group (``data``, ``indices``, ``indptr``, ``shape`` attribute)."""
    if isinstance(node, h5py.Dataset):
        return node[()]
    from scipy import sparse

    encoding = node.attrs.get("encoding-type", node.attrs.get("h5sparse_format", "csr_matrix"))
    encoding = encoding.decode() if isinstance(encoding, bytes) else str(encoding)
    shape = tuple(int(s) for s in node.attrs.get("shape", node.attrs.get("h5sparse_shape", ())))
    parts = (node["data"][()], node["indices"][()], node["indptr"][()])
    matrix = sparse.csc_matrix(parts, shape=shape) if encoding.startswith("csc") else sparse.csr_matrix(parts, shape=shape)
    return matrix.toarray()


def _h5_obs_column(h5py, f, name: str) -> np.ndarray:
    obs = f["obs"]
    if isinstance(obs, h5py.Group):  # AnnData >= 0.7: a group of columns
        if name not in obs:
            raise DataError(f"no obs column {name!r}; columns: {', '.join(k for k in obs if not k.startswith('_'))}")
        col = obs[name]
        if isinstance(col, h5py.Group):  # categorical: codes and categories
            codes, cats = col["codes"][()], _strings(col["categories"][()])
            return np.asarray(cats, dtype=object)[codes]
        return _strings(col[()])
    fields = obs.dtype.names or ()  # the pre-0.7 layout: one compound dataset, categories in uns
    if name not in fields:
        raise DataError(f"no obs column {name!r}; columns: {', '.join(n for n in fields if n != 'index')}")
    values = obs[name]
    cats = f.get(f"uns/{name}_categories")
    return np.asarray(_strings(cats[()]), dtype=object)[values] if cats is not None else _strings(values)


def _strings(values: np.ndarray) -> np.ndarray:
    if values.dtype.kind in ("S", "O"):
        return np.array([v.decode() if isinstance(v, bytes) else str(v) for v in values], dtype=object)
    return values
