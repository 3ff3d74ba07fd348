"""Building, writing and loading the data sets of the ``data`` stage.

On disk a data set is ``data/<name>/data.npz`` (compressed arrays:
``x_train``/``x_test`` uint8 ``[N, C, H, W]``, ``factors_*`` int64, optional
``sources_*`` float64) plus ``manifest.json`` (shapes, dtypes, factor names
and sizes, generator version, sha256 of the array file).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from priorlab.config import DatasetParams
from priorlab.data.base import GroundTruthData, as_random_state
from priorlab.io import array_manifest, read_json, read_npz, sha256_file, write_json, write_npz

GENERATOR_VERSION = {"smiley": "1", "dsprites": "1", "mnist": "1", "fashion_mnist": "1"}
ARRAY_FILE, MANIFEST_FILE = "data.npz", "manifest.json"
REAL_DATA = ("mnist", "fashion_mnist")  # real images with class labels, no ground-truth factors


def pixel_max(params: DatasetParams) -> int:
    """Stored uint8 value of a white pixel: 1 for binary images, 255 for grey levels."""
    return 255 if params.kind in REAL_DATA and params.binarise == "none" else 1


def ground_truth(params: DatasetParams) -> GroundTruthData | None:
    """The ``GroundTruthData`` that renders observations from factors (None for real data)."""
    if params.kind in REAL_DATA:
        return None
    if params.kind == "smiley":
        from priorlab.data.smiley import SmileyData

        return SmileyData()
    if params.kind == "dsprites":
        from priorlab.data.dsprites import DSprites

        return DSprites(resolution=params.resolution)
    raise ValueError(f"unknown data set kind {params.kind!r}; allowed: smiley, dsprites")


def build_arrays(params: DatasetParams) -> dict[str, np.ndarray]:
    """Generate the train/test arrays of a data set (deterministic given ``params.seed``)."""
    rs = as_random_state(params.seed)
    n = params.n_train + params.n_test
    if params.kind == "smiley":
        from priorlab.data.smiley import sample_smiley

        images, presence, sources = sample_smiley(n, rs, presence_prob=params.presence_prob)
        data = ground_truth(params)
        factors = np.concatenate([presence.astype(np.int64), data.discretise_sources(sources)], axis=1)
        arrays = {"x": images[:, None].astype(np.uint8), "factors": factors, "sources": sources.astype(np.float64),
                  "presence": presence.astype(np.uint8)}
    elif params.kind == "dsprites":
        from priorlab.data.dsprites import FACTOR_SIZES, index_to_factors, render_dsprites

        grid = int(np.prod(FACTOR_SIZES))
        if n > grid:
            raise ValueError(f"dsprites: n_train + n_test = {n} exceeds the {grid} images of the factor grid")
        index = np.sort(rs.choice(grid, size=n, replace=False))
        index = index[rs.permutation(n)]
        factors = index_to_factors(index)
        arrays = {"x": render_dsprites(factors, params.resolution)[:, None], "factors": factors.astype(np.int64)}
    elif params.kind in REAL_DATA:
        arrays = _real_arrays(params, rs)
    else:
        raise ValueError(f"unknown data set kind {params.kind!r}; allowed: smiley, dsprites, {', '.join(REAL_DATA)}")
    out = {}
    for key, value in arrays.items():
        out[f"{key}_train"], out[f"{key}_test"] = value[: params.n_train], value[params.n_train :]
    return out


def _real_arrays(params: DatasetParams, rs: np.random.RandomState) -> dict[str, np.ndarray]:
    """MNIST (50k train / 10k test of the classic split) or Fashion-MNIST (60k / 10k) subsets.

    The first ``n_train`` training and ``n_test`` test images in a seeded random order; grey
    levels as uint8 0..255, or binarised once here (``binarise``: fixed 0.5 threshold or
    Bernoulli draws with the data seed).
    """
    if params.kind == "mnist":
        from priorlab.data.mnist import load_mnist

        raw = load_mnist(dtype="uint8")
    else:
        from priorlab.data.fashion_mnist import load_fashion_mnist

        raw = load_fashion_mnist()
    split = {}
    for name, n in (("train", params.n_train), ("test", params.n_test)):
        x, y = raw[f"x_{name}"], raw[f"y_{name}"]
        if n > len(x):
            raise ValueError(f"{params.kind}: n_{name} = {n} exceeds the {len(x)} {name} images")
        idx = rs.permutation(len(x))[:n]
        split[name] = (x[idx], np.asarray(y[idx], dtype=np.int64))
    x = np.concatenate([split["train"][0], split["test"][0]])
    if params.binarise != "none":
        from priorlab.data.mnist import binarise

        x = binarise(x.astype(np.float32) / 255.0, params.binarise, random_state=rs).astype(np.uint8)
    return {"x": x[:, None], "labels": np.concatenate([split["train"][1], split["test"][1]])}


def write_dataset(out_dir: str | Path, params: DatasetParams, arrays: dict[str, np.ndarray]) -> dict[str, Any]:
    """Write ``data.npz`` and its manifest atomically; returns the manifest."""
    out_dir = Path(out_dir)
    write_npz(out_dir / ARRAY_FILE, **arrays)
    data = ground_truth(params)
    if data is None:  # real data: class labels instead of factors
        names, sizes, shape = ["label"], [10], [1, *arrays["x_train"].shape[2:]]
    else:
        names, sizes, shape = list(data.factor_names), list(data.factor_sizes), list(data.observation_shape)
    manifest = {
        "kind": params.kind,
        "generator_version": GENERATOR_VERSION[params.kind],
        "params": {k: getattr(params, k) for k in params.__dataclass_fields__},
        "arrays": array_manifest(arrays),
        "factor_names": names,
        "factor_sizes": sizes,
        "observation_shape": shape,
        "pixel_max": pixel_max(params),
        "sha256": {ARRAY_FILE: sha256_file(out_dir / ARRAY_FILE)},
    }
    write_json(out_dir / MANIFEST_FILE, manifest)
    return manifest


@dataclass
class Dataset:
    """A loaded data set: uint8 observations, factors and the manifest."""

    name: str
    arrays: dict[str, np.ndarray]
    manifest: dict[str, Any]
    normalise: str = "none"

    def x(self, split: str) -> torch.Tensor:
        """Stored observations of ``split`` (uint8; convert batches with :meth:`prepare`)."""
        return torch.from_numpy(self.arrays[f"x_{split}"])

    def factors(self, split: str) -> np.ndarray:
        return self.arrays[f"factors_{split}"]

    def labels(self, split: str) -> np.ndarray | None:
        """Class labels of real data sets (None for synthetic ones)."""
        return self.arrays.get(f"labels_{split}")

    @property
    def obs_shape(self) -> tuple[int, ...]:
        return tuple(self.arrays["x_train"].shape[1:])

    def prepare(self, batch: torch.Tensor) -> torch.Tensor:
        """Model input from stored pixels: [0, 1] floats, optionally L2-normalised per image."""
        return prepare_observations(batch, self.normalise, self.manifest.get("pixel_max", 1))


def prepare_observations(batch, normalise: str = "none", pixel_max: float = 1) -> torch.Tensor:
    """Stored pixels → float32 in [0, 1] (divided by ``pixel_max``); ``normalise="l2"``
    then divides each image by its L2 norm (the VSC authors' Smiley preprocessing)."""
    x = torch.as_tensor(batch).float()
    if pixel_max != 1:
        x = x / pixel_max
    if normalise == "l2":
        norm = x.flatten(1).norm(dim=1).clamp_min(1e-12)
        x = x / norm.view(-1, *([1] * (x.dim() - 1)))
    return x


def load_dataset(data_dir: str | Path, normalise: str = "none") -> Dataset:
    """Load ``data/<name>``, verifying the array file against its manifest's sha256."""
    data_dir = Path(data_dir)
    manifest_path = data_dir / MANIFEST_FILE
    if not manifest_path.is_file():
        raise FileNotFoundError(f"{manifest_path}: data manifest not found; run `dvc repro data@{data_dir.name}`")
    manifest = read_json(manifest_path)
    array_path = data_dir / ARRAY_FILE
    if not array_path.is_file():
        raise FileNotFoundError(f"{array_path}: array file not found; run `dvc repro -f data@{data_dir.name}`")
    expected = manifest.get("sha256", {}).get(ARRAY_FILE)
    if expected != sha256_file(array_path):
        raise ValueError(
            f"{array_path}: sha256 does not match {manifest_path} (corrupt or modified); "
            f"run `dvc checkout {data_dir}` or `dvc repro -f data@{data_dir.name}`"
        )
    return Dataset(name=data_dir.name, arrays=read_npz(array_path), manifest=manifest, normalise=normalise)
