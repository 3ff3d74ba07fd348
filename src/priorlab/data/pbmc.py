"""PBMC single-cell counts (scanpy's ``pbmc68k_reduced``: 700 cells × 765 genes, 10 cell types),
standing in for paper 003's Zeisel data (App. C.1).

Offline source: the PyPI wheel ``scanpy==1.11.5`` (2,097,836 bytes) ships
``scanpy/datasets/10x_pbmc68k_reduced.h5ad`` (1,772,368 bytes, SHA-256 ``FILE_SHA256``), an
HDF5 file in the pre-0.7 AnnData layout, read here with ``h5py`` alone (scanpy/anndata are not
needed): ``raw.X`` is a CSR group (``data``, ``indices``, ``indptr``, attribute
``h5sparse_shape``) holding log1p(counts · 1e4 / n_counts); ``obs`` is a compound data set with
``n_counts`` and the int codes ``bulk_labels``; ``uns/bulk_labels_categories`` names the 10 cell
types; ``raw.var['index']`` names the genes.

Counts are reconstructed as round(expm1(raw) · n_counts / 1e4). On the pinned file 99.82 % of all
entries (99.45 % of the non-zero ones) lie within 0.01 of an integer before rounding (``raw`` is
stored with about 3 decimals; largest deviation 0.08); ``load_pbmc`` reports both shares.
:func:`quantile_normalise` is C.1's quantile normalisation (Bolstad et al. 2003), optional;
:func:`top_variable_features` keeps the most variable genes (C.1 keeps 558 of Zeisel's).
"""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path

import numpy as np

from priorlab.data import packaged
from priorlab.data.base import heldout_rows
from priorlab.errors import DataError

FILE_SHA256 = "e71d41e737c941559b7c57c9243bdb3d2c889c2adfdf00e3422ac6b46783676f"
SPEC = packaged.PackagedFile(
    label="PBMC 68k reduced (scanpy)",
    module="priorlab.data.pbmc",
    env_var="PRIORLAB_PBMC_H5AD",
    file_name="10x_pbmc68k_reduced.h5ad",
    file_sha256=FILE_SHA256,
    wheel_name="scanpy-1.11.5-py3-none-any.whl",
    wheel_sha256="fcd383ddcf7acbf7c0ca232c25ad51b00aec9f8d2f7c8954b8c6ee0962257166",
    wheel_member="scanpy/datasets/10x_pbmc68k_reduced.h5ad",
    pip_spec="scanpy==1.11.5",
)
SCALE = 1e4  # scanpy's normalize_total target of the raw layer
SOURCE = "PBMC 68k reduced (scanpy): 700 cells, 765 genes, 10 cell types"  # the settings table's (paper: Zeisel)


def require_h5py():
    """The h5py module (it reads every .h5ad file here), or an ImportError saying how to install it."""
    try:
        import h5py
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("reading .h5ad files needs h5py: pip install h5py==3.16.0 "
                          "(pinned in requirements.txt)") from exc
    return h5py


def find_pbmc(path: str | os.PathLike | None = None) -> Path:
    """The first existing source: ``path``, ``$PRIORLAB_PBMC_H5AD``, ``.datasets/10x_pbmc68k_reduced.h5ad``,
    a ``scanpy-1.11.5`` wheel under ``.datasets/``."""
    return packaged.find_source(SPEC, path)


def _decode(values) -> np.ndarray:
    return np.array([v.decode() if isinstance(v, bytes) else str(v) for v in values], dtype=object)


def read_h5ad_raw(data: bytes, source: str = "<bytes>") -> dict:
    """Parse the (verified) h5ad bytes: ``raw`` float64 [cells, genes] (log1p-normalised), ``n_counts``
    float64 [cells], ``labels`` int64 [cells], ``label_names``, ``gene_names``, ``cell_names``."""
    h5py = require_h5py()
    try:
        with h5py.File(io.BytesIO(data), "r") as f:
            grp = f["raw.X"]
            shape = tuple(int(s) for s in grp.attrs["h5sparse_shape"])
            if grp.attrs.get("h5sparse_format", b"csr") not in ("csr", b"csr"):
                raise DataError(f"raw.X is {grp.attrs['h5sparse_format']!r}, expected csr")
            values, indices, indptr = grp["data"][:], grp["indices"][:], grp["indptr"][:]
            obs = f["obs"][:]
            label_names = _decode(f["uns/bulk_labels_categories"][:])
            gene_names = _decode(f["raw.var"][:]["index"])
    except (OSError, KeyError, ValueError, TypeError) as exc:
        raise DataError(f"{source}: not the pre-0.7 AnnData layout of pbmc68k_reduced ({exc}). {SPEC.fix()}") from exc
    n_cells, n_genes = shape
    if len(indptr) != n_cells + 1 or len(gene_names) != n_genes or len(obs) != n_cells:
        raise DataError(f"{source}: inconsistent shapes in raw.X / obs / raw.var. {SPEC.fix()}")
    raw = np.zeros(shape, dtype=np.float64)
    rows = np.repeat(np.arange(n_cells), np.diff(indptr))
    raw[rows, indices] = values
    labels = obs["bulk_labels"].astype(np.int64)
    if labels.min() < 0 or labels.max() >= len(label_names):
        raise DataError(f"{source}: bulk_labels codes outside 0..{len(label_names) - 1}")
    return {"raw": raw, "n_counts": obs["n_counts"].astype(np.float64), "labels": labels,
            "label_names": label_names, "gene_names": gene_names, "cell_names": _decode(obs["index"])}


def counts_from_raw(raw: np.ndarray, n_counts: np.ndarray) -> tuple[np.ndarray, dict[str, float]]:
    """round(expm1(raw) · n_counts / 1e4) as int32, and the share of entries (all, non-zero) that
    were within 0.01 of an integer before rounding."""
    values = np.expm1(raw) * (n_counts[:, None] / SCALE)
    dev = np.abs(values - np.rint(values))
    nonzero = raw > 0
    stats = {"integer_share": float(np.mean(dev <= 0.01)),
             "integer_share_nonzero": float(np.mean(dev[nonzero] <= 0.01)) if nonzero.any() else 1.0,
             "max_deviation": float(dev.max()) if dev.size else 0.0}
    return np.rint(values).astype(np.int32), stats


def load_pbmc(path: str | os.PathLike | None = None, test_fraction: float = 0.2, random_state=0,
              expected_sha256: str | None = None, fold: int | None = None) -> dict:
    """Integer counts split by cells: ``x_train``, ``x_test`` int32 [cells, 765]; ``y_train``,
    ``y_test`` int64 cell-type codes; ``label_names`` [10]; ``gene_names`` [765]; ``integer_share``,
    ``integer_share_nonzero`` (float arrays of shape ()). Random split, explicit ``random_state``; with
    ``fold``, one of its disjoint held-out folds (:func:`priorlab.data.base.heldout_rows`)."""
    if not 0.0 < float(test_fraction) < 1.0:
        raise ValueError(f"test_fraction must lie in (0, 1), got {test_fraction}")
    source = find_pbmc(path)
    parsed = read_h5ad_raw(packaged.read_verified_bytes(SPEC, source, expected_sha256), str(source))
    counts, stats = counts_from_raw(parsed["raw"], parsed["n_counts"])
    train, test = heldout_rows(counts.shape[0], test_fraction, random_state, fold)
    return {
        "x_train": counts[train], "x_test": counts[test],
        "y_train": parsed["labels"][train], "y_test": parsed["labels"][test],
        "label_names": parsed["label_names"], "gene_names": parsed["gene_names"],
        "integer_share": np.asarray(stats["integer_share"]),
        "integer_share_nonzero": np.asarray(stats["integer_share_nonzero"]),
    }


def quantile_normalise(x: np.ndarray, reference: np.ndarray | None = None) -> np.ndarray:
    """Quantile normalisation (Bolstad et al. 2003) of the rows (cells) of ``x`` [cells, genes]:
    every row gets the same distribution, the mean over rows of the sorted rows (or ``reference``,
    sorted, e.g. the training set's, to map test rows). Ties receive the mean reference value over
    their ranks, as preprocessCore. Returns float64."""
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2 or x.shape[1] < 1:
        raise ValueError(f"x must be [cells, genes], got shape {x.shape}")
    ref = np.sort(x, axis=1).mean(axis=0) if reference is None else np.sort(np.asarray(reference, np.float64))
    if ref.shape != (x.shape[1],):
        raise ValueError(f"reference must have {x.shape[1]} values, got {ref.shape}")
    from scipy.stats import rankdata

    lo = rankdata(x, method="min", axis=1).astype(np.int64) - 1   # first rank of each tie block
    hi = rankdata(x, method="max", axis=1).astype(np.int64)       # one past its last rank
    csum = np.concatenate([[0.0], np.cumsum(np.sort(ref))])
    return (csum[hi] - csum[lo]) / (hi - lo)


def quantile_reference(x: np.ndarray) -> np.ndarray:
    """The target distribution of :func:`quantile_normalise`: mean of the sorted rows."""
    return np.sort(np.asarray(x, dtype=np.float64), axis=1).mean(axis=0)


def top_variable_features(x: np.ndarray, n: int) -> np.ndarray:
    """Indices of the ``n`` columns with the largest standard deviation (as the released code
    selects Zeisel's 558 genes), most variable first (ties → lower index)."""
    x = np.asarray(x, dtype=np.float64)
    if not 1 <= int(n) <= x.shape[1]:
        raise ValueError(f"n must lie in 1..{x.shape[1]}, got {n}")
    return np.argsort(-x.std(axis=0), kind="stable")[: int(n)]


def check(path: str | os.PathLike | None = None) -> None:
    """Print where the file is and the shapes of the loaded split."""
    print(find_pbmc(path))
    for key, arr in load_pbmc(path).items():
        print(f"{key}: {arr.dtype} {arr.shape}" + (f" = {float(arr):.4f}" if arr.ndim == 0 else ""))


def main(argv: list[str] | None = None) -> int:
    return packaged.main(SPEC, "python -m priorlab.data.pbmc", check, argv)


if __name__ == "__main__":
    sys.exit(main())
