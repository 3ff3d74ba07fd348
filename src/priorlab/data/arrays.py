"""The user's own arrays checked as observations: what the public API (:mod:`priorlab.estimator`) and the
``priorlab fit`` command train on.

Accepted inputs: NumPy arrays, torch tensors, pandas DataFrames (numeric columns), SciPy sparse
matrices and AnnData objects (``X``, or one of its ``layers``, as scvi-tools users pass counts).  Rows
are observations.  The observation kind follows the array, as the stored data sets of
:mod:`priorlab.data.store` have it: ``[N, C, H, W]`` (or ``[N, H, W]``: one channel) *images*,
``[N, G]`` integer *counts*, ``[N, G]`` real *vectors*.  Integer images with values above 1 are read
as 8-bit pixels (divided by 255); everything else enters the model as float32, unchanged.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np

from priorlab.errors import DataError

OBSERVATION_KINDS = ("image", "vector", "counts")


def as_array(x, layer: str | None = None, what: str = "X") -> np.ndarray:
    """``x`` as a NumPy array with one row per observation (a copy only where a conversion needs one).
    ``layer``: the AnnData layer holding the observations (default: ``X``)."""
    anndata = sys.modules.get("anndata")  # an AnnData object means its package is imported already
    if anndata is not None and isinstance(x, anndata.AnnData):
        if layer is not None and layer not in x.layers:
            raise DataError(f"{what}: AnnData has no layer {layer!r}; layers: {', '.join(x.layers) or 'none'}")
        x = x.X if layer is None else x.layers[layer]
    elif layer is not None:
        raise DataError(f"{what}: layer={layer!r} applies to AnnData input, not to {type(x).__name__}")
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(x, torch.Tensor):
        return x.detach().cpu().numpy()
    pandas = sys.modules.get("pandas")
    if pandas is not None and isinstance(x, (pandas.DataFrame, pandas.Series)):
        frame = x.to_frame() if isinstance(x, pandas.Series) else x
        numeric = pandas.api.types.is_numeric_dtype  # (booleans count as numeric)
        bad = [str(c) for c, dt in frame.dtypes.items() if not numeric(dt)]
        if bad:
            raise DataError(f"{what}: column {bad[0]!r} is not numeric (pass the numeric columns only, "
                            "or name it as the labels)")
        return frame.to_numpy()
    scipy_sparse = sys.modules.get("scipy.sparse")
    if scipy_sparse is not None and scipy_sparse.issparse(x):
        return np.asarray(x.toarray())
    return np.asarray(x)


def observation_kind(x: np.ndarray) -> str:
    """``image`` for ``[N, C, H, W]``, ``counts`` for integer ``[N, G]``, ``vector`` for real ``[N, G]``."""
    if x.ndim == 4:
        return "image"
    if x.ndim == 2:
        return "counts" if np.issubdtype(x.dtype, np.integer) else "vector"
    raise DataError(f"observations must be [N, G] vectors or counts, or [N, C, H, W] / [N, H, W] images; "
                    f"got an array of shape {list(x.shape)}")


def observations(x, layer: str | None = None) -> np.ndarray:
    """The observations of ``x`` checked: numeric, finite, at least one row; ``[N, H, W]`` images gain a
    channel axis; booleans become uint8."""
    arr = as_array(x, layer)
    if arr.dtype == bool:
        arr = arr.astype(np.uint8)
    if not np.issubdtype(arr.dtype, np.number):
        raise DataError(f"X: observations must be numeric, got dtype {arr.dtype}")
    if arr.ndim == 3:
        arr = arr[:, None]
    observation_kind(arr)  # the shape check
    if len(arr) == 0:
        raise DataError("X: no observations (0 rows)")
    if np.issubdtype(arr.dtype, np.floating) and not np.isfinite(arr).all():
        bad = int(np.argwhere(~np.isfinite(arr.reshape(len(arr), -1)))[0, 0])
        raise DataError(f"X: row {bad} holds NaN or infinite values")
    if np.issubdtype(arr.dtype, np.integer) and arr.ndim == 2 and arr.min() < 0:
        raise DataError(f"X: integer observations are read as counts, but the smallest is {arr.min()}")
    return arr if arr.flags.writeable else arr.copy()  # (torch shares the memory of writable arrays only)


def pixel_max(x: np.ndarray) -> float:
    """The divisor that brings images into [0, 1]: 255 for integer pixels above 1, else 1."""
    return 255.0 if x.ndim == 4 and np.issubdtype(x.dtype, np.integer) and x.max() > 1 else 1.0


@dataclass(frozen=True)
class Encoding:
    """How a data set's stored rows become model input: its observation kind, row shape and pixel
    divisor.  Saved with a fitted model, so that new rows are prepared as its training rows were."""

    kind: str
    shape: tuple[int, ...]
    pixel_max: float = 1.0

    @classmethod
    def of(cls, x: np.ndarray) -> Encoding:
        return cls(observation_kind(x), tuple(int(s) for s in x.shape[1:]), pixel_max(x))

    def check(self, x: np.ndarray, what: str = "X") -> None:
        if tuple(x.shape[1:]) != self.shape:
            raise DataError(f"{what}: rows of shape {list(x.shape[1:])}; the model was fitted on rows of shape "
                            f"{list(self.shape)}")

    def record(self) -> dict:
        return {"kind": self.kind, "shape": list(self.shape), "pixel_max": self.pixel_max}

    def manifest(self) -> dict:
        out = {"observation_kind": self.kind, "observation_shape": list(self.shape)}
        if self.kind == "image":
            out["pixel_max"] = self.pixel_max
        return out


def check_support(x: np.ndarray, encoding: Encoding, likelihood: str, what: str = "X") -> None:
    """Fail when the observations lie outside the support of ``likelihood``: the Bernoulli's [0, 1] (after
    the pixel divisor), the multinomial's counts (integers >= 0)."""
    if likelihood == "bernoulli":
        lo, hi = float(x.min()) / encoding.pixel_max, float(x.max()) / encoding.pixel_max
        if lo < 0 or hi > 1:
            raise DataError(f"{what}: values in [{lo:g}, {hi:g}], outside [0, 1], for the Bernoulli likelihood; "
                            "rescale them to [0, 1] or choose likelihood='gaussian'")
    elif likelihood == "multinomial":
        if x.min() < 0 or (np.issubdtype(x.dtype, np.floating) and not np.array_equal(x, np.round(x))):
            raise DataError(f"{what}: the multinomial likelihood needs counts (integers >= 0); these hold "
                            f"{'negative' if x.min() < 0 else 'non-integer'} values; choose likelihood='gaussian'")


def class_codes(labels, n: int, what: str = "labels") -> tuple[np.ndarray, list[str] | None]:
    """Integer class codes ``[n]`` of ``labels`` (integers as given; other values numbered in sorted
    order, their names returned)."""
    y = as_array(labels, what=what).reshape(-1)
    if len(y) != n:
        raise DataError(f"{what}: {len(y)} values for {n} observations")
    if np.issubdtype(y.dtype, np.integer):
        if y.min(initial=0) < 0:
            raise DataError(f"{what}: integer classes must be >= 0, got {y.min()}")
        return y.astype(np.int64), None
    names, codes = np.unique(y.astype(str), return_inverse=True)
    return codes.astype(np.int64), [str(v) for v in names]
