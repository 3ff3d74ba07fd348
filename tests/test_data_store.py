"""The data stage's on-disk format: arrays + manifest, integrity checks, preprocessing."""

import numpy as np
import pytest
import torch

from priorlab.config import DatasetParams
from priorlab.data.store import build_arrays, load_dataset, prepare_observations, write_dataset

SMILEY = DatasetParams(kind="smiley", n_train=60, n_test=20, seed=1)
DSPRITES = DatasetParams(kind="dsprites", n_train=50, n_test=10, resolution=32, seed=2)


@pytest.mark.parametrize("params", [SMILEY, DSPRITES], ids=["smiley", "dsprites"])
def test_write_and_load_round_trip(tmp_path, params):
    arrays = build_arrays(params)
    manifest = write_dataset(tmp_path / params.kind, params, arrays)
    data = load_dataset(tmp_path / params.kind)
    for key, value in arrays.items():
        assert np.array_equal(data.arrays[key], value)
    assert manifest["arrays"]["x_train"] == {"shape": [params.n_train, 1, 32, 32], "dtype": "uint8"}
    assert len(manifest["factor_names"]) == len(manifest["factor_sizes"]) == data.factors("train").shape[1]
    assert np.all(data.factors("test") < np.array(manifest["factor_sizes"]))
    assert len(manifest["sha256"]["data.npz"]) == 64


def test_generation_is_deterministic_and_seeded():
    a, b = build_arrays(DSPRITES), build_arrays(DSPRITES)
    assert all(np.array_equal(a[k], b[k]) for k in a)
    c = build_arrays(DatasetParams(kind="dsprites", n_train=50, n_test=10, resolution=32, seed=3))
    assert not np.array_equal(a["factors_train"], c["factors_train"])
    # train and test are disjoint grid points
    tr = {tuple(r) for r in a["factors_train"]}
    assert not tr & {tuple(r) for r in a["factors_test"]}


def test_corrupt_or_missing_files_give_clear_errors(tmp_path):
    write_dataset(tmp_path / "s", SMILEY, build_arrays(SMILEY))
    with open(tmp_path / "s" / "data.npz", "r+b") as f:
        f.seek(100)
        f.write(b"\x00garbage")
    with pytest.raises(ValueError, match="sha256 does not match"):
        load_dataset(tmp_path / "s")
    (tmp_path / "s" / "data.npz").unlink()
    with pytest.raises(FileNotFoundError, match="array file not found"):
        load_dataset(tmp_path / "s")
    with pytest.raises(FileNotFoundError, match="manifest not found"):
        load_dataset(tmp_path / "nothing")


def test_too_many_dsprites_points_is_an_error():
    with pytest.raises(ValueError, match="exceeds the 737280 images"):
        build_arrays(DatasetParams(kind="dsprites", n_train=737280, n_test=1))


def test_prepare_observations():
    x = torch.tensor([[[[0, 1], [1, 1]]]], dtype=torch.uint8)
    assert torch.equal(prepare_observations(x), x.float())
    l2 = prepare_observations(x, "l2")
    assert torch.allclose(l2.flatten(1).norm(dim=1), torch.ones(1))
    grey = torch.tensor([[[[0, 255]]]], dtype=torch.uint8)
    assert torch.equal(prepare_observations(grey, pixel_max=255), torch.tensor([[[[0.0, 1.0]]]]))


def test_real_data_subsets(tmp_path):
    from priorlab.data.fashion_mnist import find_fashion_mnist

    try:
        find_fashion_mnist()
    except FileNotFoundError as exc:
        pytest.skip(f"Fashion-MNIST not installed: {exc}")
    grey = DatasetParams(kind="fashion_mnist", n_train=300, n_test=100, seed=0)
    manifest = write_dataset(tmp_path / "f", grey, build_arrays(grey))
    data = load_dataset(tmp_path / "f")
    assert data.x("train").shape == (300, 1, 28, 28) and manifest["pixel_max"] == 255
    assert set(np.unique(data.labels("test"))) <= set(range(10))
    x = data.prepare(data.x("train"))
    assert 0 <= x.min() and x.max() <= 1 and 0.2 < x.mean() < 0.4
    binary = DatasetParams(kind="fashion_mnist", n_train=300, n_test=100, seed=0, binarise="stochastic")
    arrays = build_arrays(binary)
    assert set(np.unique(arrays["x_train"])) <= {0, 1}
    assert np.array_equal(arrays["labels_train"], data.labels("train"))  # same subset, same seed
