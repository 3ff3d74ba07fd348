"""The Smiley sparse data set (paper 002, supplement E).

32 x 32 binary smileys: a filled head disc plus four attribute groups (bow
tie, hat, eyes, mouth), each present independently with probability 0.5 and
controlled by 4, 6, 3 and 5 continuous sources drawn as 0.5 N(0, 1).  The
renderer is a vectorised port of the authors' MATLAB generator
(``make_smile_dataset.m``, ``add_bowtie.m``, ``add_eyes.m``, ``mouth.m``,
``make_hat.m``): same 1-indexed pixel grid (x = column, y = row), MATLAB
rounding, drawing order head, bow tie (added, clipped to 1), eyes (holes),
mouth (holes), hat (set to 1).  It reproduces every image of the authors'
published test set exactly (see ``tests/test_smiley.py``).

Where MATLAB would fail on extreme source values (a zero index, an empty
resize) this port clips the shape to the canvas or to one pixel instead;
such values are many standard deviations out and absent from the authors' data.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from scipy.special import ndtri

from priorlab.data.base import GroundTruthData, as_random_state
from priorlab.data.bowtie_template import matlab_round, output_length, resized_bowtie

IMAGE_SIZE = 32
HEAD_RADIUS = 10.0
HEAD_CENTRE = 16.5
SOURCE_STD = 0.5

#: Attribute groups in the column order of the authors' ``S`` and ``V`` arrays.
GROUP_NAMES: tuple[str, ...] = ("bowtie", "hat", "eyes", "mouth")

#: The 18 continuous sources in the authors' order (bow tie v1-4, hat v5-10,
#: eyes v11-13, mouth v14-18); each is 0.5 N(0, 1) and enters the geometry below.
SOURCE_NAMES: tuple[str, ...] = (
    "bowtie_x",            # centre x = 16.5 + 0.5 v
    "bowtie_y",            # centre y = 29 + v
    "bowtie_width",        # width = 12 + 3 v
    "bowtie_height",       # height = 5 + 2 v
    "hat_x",               # brim centre x = 16.5 + v
    "hat_y",               # brim centre y = 6 + v
    "hat_brim_width",      # 15 + 3 v
    "hat_brim_height",     # 2 + 2 v
    "hat_crown_width",     # 10 + 2 v
    "hat_crown_height",    # 2 + v
    "eyes_separation",     # eye centres x = 16.5 -/+ (4 + v)
    "eyes_y",              # eye centres y = 14 + v
    "eyes_radius",         # 2 + v
    "mouth_width",         # 4 + v
    "mouth_height",        # 2 + v
    "mouth_x",             # centre x = 16 + 0.5 v
    "mouth_y",             # centre y = 22 + 0.5 v
    "mouth_corners",       # corner rows cy + v and cy + 1.4 v
)

#: Which sources belong to which group.
GROUP_SOURCE_SLICES: dict[str, slice] = {
    "bowtie": slice(0, 4),
    "hat": slice(4, 10),
    "eyes": slice(10, 13),
    "mouth": slice(13, 18),
}

_NUM_SOURCES = len(SOURCE_NAMES)
_NUM_GROUPS = len(GROUP_NAMES)
_COORDS = np.arange(1, IMAGE_SIZE + 1, dtype=np.float64)  # 1-indexed pixel coordinates
_CHUNK = 8192  # samples rendered at once, bounds memory of the [n, 32, 32] temporaries


def _head() -> np.ndarray:
    dx = _COORDS[None, :] - HEAD_CENTRE
    dy = _COORDS[:, None] - HEAD_CENTRE
    return (np.sqrt(dx**2 + dy**2) <= HEAD_RADIUS).astype(np.uint8)


HEAD: np.ndarray = _head()
HEAD.setflags(write=False)


def source_presence(presence: np.ndarray) -> np.ndarray:
    """Per-source presence ``[N, 18]`` (the authors' ``S``) from group presence ``[N, 4]``."""
    presence = _check_presence(presence)
    sizes = [GROUP_SOURCE_SLICES[g].stop - GROUP_SOURCE_SLICES[g].start for g in GROUP_NAMES]
    return np.repeat(presence, sizes, axis=1)


# --------------------------------------------------------------------------- rendering


def _span(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """``[n, 32]`` mask of the 1-indexed pixels ``lo..hi`` (inclusive; empty if lo > hi)."""
    return (_COORDS[None, :] >= lo[:, None]) & (_COORDS[None, :] <= hi[:, None])


def _fill_rect(img, on, row_lo, row_hi, col_lo, col_hi, value: int) -> None:
    """Set ``img[n, row_lo:row_hi, col_lo:col_hi] = value`` (1-indexed, inclusive) where ``on``."""
    rows = _span(row_lo, row_hi) & on[:, None]
    cols = _span(col_lo, col_hi)
    mask = rows[:, :, None] & cols[:, None, :]
    img[mask] = value


def _set_pixels(img, on, rows, cols, value: int) -> None:
    """Set single 1-indexed pixels ``(rows[n], cols[n])`` where ``on`` and inside the canvas."""
    r = rows.astype(np.int64)
    c = cols.astype(np.int64)
    ok = on & (r >= 1) & (r <= IMAGE_SIZE) & (c >= 1) & (c <= IMAGE_SIZE)
    n = np.nonzero(ok)[0]
    img[n, r[ok] - 1, c[ok] - 1] = value


def _add_bowtie(img, on, v) -> None:
    """``add_bowtie.m``: resized template added at the chin, clipped to 1, cropped to 32 rows."""
    cx, cy = 16.5 + 0.5 * v[:, 0], 29.0 + v[:, 1]
    width, height = 12.0 + 3.0 * v[:, 2], 5.0 + 2.0 * v[:, 3]
    left = matlab_round(cx - width / 2.0).astype(np.int64)
    top = matlab_round(cy - height / 2.0).astype(np.int64)
    # the resized bow tie depends only on its pixel counts: render once per size
    n_rows = np.ceil(np.maximum(height, 1.0)).astype(np.int64)
    n_cols = np.ceil(np.maximum(width, 1.0)).astype(np.int64)
    idx = np.nonzero(on)[0]
    sizes = np.stack([n_rows[idx], n_cols[idx]], axis=1)
    uniq, group = np.unique(sizes, axis=0, return_inverse=True)
    for g, (h, w) in enumerate(uniq):
        members = idx[group.ravel() == g]
        a, b = np.nonzero(resized_bowtie(output_length(h), output_length(w)))
        r = top[members, None] + a[None, :]
        c = left[members, None] + b[None, :]
        ok = (r >= 1) & (r <= IMAGE_SIZE) & (c >= 1) & (c <= IMAGE_SIZE)
        n = np.broadcast_to(members[:, None], r.shape)
        img[n[ok], r[ok] - 1, c[ok] - 1] = 1


def _add_eyes(img, on, v) -> None:
    """``add_eyes.m``: discs of radius 2 + v3 at (16.5 -/+ (4 + v1), 14 + v2) set to 0."""
    idx = np.nonzero(on)[0]
    if idx.size == 0:
        return
    v = v[idx]
    radius = 2.0 + v[:, 2]
    cy = 14.0 + v[:, 1]
    for cx in (16.5 + (-4.0 - v[:, 0]), 16.5 + (4.0 + v[:, 0])):
        # only the window that any of the discs can reach is computed
        r0, r1 = _window(cy - radius, cy + radius)
        c0, c1 = _window(cx - radius, cx + radius)
        if r0 >= r1 or c0 >= c1:
            continue
        dy2 = (_COORDS[None, r0:r1] - cy[:, None]) ** 2
        dx2 = (_COORDS[None, c0:c1] - cx[:, None]) ** 2
        dist = dy2[:, :, None] + dx2[:, None, :]
        np.sqrt(dist, out=dist)
        keep = (dist > radius[:, None, None]).view(np.uint8)  # 0 inside the disc
        img[idx, r0:r1, c0:c1] &= keep


def _window(lo: np.ndarray, hi: np.ndarray) -> tuple[int, int]:
    """0-based half-open index range of the 1-indexed pixels within ``[min(lo), max(hi)]``."""
    start = int(np.clip(np.floor(lo.min()) - 1, 0, IMAGE_SIZE))
    stop = int(np.clip(np.ceil(hi.max()) + 1, 0, IMAGE_SIZE))
    return start, stop


def _add_mouth(img, on, v) -> None:
    """``mouth.m``: rectangular hole plus four corner pixels (the smile) set to 0."""
    lx, ly = 4.0 + v[:, 0], 2.0 + v[:, 1]
    px, py = 16.0 + 0.5 * v[:, 2], 22.0 + 0.5 * v[:, 3]
    stx, enx = matlab_round(px - lx / 2.0), matlab_round(px + lx / 2.0)
    sty, eny = matlab_round(py - ly / 2.0), matlab_round(py + ly / 2.0)
    _fill_rect(img, on, sty, eny, stx, enx, 0)
    sy1 = matlab_round(py + 1.0 * v[:, 4])
    sy2 = matlab_round(py + 1.4 * v[:, 4])
    _set_pixels(img, on, sy1, enx + 1, 0)
    _set_pixels(img, on, sy2, enx + 2, 0)
    _set_pixels(img, on, sy1, stx - 1, 0)
    _set_pixels(img, on, sy2, stx - 2, 0)


def _add_hat(img, on, v) -> None:
    """``make_hat.m``: brim and crown set to 1 on a canvas padded by 5 rows on top."""
    pad = 5
    cx, cy = 16.5 + v[:, 0], 6.0 + v[:, 1]
    brim_w, brim_h = 15.0 + 3.0 * v[:, 2], 2.0 + 2.0 * v[:, 3]
    crown_w, crown_h = 10.0 + 2.0 * v[:, 4], 2.0 + v[:, 5]
    stx, enx = matlab_round(cx - brim_w / 2.0), matlab_round(cx + brim_w / 2.0)
    sty = matlab_round(cy - brim_h / 2.0) + pad  # padded-canvas rows
    eny = matlab_round(cy + brim_h / 2.0) + pad
    stny = np.maximum(matlab_round(sty - crown_h), 1.0)
    _fill_rect(img, on, sty - pad, eny - pad, stx, enx, 1)
    crown_lo, crown_hi = matlab_round(cx - crown_w / 2.0), matlab_round(cx + crown_w / 2.0)
    _fill_rect(img, on, stny - pad, sty - pad, crown_lo, crown_hi, 1)


def _check_presence(presence) -> np.ndarray:
    p = np.asarray(presence)
    if p.ndim != 2 or p.shape[1] != _NUM_GROUPS:
        raise ValueError(f"presence must have shape [N, {_NUM_GROUPS}], got {p.shape}")
    if p.dtype != bool:
        if not np.all((p == 0) | (p == 1)):
            raise ValueError("presence flags must be 0/1 or boolean")
        p = p.astype(bool)
    return p


def _check_sources(sources, n: int) -> np.ndarray:
    s = np.asarray(sources, dtype=np.float64)
    if s.ndim != 2 or s.shape != (n, _NUM_SOURCES):
        raise ValueError(f"sources must have shape [{n}, {_NUM_SOURCES}], got {s.shape}")
    if not np.all(np.isfinite(s)):
        raise ValueError("sources must be finite")
    return s


def render_smiley(presence, sources) -> np.ndarray:
    """Render smileys ``uint8 [N, 32, 32]`` (values 0/1) from presence ``[N, 4]`` and sources ``[N, 18]``.

    Group order of ``presence`` is ``GROUP_NAMES``; source order ``SOURCE_NAMES``.
    Absent groups ignore their sources.  Paper 002 supplement E / authors' code.
    """
    p = _check_presence(presence)
    v = _check_sources(sources, p.shape[0])
    out = np.empty((p.shape[0], IMAGE_SIZE, IMAGE_SIZE), dtype=np.uint8)
    sl = GROUP_SOURCE_SLICES
    for start in range(0, p.shape[0], _CHUNK):
        stop = min(start + _CHUNK, p.shape[0])
        pc, vc = p[start:stop], v[start:stop]
        img = np.repeat(HEAD[None], stop - start, axis=0)
        _add_bowtie(img, pc[:, 0], vc[:, sl["bowtie"]])
        _add_eyes(img, pc[:, 2], vc[:, sl["eyes"]])
        _add_mouth(img, pc[:, 3], vc[:, sl["mouth"]])
        _add_hat(img, pc[:, 1], vc[:, sl["hat"]])
        out[start:stop] = img
    return out


def sample_smiley(
    num: int, random_state, presence_prob: float = 0.5
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Draw ``num`` smileys: ``(images uint8 [N,32,32], presence bool [N,4], sources [N,18])``.

    Each group is present with ``presence_prob``; all 18 sources are always
    drawn as 0.5 N(0, 1) (paper 002 supplement E; alpha = 0.5 in the paper).
    """
    if int(num) != num or num < 0:
        raise ValueError(f"num must be a non-negative integer, got {num}")
    if not 0.0 <= presence_prob <= 1.0:
        raise ValueError(f"presence_prob must lie in [0, 1], got {presence_prob}")
    rs = as_random_state(random_state)
    presence = rs.random_sample((int(num), _NUM_GROUPS)) < presence_prob
    sources = SOURCE_STD * rs.standard_normal((int(num), _NUM_SOURCES))
    return render_smiley(presence, sources), presence, sources


def l2_normalise(images) -> np.ndarray:
    """Divide each image by its L2 norm (the authors' preprocessing); float32, same shape."""
    x = np.asarray(images, dtype=np.float32)
    if x.ndim < 2:
        raise ValueError(f"images must be [N, ...], got shape {x.shape}")
    norms = np.sqrt(np.sum(x.reshape(x.shape[0], -1).astype(np.float64) ** 2, axis=1))
    if np.any(norms == 0):
        raise ValueError("cannot L2-normalise an all-zero image")
    return (x / norms.reshape((-1,) + (1,) * (x.ndim - 1))).astype(np.float32)


# --------------------------------------------------------------------------- authors' file


def load_smiley_mat(path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Read an authors' ``.mat`` file: ``(images uint8 [N,32,32], presence bool [N,4], sources [N,18])``.

    The file holds ``X`` (N x 1024, images flattened column-major), ``S``
    (N x 18 per-source presence, constant within a group) and ``V`` (N x 18).
    Raises ``FileNotFoundError`` for a missing file and ``ValueError`` for an
    unreadable or malformed one.
    """
    from scipy.io import loadmat

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"Smiley .mat file not found: {path}")
    try:
        mat = loadmat(str(path))
    except Exception as exc:  # scipy raises several types for corrupt files
        raise ValueError(f"cannot read Smiley .mat file {path}: {exc}") from exc
    missing = [k for k in ("X", "S", "V") if k not in mat]
    if missing:
        raise ValueError(f"{path} lacks the variable(s) {missing} (expected X, S, V)")
    x, s, v = (np.asarray(mat[k]) for k in ("X", "S", "V"))
    n = x.shape[0]
    if x.shape != (n, IMAGE_SIZE * IMAGE_SIZE):
        raise ValueError(f"{path}: X must be N x {IMAGE_SIZE * IMAGE_SIZE}, got {x.shape}")
    if s.shape != (n, _NUM_SOURCES) or v.shape != (n, _NUM_SOURCES):
        raise ValueError(f"{path}: S and V must be {n} x {_NUM_SOURCES}, got {s.shape}, {v.shape}")
    if not np.all((x == 0) | (x == 1)):
        raise ValueError(f"{path}: X must be binary")
    if not np.all((s == 0) | (s == 1)):
        raise ValueError(f"{path}: S must be binary")
    firsts = [GROUP_SOURCE_SLICES[g].start for g in GROUP_NAMES]
    presence = s[:, firsts].astype(bool)
    if not np.array_equal(source_presence(presence), s.astype(bool)):
        raise ValueError(f"{path}: S is not constant within each attribute group")
    # each row is one image flattened column-major: pixel (r, c) at r + 32 c
    images = x.reshape(n, IMAGE_SIZE, IMAGE_SIZE).transpose(0, 2, 1).astype(np.uint8)
    return np.ascontiguousarray(images), presence, v.astype(np.float64)


# --------------------------------------------------------------------------- ground truth


class SmileyData(GroundTruthData):
    """Smiley as ``GroundTruthData``: 4 presence flags + 18 discretised sources.

    Factor ``k < 4`` is the presence of ``GROUP_NAMES[k]`` (0/1); factor
    ``4 + j`` is source ``j`` discretised into ``n_bins`` equal-probability bins
    of 0.5 N(0, 1) and rendered at the bin's conditional median
    ``0.5 Phi^{-1}((b + 1/2) / n_bins)``.  Uniform factor sampling therefore
    matches the data set's presence probability 0.5 and the source law up to
    the discretisation.  Observations are float32 0/1 images ``[N, 1, 32, 32]``
    (normalisation, e.g. ``l2_normalise``, is the loader's job).
    """

    def __init__(self, n_bins: int = 10):
        if int(n_bins) != n_bins or n_bins < 2:
            raise ValueError(f"n_bins must be an integer >= 2, got {n_bins}")
        self.n_bins = int(n_bins)
        self.factor_names = tuple(f"{g}_present" for g in GROUP_NAMES) + SOURCE_NAMES
        self.bin_values = SOURCE_STD * ndtri((np.arange(self.n_bins) + 0.5) / self.n_bins)

    @property
    def factor_sizes(self) -> tuple[int, ...]:
        return (2,) * _NUM_GROUPS + (self.n_bins,) * _NUM_SOURCES

    @property
    def observation_shape(self) -> tuple[int, ...]:
        return (1, IMAGE_SIZE, IMAGE_SIZE)

    def _check_factors(self, factors) -> np.ndarray:
        f = np.asarray(factors)
        if f.ndim != 2 or f.shape[1] != self.num_factors:
            raise ValueError(f"factors must have shape [N, {self.num_factors}], got {f.shape}")
        if not np.issubdtype(f.dtype, np.integer):
            if not np.all(f == np.round(f)):
                raise ValueError("factors must be integers")
            f = f.astype(np.int64)
        if np.any(f < 0) or np.any(f >= np.asarray(self.factor_sizes)):
            raise ValueError(f"factor values out of range for sizes {self.factor_sizes}")
        return f

    def discretise_sources(self, sources) -> np.ndarray:
        """Bin indices ``int64 [N, 18]`` of continuous sources (the inverse of the binning above)."""
        v = np.asarray(sources, dtype=np.float64)
        if v.ndim != 2 or v.shape[1] != _NUM_SOURCES:
            raise ValueError(f"sources must have shape [N, {_NUM_SOURCES}], got {v.shape}")
        edges = SOURCE_STD * ndtri(np.arange(1, self.n_bins) / self.n_bins)
        return np.digitize(v, edges).astype(np.int64)

    def continuous_sources_from_factors(self, factors) -> np.ndarray:
        """Source values ``[N, 18]`` (bin medians) of the binned source factors."""
        f = self._check_factors(factors)
        return self.bin_values[f[:, _NUM_GROUPS:]]

    def sample_observations_from_factors(self, factors, random_state) -> np.ndarray:
        """Render ``float32 [N, 1, 32, 32]`` 0/1 images; deterministic given the factors."""
        f = self._check_factors(factors)
        presence = f[:, :_NUM_GROUPS].astype(bool)
        images = render_smiley(presence, self.bin_values[f[:, _NUM_GROUPS:]])
        return images[:, None].astype(np.float32)
