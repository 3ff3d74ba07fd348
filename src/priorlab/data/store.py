"""Building, writing and loading the data sets of the ``data`` stage.

On disk a data set is ``data/<name>/data.npz`` (compressed arrays, each split in
``<key>_train``/``<key>_test``: the observations ``x``, of any shape and dtype: uint8 images
``[N, C, H, W]``, float32 vectors or integer counts ``[N, G]``; as the data set has them
int64 ground-truth ``factors`` ``[N, K]``, int64 class ``labels`` ``[N]`` and per-row extras)
plus ``manifest.json`` (kind, generator version, params, array shapes and dtypes,
``observation_kind`` and ``observation_shape``; ``factor_names``/``factor_sizes`` only with
factors, ``num_classes`` only with labels, ``pixel_max`` only for images; the sha256 of the
array file).  The kinds and how they are built: :mod:`priorlab.data.registry`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from priorlab.config import DatasetParams
from priorlab.data.arrays import Encoding
from priorlab.data.base import GroundTruthData, as_random_state
from priorlab.data.registry import DatasetBuilder, dataset_builder
from priorlab.errors import DataError
from priorlab.io import array_manifest, read_json, read_npz, sha256_file, write_json, write_npz

ARRAY_FILE, MANIFEST_FILE = "data.npz", "manifest.json"
SPLITS = ("train", "test")
_OBSERVATION_DTYPES = {"image": ("uint8", np.uint8), "vector": ("floating", np.floating),
                       "counts": ("integer", np.integer)}


def ground_truth(params: DatasetParams) -> GroundTruthData | None:
    """The ``GroundTruthData`` that renders observations from factors (None: no ground truth)."""
    factory = dataset_builder(params).ground_truth
    return None if factory is None else factory(params)


def build_arrays(params: DatasetParams) -> dict[str, np.ndarray]:
    """Generate the train/test arrays of a data set (deterministic given ``params.seed``)."""
    arrays = dataset_builder(params).build(params, as_random_state(params.seed))
    out = {}
    for key, value in arrays.items():
        if len(value) != params.n_train + params.n_test:
            raise ValueError(f"{params.kind}: array {key!r} has {len(value)} rows, "
                             f"expected n_train + n_test = {params.n_train + params.n_test}")
        out[f"{key}_train"], out[f"{key}_test"] = value[: params.n_train], value[params.n_train :]
    return out


def write_dataset(out_dir: str | Path, params: DatasetParams, arrays: dict[str, np.ndarray]) -> dict[str, Any]:
    """Check ``arrays`` against the kind's builder, write ``data.npz`` and its manifest atomically;
    returns the manifest."""
    builder = dataset_builder(params)
    data = None if builder.ground_truth is None else builder.ground_truth(params)
    observation, num_classes = builder.observation_of(params), builder.classes_of(params)
    _check_arrays(params.kind, observation, arrays, data, num_classes)
    out_dir = Path(out_dir)
    write_npz(out_dir / ARRAY_FILE, **arrays)
    manifest: dict[str, Any] = {
        "kind": params.kind,
        "generator_version": builder.version,
        "params": {f.name: getattr(params, f.name) for f in dataclasses.fields(params)},
        "arrays": array_manifest(arrays),
        "observation_kind": observation,
        "observation_shape": list(arrays["x_train"].shape[1:]),
    }
    if data is not None:
        manifest["factor_names"], manifest["factor_sizes"] = list(data.factor_names), list(data.factor_sizes)
    if "labels_train" in arrays:
        manifest["num_classes"] = num_classes
    if observation == "image":
        manifest["pixel_max"] = 1 if builder.pixel_max is None else builder.pixel_max(params)
    manifest["sha256"] = {ARRAY_FILE: sha256_file(out_dir / ARRAY_FILE)}
    write_json(out_dir / MANIFEST_FILE, manifest)
    return manifest


def _check_arrays(kind: str, observation_kind: str, arrays: dict[str, np.ndarray], data: GroundTruthData | None,
                  num_classes: int | None) -> None:
    """Fail before writing when the arrays do not fit what the kind's builder declares."""
    keys = {split: {k[: -len(split) - 1] for k in arrays if k.endswith(f"_{split}")} for split in SPLITS}
    if "x" not in keys["train"] or keys["train"] != keys["test"] or len(arrays) != sum(map(len, keys.values())):
        raise ValueError(f"{kind}: arrays must be x_train, x_test and optional <key>_train/<key>_test pairs, "
                         f"got {', '.join(arrays)}")
    name, dtype = _OBSERVATION_DTYPES[observation_kind]
    shape = arrays["x_train"].shape[1:]
    for split in SPLITS:
        x = arrays[f"x_{split}"]
        if not np.issubdtype(x.dtype, dtype):
            raise ValueError(f"{kind}: x_{split} has dtype {x.dtype}; {observation_kind} observations are {name}")
        if x.shape[1:] != shape:
            raise ValueError(f"{kind}: x_{split} rows have shape {list(x.shape[1:])}, x_train rows {list(shape)}")
    if observation_kind == "image" and len(shape) != 3:
        raise ValueError(f"{kind}: image observations are [C, H, W], got rows of shape {list(shape)}")
    if observation_kind != "image" and len(shape) != 1:
        raise ValueError(f"{kind}: {observation_kind} observations are [G], got rows of shape {list(shape)}")
    if data is not None and tuple(shape) != tuple(data.observation_shape):
        raise ValueError(f"{kind}: observations have shape {list(shape)}, "
                         f"its ground truth renders {list(data.observation_shape)}")
    if data is None and "factors_train" in arrays:
        raise ValueError(f"{kind}: factors_* arrays need a ground_truth in the kind's builder")
    if data is not None and "factors_train" not in arrays:
        raise ValueError(f"{kind}: missing array 'factors_train' (the kind has a ground truth)")
    if "labels_train" in arrays:
        if num_classes is None:
            raise ValueError(f"{kind}: labels_* arrays need num_classes in the kind's builder")
        for split in SPLITS:
            y = arrays[f"labels_{split}"]
            if not np.issubdtype(y.dtype, np.integer) or y.size and not 0 <= y.min() <= y.max() < num_classes:
                raise ValueError(f"{kind}: labels_{split} must be integers in [0, {num_classes})")


@dataclass
class Dataset:
    """A loaded data set: stored observations, optional factors and labels, and the manifest."""

    name: str
    arrays: dict[str, np.ndarray]
    manifest: dict[str, Any]
    normalise: str = "none"

    def x(self, split: str) -> torch.Tensor:
        """Stored observations of ``split`` (convert batches with :meth:`prepare`)."""
        return torch.from_numpy(self.arrays[f"x_{split}"])

    def factors(self, split: str) -> np.ndarray:
        """Ground-truth factors ``[N, K]`` of ``split``; an error for data without factors."""
        if not self.has_factors:
            raise ValueError(f"data set {self.name!r} has no ground-truth factors")
        return self.arrays[f"factors_{split}"]

    def labels(self, split: str) -> np.ndarray | None:
        """Class labels ``[N]`` of ``split`` (None for data without labels)."""
        return self.arrays.get(f"labels_{split}")

    @property
    def obs_shape(self) -> tuple[int, ...]:
        """Shape of one observation: ``[C, H, W]`` for images, ``[G]`` for vectors and counts."""
        return tuple(self.arrays["x_train"].shape[1:])

    @property
    def observation_kind(self) -> str:
        """``"image"``, ``"vector"`` or ``"counts"`` (manifests without the key hold images)."""
        return self.manifest.get("observation_kind", "image")

    @property
    def has_factors(self) -> bool:
        return "factors_train" in self.arrays

    @property
    def factor_names(self) -> tuple[str, ...]:
        """Names of the ground-truth factors (empty without factors)."""
        return tuple(self.manifest.get("factor_names", ()))

    @property
    def num_classes(self) -> int | None:
        """Number of label classes (None without labels)."""
        return self.manifest.get("num_classes")

    def prepare(self, batch: torch.Tensor) -> torch.Tensor:
        """Model input from stored rows: float32; images divided by ``pixel_max``, counts as
        float counts; then the optional per-row L2 normalisation."""
        return prepare_observations(batch, self.normalise, self.manifest.get("pixel_max", 1))


def in_memory(name: str, arrays: dict[str, np.ndarray]) -> Dataset:
    """A :class:`Dataset` of freshly built vector arrays (no store round trip): the studies' synthetic sets."""
    return Dataset(name=name, arrays=arrays, manifest={"observation_kind": "vector"})


def prepare_observations(batch, normalise: str = "none", pixel_max: float = 1) -> torch.Tensor:
    """Stored rows → float32, divided by ``pixel_max`` (uint8 images: [0, 1]); ``normalise="l2"``
    then divides each row by its L2 norm (the VSC authors' Smiley preprocessing)."""
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
        raise DataError(
            f"{array_path}: sha256 does not match {manifest_path} (corrupt or modified); "
            f"run `dvc checkout {data_dir}` or `dvc repro -f data@{data_dir.name}`"
        )
    return Dataset(name=data_dir.name, arrays=read_npz(array_path), manifest=manifest, normalise=normalise)


def user_dataset(x: np.ndarray, encoding: Encoding, *, labels: np.ndarray | None = None,
                 factors: np.ndarray | None = None, validation: float = 0.0, seed: int = 0,
                 name: str = "user") -> Dataset:
    """A :class:`~priorlab.data.store.Dataset` of checked observations: a share ``validation`` of the
    rows (drawn with ``seed``) held out as its ``test`` split, the rest its ``train`` split."""
    if not 0.0 <= validation < 1.0:
        raise DataError(f"validation must lie in [0, 1), got {validation}")
    n = len(x)
    n_val = int(round(n * validation))
    if n - n_val < 1 or (validation > 0 and n_val < 1):
        raise DataError(f"validation {validation} of {n} rows leaves an empty split")
    perm = as_random_state(seed).permutation(n)
    val, train = np.sort(perm[:n_val]), np.sort(perm[n_val:])
    arrays = {"x_train": x[train], "x_test": x[val]}
    for key, values in (("labels", labels), ("factors", factors)):
        if values is not None:
            if len(values) != n:
                raise DataError(f"{key}: {len(values)} rows for {n} observations")
            arrays[f"{key}_train"], arrays[f"{key}_test"] = values[train], values[val]
    manifest = encoding.manifest()
    if labels is not None:
        manifest["num_classes"] = int(labels.max(initial=-1)) + 1
    return Dataset(name=name, arrays=arrays, manifest=manifest)
