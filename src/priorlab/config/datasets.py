"""``datasets:`` entries: a tagged union on ``kind`` (registry ``DATASET_PARAMS``)."""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field
from typing import Literal

from priorlab.config.checks import ParamsError, _non_negative, _one_of, _positive


@dataclass(frozen=True)
class DatasetParams:
    """One data set built by the ``data`` stage (a ``datasets:`` entry).

    Data set kinds subclass this with their own settings and register their name in
    ``DATASET_PARAMS`` (the one registry of data sets); an entry is parsed into the class of its
    ``kind``, which names its :class:`~priorlab.data.registry.DatasetBuilder` in ``BUILDER``.
    """

    kind: str
    n_train: int
    n_test: int
    seed: int = 0
    normalise: Literal["none", "l2"] = "none"  # "l2": unit L2 norm per observation (VSC authors' Smiley)

    def check(self, key: str) -> None:
        _one_of(f"{key}.kind", self.kind, tuple(DATASET_PARAMS))
        _positive(f"{key}.n_train", self.n_train)
        _positive(f"{key}.n_test", self.n_test)
        _non_negative(f"{key}.seed", self.seed)


@dataclass(frozen=True)
class SmileyParams(DatasetParams):
    """Smiley faces (VSC paper, supplement E)."""
    BUILDER: typing.ClassVar[str] = "priorlab.data.registry:SMILEY"

    presence_prob: float = 0.5  # probability of each of the 4 attributes

    def check(self, key: str) -> None:
        super().check(key)
        if not 0.0 < self.presence_prob < 1.0:
            raise ParamsError(f"{key}.presence_prob must be in (0, 1), got {self.presence_prob}")


@dataclass(frozen=True)
class DSpritesParams(DatasetParams):
    """Procedural dSprites: points of the full factor grid."""
    BUILDER: typing.ClassVar[str] = "priorlab.data.registry:DSPRITES"

    resolution: int = 32  # 64 (original) or 32 (cpu variant)

    def check(self, key: str) -> None:
        super().check(key)
        _one_of(f"{key}.resolution", self.resolution, (32, 64))


@dataclass(frozen=True)
class MNISTParams(DatasetParams):
    """MNIST-format images with class labels: kinds ``mnist`` and ``fashion_mnist``."""
    BUILDER: typing.ClassVar[str] = "priorlab.data.registry:MNIST_FORMAT"

    binarise: Literal["none", "threshold", "stochastic"] = "none"  # keep grey levels, or binarise once


@dataclass(frozen=True)
class SparseSyntheticParams(DatasetParams):
    """The sparse VAE's synthetic benchmark (paper 003, §2.2): 7 features of 2 correlated factors."""
    BUILDER: typing.ClassVar[str] = "priorlab.data.registry:SPARSE_SYNTHETIC"

    rho: float = 0.0  # correlation of the two factors
    noise_std: float = 0.5  # the released code's level (the text's σ² = 0.5 is std 0.707)

    def check(self, key: str) -> None:
        super().check(key)
        if not -1.0 < self.rho < 1.0:
            raise ParamsError(f"{key}.rho must be in (-1, 1), got {self.rho}")
        _non_negative(f"{key}.noise_std", self.noise_std)


DATASET_PARAMS: dict[str, type[DatasetParams]] = {
    "smiley": SmileyParams,
    "dsprites": DSpritesParams,
    "mnist": MNISTParams,
    "fashion_mnist": MNISTParams,
    "sparse_synthetic": SparseSyntheticParams,
}
"""``kind`` → its parameter class (a kind's own settings are typed fields of a subclass)."""


@dataclass(frozen=True)
class BarsParams(DatasetParams):
    """The bars test (paper 000): H = 2R bars on an R x R grid, vectors [R²] (:mod:`priorlab.data.bars`)."""
    BUILDER: typing.ClassVar[str] = "priorlab.data.registry:BARS"

    R: int = 5
    variant: Literal["occlusion", "linear"] = "occlusion"  # bars combine by max, or add up
    intensity: Literal["slab", "fixed"] = "slab"  # a present bar's value: N(slab_mu, slab_std²), or 1
    slab_mu: float = 1.0
    slab_std: float = 0.25
    noise_std: float = 0.05
    bar_prob: float = 0.0  # probability of each bar (0: 2/H)

    def check(self, key: str) -> None:
        super().check(key)
        if self.R < 2:
            raise ParamsError(f"{key}.R must be >= 2, got {self.R}")
        _non_negative(f"{key}.slab_std", self.slab_std)
        _non_negative(f"{key}.noise_std", self.noise_std)
        if not 0.0 <= self.bar_prob <= 1.0:
            raise ParamsError(f"{key}.bar_prob must be in [0, 1], got {self.bar_prob}")


@dataclass(frozen=True)
class ImagePatchesParams(DatasetParams):
    """Patches of scikit-learn's two sample photographs (paper 000's natural-image experiment),
    vectors [2·patch_size²] (ON/OFF channels) or [patch_size²] (:mod:`priorlab.data.patches`)."""
    BUILDER: typing.ClassVar[str] = "priorlab.data.registry:IMAGE_PATCHES"

    patch_size: int = 8
    preprocess: Literal["dog_on_off", "centre"] = "dog_on_off"
    dog_sigmas: list[float] = field(default_factory=lambda: [1.0, 3.0])  # centre, surround (pixels)

    def check(self, key: str) -> None:
        super().check(key)
        if self.patch_size < 2:
            raise ParamsError(f"{key}.patch_size must be >= 2, got {self.patch_size}")
        if len(self.dog_sigmas) != 2 or not 0 < self.dog_sigmas[0] < self.dog_sigmas[1]:
            raise ParamsError(f"{key}.dog_sigmas must be [centre, surround] with 0 < centre < surround, "
                              f"got {self.dog_sigmas}")


DATASET_PARAMS["bars"] = BarsParams
DATASET_PARAMS["image_patches"] = ImagePatchesParams


@dataclass(frozen=True)
class MovieLensParams(DatasetParams):
    """Binarised MovieLens (paper 003, App. C.1): ratings ≥ 4 are 1, users with more than
    ``min_user_positives`` positives, the ``n_movies`` most-rated movies (G); rows are users, split
    by users (``n_train`` + ``n_test`` of them, seeded permutation)."""
    BUILDER: typing.ClassVar[str] = "priorlab.data.registry:MOVIELENS"

    n_movies: int = 300
    min_user_positives: int = 20

    def check(self, key: str) -> None:
        super().check(key)
        _positive(f"{key}.n_movies", self.n_movies)
        _non_negative(f"{key}.min_user_positives", self.min_user_positives)


@dataclass(frozen=True)
class PBMCParams(DatasetParams):
    """10x PBMC 68k reduced (scanpy; 700 cells × 765 genes): integer counts rebuilt from ``.raw``
    (kind ``pbmc``) or their quantile normalisation (kind ``pbmc_quantile``, App. C.1, reference =
    the training cells); cell types (``bulk_labels``) as class labels, never used in training."""
    BUILDER: typing.ClassVar[str] = "priorlab.data.registry:PBMC"


@dataclass(frozen=True)
class PBMCQuantileParams(PBMCParams):
    """Kind ``pbmc_quantile``: the settings of ``pbmc``; its own class because it is built into
    other observations (quantile-normalised floats, not counts)."""
    BUILDER: typing.ClassVar[str] = "priorlab.data.registry:PBMC_QUANTILE"


DATASET_PARAMS["movielens"] = MovieLensParams
DATASET_PARAMS["pbmc"] = PBMCParams
DATASET_PARAMS["pbmc_quantile"] = PBMCQuantileParams


INPUTS = "inputs"
"""The project folder of the users' own data files: a dependency of every ``data@`` stage in ``dvc.yaml``,
so a changed file rebuilds its data set (the other data sets' stages rerun too, a few seconds each, and
write the same outputs, so nothing after them reruns)."""


@dataclass(frozen=True)
class FileParams(DatasetParams):
    """Kind ``file``: observations from a file of your own under ``inputs/`` (``.npz .npy .csv .parquet
    .h5ad``, read by :mod:`priorlab.data.files`): ``n_train`` + ``n_test`` of its rows drawn with
    ``seed`` (training rows first), as the kind ``observation`` declares: ``vector`` (stored float32),
    ``counts`` (integers >= 0) or ``image`` (uint8 ``[C, H, W]`` or ``[H, W]``; ``pixel_max``: the value of
    a white pixel, 255 or 1 for binary images).  ``key`` (.npz: the array), ``layer`` (.h5ad: a layer
    instead of ``X``), ``labels`` (a column, ``obs`` column or array of class labels, never trained
    on by the unsupervised kinds) and ``factors`` (.npz: an integer array [N, K] of ground-truth factors,
    scored by MIG, DCI, SAP and modularity on the test rows) as the file needs them; ``""``: none."""
    BUILDER: typing.ClassVar[str] = "priorlab.data.registry:FILE"

    path: str = ""
    observation: Literal["vector", "counts", "image"] = "vector"
    key: str = "x"
    layer: str = ""
    labels: str = ""
    factors: str = ""
    pixel_max: int = 255

    def check(self, key: str) -> None:
        super().check(key)
        from pathlib import PurePosixPath

        parts = PurePosixPath(self.path).parts
        if len(parts) < 2 or parts[0] != INPUTS or ".." in parts:
            raise ParamsError(f"{key}.path must name a file under {INPUTS}/ (e.g. {INPUTS}/cells.h5ad: the "
                              f"data stages depend on that folder), got {self.path!r}")
        suffixes = (".npz", ".npy", ".csv", ".parquet", ".h5ad")
        if PurePosixPath(self.path).suffix.lower() not in suffixes:
            raise ParamsError(f"{key}.path: priorlab reads {', '.join(suffixes)} files, got {self.path!r}")
        _one_of(f"{key}.observation", self.observation, ("vector", "counts", "image"))
        _one_of(f"{key}.pixel_max", self.pixel_max, (1, 255))
        if self.factors and PurePosixPath(self.path).suffix.lower() != ".npz":
            raise ParamsError(f"{key}.factors: ground-truth factors are read from .npz files, not {self.path!r}")


DATASET_PARAMS["file"] = FileParams
