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

GENERATOR_VERSION = {"smiley": "1", "dsprites": "1"}
ARRAY_FILE, MANIFEST_FILE = "data.npz", "manifest.json"
PIXEL_MAX = {"smiley": 1, "dsprites": 1}  # stored uint8 value of a white pixel (binary images: 1)


def ground_truth(params: DatasetParams) -> GroundTruthData:
    """The ``GroundTruthData`` that renders observations of this data set from factors."""
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
    else:
        raise ValueError(f"unknown data set kind {params.kind!r}; allowed: smiley, dsprites")
    out = {}
    for key, value in arrays.items():
        out[f"{key}_train"], out[f"{key}_test"] = value[: params.n_train], value[params.n_train :]
    return out


def write_dataset(out_dir: str | Path, params: DatasetParams, arrays: dict[str, np.ndarray]) -> dict[str, Any]:
    """Write ``data.npz`` and its manifest atomically; returns the manifest."""
    out_dir = Path(out_dir)
    write_npz(out_dir / ARRAY_FILE, **arrays)
    data = ground_truth(params)
    manifest = {
        "kind": params.kind,
        "generator_version": GENERATOR_VERSION[params.kind],
        "params": {k: getattr(params, k) for k in params.__dataclass_fields__},
        "arrays": array_manifest(arrays),
        "factor_names": list(data.factor_names),
        "factor_sizes": list(data.factor_sizes),
        "observation_shape": list(data.observation_shape),
        "pixel_max": PIXEL_MAX[params.kind],
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
