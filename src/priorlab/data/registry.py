"""The data set kinds the ``data`` stage can build: one :class:`DatasetBuilder` per parameter class,
named by the class's ``BUILDER``.

A builder says how to generate the arrays of a data set, what its observations are
(``"image"``: uint8 ``[C, H, W]``; ``"vector"``: float32 ``[G]``; ``"counts"``: integer
``[G]``), which :class:`~priorlab.data.base.GroundTruthData` renders them from factors (none
for data without known factors) and, for classified data, how many classes its labels have.
:mod:`priorlab.data.store` writes and loads whatever a builder returns.

Adding a kind ``foo``:

1. in :mod:`priorlab.config`, a frozen dataclass ``FooParams(DatasetParams)`` with only its own
   settings and their ``check`` and ``BUILDER = "priorlab.data.registry:FOO"``, registered as
   ``DATASET_PARAMS["foo"] = FooParams`` (the one registry of data sets);
2. here, a function ``build_foo(params, rs)`` returning the arrays of all
   ``n_train + n_test`` rows (training rows first): ``x`` and, as the data set has them,
   ``factors`` (int64 ``[N, K]``, with a ``ground_truth``), ``labels`` (int64 ``[N]``, with
   ``num_classes``) or extra per-row arrays; and
   ``FOO = DatasetBuilder(build_foo, observation_kind=..., version="1")``.

Bump ``version`` whenever a change alters the arrays a kind builds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Literal

import numpy as np

from priorlab.config import DATASET_PARAMS, DatasetParams, DSpritesParams, FileParams, MNISTParams, SmileyParams
from priorlab.config.checks import builder_for
from priorlab.data.arrays import observation_kind
from priorlab.data.base import GroundTruthData, TableGroundTruth
from priorlab.data.patches import sample_patches
from priorlab.data.sparse_synthetic import N_FACTORS, N_FEATURES, sparse_map
from priorlab.errors import DataError

ObservationKind = Literal["image", "vector", "counts"]
OBSERVATION_KINDS: tuple[str, ...] = ("image", "vector", "counts")


@dataclass(frozen=True)
class DatasetBuilder:
    """How the ``data`` stage builds one kind of data set."""

    build: Callable[[DatasetParams, np.random.RandomState], dict[str, np.ndarray]]
    """``(params, rs) -> arrays`` of all ``n_train + n_test`` rows, training rows first."""
    observation_kind: ObservationKind | Callable[[DatasetParams], ObservationKind]
    """The kind's observations, or a function of the params giving them (a file declares its own)."""
    version: str
    """Generator version, recorded in the manifest: bump it when the built arrays change."""
    ground_truth: Callable[[DatasetParams], GroundTruthData] | None = None
    """The factors → observations renderer (kinds with ``factors``); None: no ground truth."""
    num_classes: int | Callable[[DatasetParams], int | None] | None = None
    """Number of classes of the ``labels`` (kinds with class labels), or a function of the params."""
    pixel_max: Callable[[DatasetParams], int] | None = None
    """uint8 images: the stored value of a white pixel (None: 1, binary images)."""

    def observation_of(self, params: DatasetParams) -> ObservationKind:
        """The observation kind of the data set of ``params``."""
        kind = self.observation_kind(params) if callable(self.observation_kind) else self.observation_kind
        if kind not in OBSERVATION_KINDS:
            raise ValueError(f"observation_kind: unknown value {kind!r}; allowed: {', '.join(OBSERVATION_KINDS)}")
        return kind

    def classes_of(self, params: DatasetParams) -> int | None:
        """The number of label classes of the data set of ``params`` (None: no labels)."""
        return self.num_classes(params) if callable(self.num_classes) else self.num_classes

    def __post_init__(self) -> None:
        if not callable(self.observation_kind) and self.observation_kind not in OBSERVATION_KINDS:
            raise ValueError(f"observation_kind: unknown value {self.observation_kind!r}; "
                             f"allowed: {', '.join(OBSERVATION_KINDS)}")


# --------------------------------------------------------------------------- builders


def build_smiley(params: SmileyParams, rs: np.random.RandomState) -> dict[str, np.ndarray]:
    """Smiley faces, their factors (presence flags + binned sources), sources and presence."""
    from priorlab.data.smiley import SmileyData, sample_smiley  # lazy: scipy, ~225 ms at import priorlab.data.registry

    images, presence, sources = sample_smiley(params.n_train + params.n_test, rs, presence_prob=params.presence_prob)
    factors = np.concatenate([presence.astype(np.int64), SmileyData().discretise_sources(sources)], axis=1)
    return {"x": images[:, None].astype(np.uint8), "factors": factors, "sources": sources.astype(np.float64),
            "presence": presence.astype(np.uint8)}


def build_dsprites(params: DSpritesParams, rs: np.random.RandomState) -> dict[str, np.ndarray]:
    """Distinct points of the dSprites factor grid in a seeded random order, rendered."""
    from priorlab.data.dsprites import (  # lazy: +1 module, ~27 ms at import priorlab.data.registry
        FACTOR_SIZES, index_to_factors, render_dsprites)

    n, grid = params.n_train + params.n_test, int(np.prod(FACTOR_SIZES))
    if n > grid:
        raise DataError(f"dsprites: n_train + n_test = {n} exceeds the {grid} images of the factor grid")
    index = np.sort(rs.choice(grid, size=n, replace=False))
    index = index[rs.permutation(n)]
    factors = index_to_factors(index)
    return {"x": render_dsprites(factors, params.resolution)[:, None], "factors": factors.astype(np.int64)}


def build_mnist_format(params: MNISTParams, rs: np.random.RandomState) -> dict[str, np.ndarray]:
    """MNIST (50k train / 10k test of the classic split) or Fashion-MNIST (60k / 10k) subsets.

    The first ``n_train`` training and ``n_test`` test images in a seeded random order; grey
    levels as uint8 0..255, or binarised once here (``binarise``: fixed 0.5 threshold or
    Bernoulli draws with the data seed).
    """
    if params.kind == "mnist":
        from priorlab.data.mnist import load_mnist  # lazy: +3 modules, ~42 ms at import priorlab.data.registry

        raw = load_mnist(dtype="uint8")
    else:
        from priorlab.data.fashion_mnist import (  # lazy: +4 modules, ~40 ms at import priorlab.data.registry
            load_fashion_mnist)

        raw = load_fashion_mnist()
    split = {}
    for name, n in (("train", params.n_train), ("test", params.n_test)):
        x, y = raw[f"x_{name}"], raw[f"y_{name}"]
        if n > len(x):
            raise DataError(f"{params.kind}: n_{name} = {n} exceeds the {len(x)} {name} images")
        idx = rs.permutation(len(x))[:n]
        split[name] = (x[idx], np.asarray(y[idx], dtype=np.int64))
    x = np.concatenate([split["train"][0], split["test"][0]])
    if params.binarise != "none":
        from priorlab.data.mnist import binarise  # lazy: +3 modules, ~42 ms at import priorlab.data.registry

        x = binarise(x.astype(np.float32) / 255.0, params.binarise, random_state=rs).astype(np.uint8)
    return {"x": x[:, None], "labels": np.concatenate([split["train"][1], split["test"][1]])}


def _smiley_data(params: SmileyParams) -> GroundTruthData:
    from priorlab.data.smiley import SmileyData  # lazy: scipy, ~225 ms at import priorlab.data.registry

    return SmileyData()


def _dsprites_data(params: DSpritesParams) -> GroundTruthData:
    from priorlab.data.dsprites import DSprites  # lazy: +1 module, ~27 ms at import priorlab.data.registry

    return DSprites(resolution=params.resolution)


def _grey_levels(params: MNISTParams) -> int:
    return 255 if params.binarise == "none" else 1


MNIST_FORMAT = DatasetBuilder(build_mnist_format, observation_kind="image", version="1", num_classes=10,
                              pixel_max=_grey_levels)  # kinds mnist and fashion_mnist

def build_sparse_synthetic(params, rs: np.random.RandomState) -> dict[str, np.ndarray]:
    """Paper 003 §2.2: z ~ N(0, [[1, ρ], [ρ, 1]]), x = f(z) + noise (f of eq. 9); the true z as ``sources``."""
    n = params.n_train + params.n_test
    chol = np.linalg.cholesky(np.array([[1.0, params.rho], [params.rho, 1.0]]))
    z = rs.standard_normal((n, N_FACTORS)) @ chol.T
    x = sparse_map(z) + params.noise_std * rs.standard_normal((n, N_FEATURES))
    return {"x": x.astype(np.float32), "sources": z}


SMILEY = DatasetBuilder(build_smiley, observation_kind="image", version="1", ground_truth=_smiley_data)
DSPRITES = DatasetBuilder(build_dsprites, observation_kind="image", version="1", ground_truth=_dsprites_data)
SPARSE_SYNTHETIC = DatasetBuilder(build_sparse_synthetic, observation_kind="vector", version="1")


def build_bars(params, rs: np.random.RandomState) -> dict[str, np.ndarray]:
    """Paper 000's bars test: float32 vectors [R²] (real intensities plus Gaussian noise: uint8 images
    would quantise them and clip the noise at 0; the sparse-coding models see flat pixels anyway);
    the true bar intensities [N, 2R] (0 = absent) as ``sources``."""
    from priorlab.data.bars import make_bars  # lazy: scipy, ~461 ms at import priorlab.data.registry

    d = make_bars(params.n_train + params.n_test, params.R, p=params.bar_prob or None, intensity=params.intensity,
                  mu=params.slab_mu, sigma_pr=params.slab_std, rule={"occlusion": "max", "linear": "sum"}[params.variant],
                  noise_std=params.noise_std, random_state=rs)
    return {"x": d.Y, "sources": d.S}


def build_image_patches(params, rs: np.random.RandomState) -> dict[str, np.ndarray]:
    """Natural-image patches of scikit-learn's sample photographs (:mod:`priorlab.data.patches`)."""
    return {"x": sample_patches(params.n_train + params.n_test, params.patch_size, rs, params.preprocess,
                                tuple(params.dog_sigmas))}


BARS = DatasetBuilder(build_bars, observation_kind="vector", version="1")
IMAGE_PATCHES = DatasetBuilder(build_image_patches, observation_kind="vector", version="1")


def _take_rows(kind: str, n_rows: int, params, rs: np.random.RandomState) -> np.ndarray:
    """A seeded choice of ``n_train + n_test`` of ``n_rows`` rows (training rows first); one error if too few."""
    n = params.n_train + params.n_test
    if n > n_rows:
        raise DataError(f"{kind}: n_train + n_test = {n} but the data have {n_rows} rows; lower them")
    return rs.permutation(n_rows)[:n]


def build_movielens(params, rs: np.random.RandomState) -> dict[str, np.ndarray]:
    """Paper 003 App. C.1: binarised ratings [users, n_movies] (uint8 0/1 counts), split by users."""
    from priorlab.data.movielens import (  # lazy: +4 modules, ~45 ms at import priorlab.data.registry
        binarise_ratings, read_ratings)

    x = binarise_ratings(read_ratings(), params.n_movies, params.min_user_positives)["x"]
    return {"x": x[_take_rows("movielens", len(x), params, rs)]}


def build_pbmc(params, rs: np.random.RandomState, quantile: bool = False) -> dict[str, np.ndarray]:
    """PBMC counts round(expm1(raw) · n_counts / 1e4) with cell types as labels; ``quantile``:
    rows quantile-normalised to the training cells' mean sorted row (App. C.1)."""
    from priorlab.data import packaged  # lazy: +3 modules, ~50 ms at import priorlab.data.registry
    from priorlab.data.pbmc import (  # lazy: +4 modules, ~47 ms at import priorlab.data.registry
        SPEC, counts_from_raw, find_pbmc, quantile_normalise, quantile_reference, read_h5ad_raw)

    source = find_pbmc()
    parsed = read_h5ad_raw(packaged.read_verified_bytes(SPEC, source), str(source))
    counts, _ = counts_from_raw(parsed["raw"], parsed["n_counts"])
    rows = _take_rows(params.kind, len(counts), params, rs)
    x, labels = counts[rows], parsed["labels"][rows]
    if quantile:
        x = quantile_normalise(x, quantile_reference(x[: params.n_train])).astype(np.float32)
    return {"x": x, "labels": labels}


MOVIELENS = DatasetBuilder(build_movielens, observation_kind="counts", version="1")
PBMC = DatasetBuilder(build_pbmc, observation_kind="counts", version="1", num_classes=10)
PBMC_QUANTILE = DatasetBuilder(lambda p, rs: build_pbmc(p, rs, quantile=True), observation_kind="vector", version="1",
                               num_classes=10)


def read_file_rows(params: FileParams):
    """The file of a ``file`` data set, read (:func:`priorlab.data.files.read_observations`)."""
    from priorlab.data.files import read_observations  # lazy: +1 module, ~6 ms at import priorlab.data.registry

    return read_observations(params.path, key=params.key, layer=params.layer or None, labels=params.labels or None,
                             factors=params.factors or None)


def build_file(params: FileParams, rs: np.random.RandomState) -> dict[str, np.ndarray]:
    """``n_train + n_test`` seeded rows of the user's file, stored as its declared ``observation``."""
    data = read_file_rows(params)
    x, found = data.x, observation_kind(data.x)
    if params.observation == "vector":
        if found == "image":
            raise DataError(f"{params.path}: rows of shape {list(x.shape[1:])} are images; declare observation: image")
        x = x.astype(np.float32)
    elif params.observation == "counts" and found != "counts":
        raise DataError(f"{params.path}: observation: counts needs integer [N, G] rows, got {x.dtype} "
                        f"{list(x.shape[1:])}")
    elif params.observation == "image":
        if found != "image" or not np.issubdtype(x.dtype, np.integer) or x.min() < 0 or x.max() > params.pixel_max:
            raise DataError(f"{params.path}: observation: image needs integer pixels in [0, {params.pixel_max}] "
                            f"of shape [N, C, H, W] or [N, H, W], got {x.dtype} {list(x.shape)}")
        x = x.astype(np.uint8)
    rows = _take_rows(params.path, len(x), params, rs)
    out = {"x": x[rows]}
    if data.labels is not None:
        out["labels"] = data.labels[rows]
    if data.factors is not None:
        out["factors"] = data.factors[rows]
    return out


def _file_ground_truth(params: FileParams) -> GroundTruthData | None:
    """The test rows of a file with ``factors``, as a table (None without factors)."""
    if not params.factors:
        return None
    arrays = build_file(params, np.random.RandomState(params.seed))  # the data stage's draw (seeded)
    test = slice(params.n_train, None)
    return TableGroundTruth(arrays["factors"][test], arrays["x"][test], f"{params.path} (test rows)")


def _file_classes(params: FileParams) -> int | None:
    if not params.labels:
        return None
    data = read_file_rows(params)
    return len(data.class_names) if data.class_names is not None else int(data.labels.max(initial=-1)) + 1


FILE = DatasetBuilder(build_file, observation_kind=lambda p: p.observation, version="1",
                      ground_truth=_file_ground_truth, num_classes=_file_classes, pixel_max=lambda p: p.pixel_max)


def dataset_builder(params: DatasetParams) -> DatasetBuilder:
    """The builder of a ``datasets:`` entry; a clear error for an unknown kind or a wrong class."""
    return builder_for(params, DATASET_PARAMS, "data set")
