"""The data stage's on-disk format: arrays + manifest, integrity checks, preprocessing."""

import copy
from dataclasses import dataclass
import re
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from priorlab.config import (
    DATASET_PARAMS, DatasetParams, DSpritesParams, MNISTParams, ParamsError, SmileyParams, parse_params,
)
from priorlab.data.registry import DatasetBuilder
from priorlab.data.store import build_arrays, ground_truth, load_dataset, prepare_observations, write_dataset

ROOT = Path(__file__).resolve().parents[1]
SMILEY = SmileyParams(kind="smiley", n_train=60, n_test=20, seed=1)
DSPRITES = DSpritesParams(kind="dsprites", n_train=50, n_test=10, resolution=32, seed=2)


def _real_data_or_skip(kind: str) -> None:
    from priorlab.data.fashion_mnist import find_fashion_mnist
    from priorlab.data.mnist import find_mnist

    try:
        (find_mnist if kind == "mnist" else find_fashion_mnist)()
    except FileNotFoundError as exc:
        pytest.skip(f"{kind} not installed: {exc}")


@pytest.mark.parametrize("params", [SMILEY, DSPRITES], ids=["smiley", "dsprites"])
def test_write_and_load_round_trip(tmp_path, params):
    arrays = build_arrays(params)
    manifest = write_dataset(tmp_path / params.kind, params, arrays)
    data = load_dataset(tmp_path / params.kind)
    for key, value in arrays.items():
        assert np.array_equal(data.arrays[key], value)
    assert manifest["arrays"]["x_train"] == {"shape": [params.n_train, 1, 32, 32], "dtype": "uint8"}
    assert manifest["observation_shape"] == [1, 32, 32] and manifest["pixel_max"] == 1
    assert data.observation_kind == "image" and data.has_factors and data.num_classes is None
    assert len(data.factor_names) == len(manifest["factor_sizes"]) == data.factors("train").shape[1]
    assert data.factor_names == tuple(ground_truth(params).factor_names)
    assert np.all(data.factors("test") < np.array(manifest["factor_sizes"]))
    assert len(manifest["sha256"]["data.npz"]) == 64


@pytest.mark.parametrize(
    "params, keys",
    [
        (SmileyParams(kind="smiley", n_train=6, n_test=2), ["x", "factors", "sources", "presence"]),
        (DSpritesParams(kind="dsprites", n_train=6, n_test=2), ["x", "factors"]),
        (MNISTParams(kind="mnist", n_train=6, n_test=2, binarise="stochastic"), ["x", "labels"]),
        (MNISTParams(kind="fashion_mnist", n_train=6, n_test=2), ["x", "labels"]),
    ],
    ids=lambda v: getattr(v, "kind", None),
)
def test_every_kind_builds_its_arrays(params, keys):
    if params.kind in ("mnist", "fashion_mnist"):
        _real_data_or_skip(params.kind)
    arrays = build_arrays(params)
    assert list(arrays) == [f"{k}_{s}" for k in keys for s in ("train", "test")]
    assert arrays["x_train"].dtype == np.uint8 and len(arrays["x_train"]) == 6 and len(arrays["x_test"]) == 2


def test_every_params_kind_has_a_builder():
    assert all(isinstance(vars(cls)["BUILDER"], str) for cls in DATASET_PARAMS.values())  # tests/test_kind_registries.py resolves them


def test_generation_is_deterministic_and_seeded():
    a, b = build_arrays(DSPRITES), build_arrays(DSPRITES)
    assert all(np.array_equal(a[k], b[k]) for k in a)
    c = build_arrays(DSpritesParams(kind="dsprites", n_train=50, n_test=10, resolution=32, seed=3))
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
        build_arrays(DSpritesParams(kind="dsprites", n_train=737280, n_test=1))


def test_params_of_another_kind_are_rejected():
    with pytest.raises(TypeError, match="data set kind 'smiley' takes SmileyParams, got DSpritesParams"):
        build_arrays(DSpritesParams(kind="smiley", n_train=5, n_test=1))
    with pytest.raises(ValueError, match="unknown data set kind 'cifar'; allowed: smiley, dsprites"):
        build_arrays(DatasetParams(kind="cifar", n_train=5, n_test=1))


@pytest.mark.parametrize(
    "dataset, entry, expected",
    [
        ("smiley", {"resolution": 64}, "datasets.smiley.resolution: unknown key; allowed: kind, n_train, n_test, seed, "
                                       "normalise, presence_prob"),
        ("dsprites", {"binarise": "threshold"}, "datasets.dsprites.binarise: unknown key; allowed: kind, n_train, "
                                                "n_test, seed, normalise, resolution"),
        ("smiley", {"kind": "mnist", "presence_prob": 0.5}, "datasets.smiley.presence_prob: unknown key"),
        ("smiley", {"presence_prob": 1.0}, "datasets.smiley.presence_prob must be in (0, 1), got 1.0"),
        ("smiley", {"kind": ["smiley"]}, "datasets.smiley.kind: unknown value ['smiley']; allowed: smiley, dsprites"),
        ("dsprites", {"seed": -1}, "datasets.dsprites.seed must be >= 0"),
    ],
)
def test_dataset_entries_are_checked_per_kind(dataset, entry, expected):
    raw = copy.deepcopy(yaml.safe_load((ROOT / "profiles" / "tiny.yaml").read_text()))
    raw["datasets"][dataset].update(entry)
    with pytest.raises(ParamsError) as exc:
        parse_params(raw)
    assert expected in str(exc.value) and "\n" not in str(exc.value)


def test_dataset_entries_parse_into_their_kind_class():
    raw = yaml.safe_load((ROOT / "profiles" / "tiny.yaml").read_text())
    raw["datasets"]["digits"] = {"kind": "mnist", "n_train": 10, "n_test": 5, "binarise": "threshold"}
    datasets = parse_params(raw).datasets
    assert type(datasets["smiley"]) is SmileyParams and type(datasets["dsprites"]) is DSpritesParams
    assert datasets["digits"] == MNISTParams(kind="mnist", n_train=10, n_test=5, binarise="threshold")


# --------------------------------------------------------------------------- array data of any shape


def _features(params, rs):
    """N x 5 float32 features with a class label: a test-only "vector" kind."""
    n = params.n_train + params.n_test
    return {"x": rs.standard_normal((n, 5)).astype(np.float32), "labels": np.arange(n, dtype=np.int64) % 3}


def _counts(params, rs):
    """N x 7 int64 counts, nothing else: a test-only "counts" kind."""
    return {"x": rs.poisson(3.0, (params.n_train + params.n_test, 7)).astype(np.int64)}


@dataclass(frozen=True)
class FeaturesParams(DatasetParams):
    """A test-only kind "features"."""


@dataclass(frozen=True)
class CountsParams(DatasetParams):
    """A test-only kind "counts"."""


@pytest.fixture
def toy_kinds(monkeypatch):
    for kind, cls, builder in (("features", FeaturesParams, DatasetBuilder(_features, "vector", version="1", num_classes=3)),
                               ("counts", CountsParams, DatasetBuilder(_counts, "counts", version="2"))):
        monkeypatch.setitem(DATASET_PARAMS, kind, cls)
        monkeypatch.setattr(cls, "BUILDER", builder, raising=False)  # a kind defined beside its builder


def test_float_vectors_round_trip(tmp_path, toy_kinds):
    params = FeaturesParams(kind="features", n_train=8, n_test=4, seed=1, normalise="l2")
    arrays = build_arrays(params)
    manifest = write_dataset(tmp_path / "f", params, arrays)
    data = load_dataset(tmp_path / "f", normalise=params.normalise)
    assert data.x("train").dtype == torch.float32 and data.obs_shape == (5,)
    assert manifest["observation_shape"] == [5] and manifest["num_classes"] == 3
    assert not {"factor_names", "factor_sizes", "pixel_max"} & set(manifest)
    assert data.observation_kind == "vector" and not data.has_factors and data.factor_names == ()
    assert data.num_classes == 3 and np.array_equal(data.labels("test"), arrays["labels_test"])
    x = data.prepare(data.x("test"))
    expected = torch.from_numpy(arrays["x_test"])
    torch.testing.assert_close(x, expected / expected.norm(dim=1, keepdim=True))
    with pytest.raises(ValueError, match="has no ground-truth factors"):
        data.factors("train")


def test_integer_counts_round_trip(tmp_path, toy_kinds):
    params = CountsParams(kind="counts", n_train=6, n_test=3, seed=2)
    arrays = build_arrays(params)
    manifest = write_dataset(tmp_path / "c", params, arrays)
    data = load_dataset(tmp_path / "c")
    assert list(data.arrays) == ["x_train", "x_test"] and data.x("test").dtype == torch.int64
    assert manifest["generator_version"] == "2" and manifest["observation_shape"] == [7]
    assert data.observation_kind == "counts" and data.labels("train") is None and data.num_classes is None
    x = data.prepare(data.x("train"))
    assert x.dtype == torch.float32 and torch.equal(x, torch.from_numpy(arrays["x_train"]).float())


@pytest.mark.parametrize(
    "change, expected",
    [
        (lambda a: a.update(x_train=a["x_train"].astype(np.float32)),
         "x_train has dtype float32; counts observations are integer"),
        (lambda a: a.update(x_test=a["x_test"][:, :3]), "x_test rows have shape [3], x_train rows [7]"),
        (lambda a: a.update(x_train=a["x_train"][:, None], x_test=a["x_test"][:, None]), "counts observations are [G]"),
        (lambda a: a.pop("x_test"), "arrays must be x_train, x_test"),
        (lambda a: a.update(labels_train=np.zeros(6, np.int64), labels_test=np.zeros(3, np.int64)), "need num_classes"),
        (lambda a: a.update(factors_train=np.zeros((6, 1), np.int64), factors_test=np.zeros((3, 1), np.int64)),
         "factors_* arrays need a ground_truth"),
    ],
)
def test_arrays_that_do_not_fit_the_kind_are_not_written(tmp_path, toy_kinds, change, expected):
    params = CountsParams(kind="counts", n_train=6, n_test=3)
    arrays = build_arrays(params)
    change(arrays)
    with pytest.raises(ValueError, match=re.escape(expected)):
        write_dataset(tmp_path / "c", params, arrays)
    assert not (tmp_path / "c" / "data.npz").exists()


def test_prepare_observations():
    x = torch.tensor([[[[0, 1], [1, 1]]]], dtype=torch.uint8)
    assert torch.equal(prepare_observations(x), x.float())
    l2 = prepare_observations(x, "l2")
    assert torch.allclose(l2.flatten(1).norm(dim=1), torch.ones(1))
    grey = torch.tensor([[[[0, 255]]]], dtype=torch.uint8)
    assert torch.equal(prepare_observations(grey, pixel_max=255), torch.tensor([[[[0.0, 1.0]]]]))


def test_real_data_subsets(tmp_path):
    _real_data_or_skip("fashion_mnist")
    grey = MNISTParams(kind="fashion_mnist", n_train=300, n_test=100, seed=0)
    manifest = write_dataset(tmp_path / "f", grey, build_arrays(grey))
    data = load_dataset(tmp_path / "f")
    assert data.x("train").shape == (300, 1, 28, 28) and manifest["pixel_max"] == 255
    assert "factor_names" not in manifest and not data.has_factors and data.num_classes == 10
    assert set(np.unique(data.labels("test"))) <= set(range(10))
    x = data.prepare(data.x("train"))
    assert 0 <= x.min() and x.max() <= 1 and 0.2 < x.mean() < 0.4
    binary = MNISTParams(kind="fashion_mnist", n_train=300, n_test=100, seed=0, binarise="stochastic")
    arrays = build_arrays(binary)
    assert set(np.unique(arrays["x_train"])) <= {0, 1}
    assert np.array_equal(arrays["labels_train"], data.labels("train"))  # same subset, same seed


@pytest.mark.parametrize("umask", [0o022, 0o002])
def test_outputs_get_the_umasks_mode_not_mkstemps_0600(tmp_path, umask):
    """A lab group reads the results: atomic writes give files the mode a plain write would."""
    import os

    from priorlab.io import atomic_path, write_bytes_atomic, write_json

    old = os.umask(umask)
    try:
        write_json(tmp_path / "a.json", {"x": 1})
        write_bytes_atomic(tmp_path / "b.bin", b"1")
        with atomic_path(tmp_path / "c.pt") as tmp:
            tmp.write_bytes(b"2")
    finally:
        os.umask(old)
    for name in ("a.json", "b.bin", "c.pt"):
        assert (tmp_path / name).stat().st_mode & 0o777 == 0o666 & ~umask, name
