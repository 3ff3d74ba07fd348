"""issue 46: observations read from the user's files (.npz, .npy, .csv, .parquet, .h5ad), every format
tested on a local file written here; bad files named in one message."""

from __future__ import annotations

import numpy as np
import pytest

from priorlab.data.files import read_observations
from priorlab.errors import DataError

RS = np.random.RandomState(0)
X = RS.poisson(2.0, size=(30, 5)).astype(np.int64)
NAMES = np.array(["B", "T", "NK"])[RS.randint(0, 3, 30)]


def test_npz_and_npy(tmp_path):
    np.savez(tmp_path / "d.npz", x=X, y=RS.randint(0, 4, 30), f=RS.randint(0, 3, (30, 2)))
    got = read_observations(tmp_path / "d.npz", labels="y", factors="f")
    np.testing.assert_array_equal(got.x, X)
    assert got.labels.shape == (30,) and got.factors.shape == (30, 2) and got.class_names is None
    np.savez(tmp_path / "only.npz", counts=X)  # the file's only array, whatever its name
    np.testing.assert_array_equal(read_observations(tmp_path / "only.npz").x, X)
    np.save(tmp_path / "d.npy", X.astype(np.float32))
    assert read_observations(tmp_path / "d.npy").x.dtype == np.float32
    with pytest.raises(DataError, match=r"d.npz: no array 'labels'; arrays: x, y, f"):
        read_observations(tmp_path / "d.npz", labels="labels")


def test_csv_with_a_label_column(tmp_path):
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame(X, columns=[f"gene{i}" for i in range(5)])
    frame.insert(2, "cell_type", NAMES)
    frame.to_csv(tmp_path / "d.csv", index=False)
    got = read_observations(tmp_path / "d.csv", labels="cell_type")
    np.testing.assert_array_equal(got.x, X)
    assert got.class_names == ["B", "NK", "T"]  # sorted
    np.testing.assert_array_equal(np.array(got.class_names)[got.labels], NAMES)
    with pytest.raises(DataError, match="d.csv: X: column 'cell_type' is not numeric"):
        read_observations(tmp_path / "d.csv")
    with pytest.raises(DataError, match="no column 'kind'"):
        read_observations(tmp_path / "d.csv", labels="kind")


def test_parquet(tmp_path):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    pd.DataFrame(X.astype(np.float64), columns=list("abcde")).to_parquet(tmp_path / "d.parquet")
    np.testing.assert_array_equal(read_observations(tmp_path / "d.parquet").x, X)


def _write_h5ad(path, sparse_x: bool, old_layout: bool = False):
    """A minimal file in AnnData's HDF5 layout: X (dense or CSR), a counts layer, an obs column."""
    h5py = pytest.importorskip("h5py")
    from scipy import sparse

    with h5py.File(path, "w") as f:
        if sparse_x:
            m = sparse.csr_matrix(X.astype(np.float32))
            g = f.create_group("X")
            g.attrs["encoding-type"], g.attrs["shape"] = "csr_matrix", np.array(m.shape)
            g["data"], g["indices"], g["indptr"] = m.data, m.indices, m.indptr
        else:
            f["X"] = np.log1p(X).astype(np.float32)
        f.create_group("layers")["counts"] = X
        cats, codes = np.unique(NAMES, return_inverse=True)
        if old_layout:
            obs = np.zeros(30, dtype=[("index", "S4"), ("cell_type", "i1")])
            obs["cell_type"] = codes
            f["obs"] = obs
            f["uns/cell_type_categories"] = cats.astype("S")
        else:
            col = f.create_group("obs").create_group("cell_type")
            col["codes"], col["categories"] = codes.astype(np.int8), cats.astype("S")


@pytest.mark.parametrize("sparse_x,old_layout", [(False, False), (True, False), (False, True)])
def test_h5ad(tmp_path, sparse_x, old_layout):
    _write_h5ad(tmp_path / "d.h5ad", sparse_x, old_layout)
    got = read_observations(tmp_path / "d.h5ad", labels="cell_type")
    np.testing.assert_allclose(got.x, X if sparse_x else np.log1p(X).astype(np.float32))
    np.testing.assert_array_equal(np.array(got.class_names)[got.labels], NAMES)
    np.testing.assert_array_equal(read_observations(tmp_path / "d.h5ad", layer="counts").x, X)
    with pytest.raises(DataError, match="no layer 'spliced'; layers: counts"):
        read_observations(tmp_path / "d.h5ad", layer="spliced")


def test_bad_files_are_named(tmp_path):
    with pytest.raises(DataError, match=r"d.txt: unknown file type '.txt'; priorlab reads .npz, .npy"):
        read_observations(tmp_path / "d.txt")
    with pytest.raises(DataError, match="missing.npy: file not found"):
        read_observations(tmp_path / "missing.npy")
    np.save(tmp_path / "d.npy", X)
    with pytest.raises(DataError, match="layer='counts' applies to .h5ad files"):
        read_observations(tmp_path / "d.npy", layer="counts")
    np.save(tmp_path / "neg.npy", -X)
    with pytest.raises(DataError, match="neg.npy: X: integer observations are read as counts"):
        read_observations(tmp_path / "neg.npy")
