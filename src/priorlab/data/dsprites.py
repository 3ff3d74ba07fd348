"""Procedural dSprites: binary 2D shapes on a full factorial grid of factors.

The original dSprites file (Matthey et al. 2017, https://github.com/deepmind/dsprites-dataset)
is not available offline, so the images are rendered analytically.  The
factor grid follows the original exactly, in its index order (the constant
colour factor is dropped):

=============  ======  ==========================================
factor         values  original ``latents_values``
=============  ======  ==========================================
shape          3       square, ellipse, heart
scale          6       ``np.linspace(0.5, 1, 6)``
orientation    40      ``np.linspace(0, 2 * np.pi, 40)`` (0 and 2π both present)
posX           32      ``np.linspace(0, 1, 32)``
posY           32      ``np.linspace(0, 1, 32)``
=============  ======  ==========================================

Geometry (in image units, the image being the unit square, pixel ``(r, c)``
centred at ``((c + 0.5) / res, (r + 0.5) / res)``; x to the right, y down):

* at scale 1 every shape spans ``SPRITE_SPAN = 1/3`` of the image side along
  its longest axis at orientation 0: a square of side ``SPRITE_SPAN``, an
  ellipse with axes ``SPRITE_SPAN`` and ``SPRITE_SPAN / 2`` (aspect 2:1) and the
  implicit heart ``(x² + y² - 1)³ - x² y³ <= 0`` (y up), shifted so that its
  bounding box is centred and scaled so that its longer side is ``SPRITE_SPAN``;
* a shape is rotated counter-clockwise (as seen on screen) by the orientation
  about its centre and multiplied by the scale;
* ``posX, posY ∈ [0, 1]`` map affinely to centres in
  ``[POSITION_MARGIN, 1 - POSITION_MARGIN]`` (posY grows downwards), where the
  margin is the largest circumradius of any shape at scale 1 plus one pixel of
  the coarsest supported resolution (``MIN_RESOLUTION = 16``), so no sprite
  reaches the outermost pixel ring at any factor value and resolution.

A pixel is on iff its centre satisfies the shape inequality; rendering works
on a fixed square window around each sprite, vectorised over chunks of sprites.
"""

from __future__ import annotations

import math

import numpy as np

from priorlab.data.base import GroundTruthData

FACTOR_NAMES: tuple[str, ...] = ("shape", "scale", "orientation", "posX", "posY")
FACTOR_SIZES: tuple[int, ...] = (3, 6, 40, 32, 32)
SHAPE_NAMES: tuple[str, ...] = ("square", "ellipse", "heart")
NUM_IMAGES: int = int(np.prod(FACTOR_SIZES))

#: The continuous value of each factor level, as in the original ``latents_values``.
FACTOR_VALUES: tuple[np.ndarray, ...] = (
    np.arange(3, dtype=np.float64),
    np.linspace(0.5, 1.0, 6),
    np.linspace(0.0, 2.0 * np.pi, 40),
    np.linspace(0.0, 1.0, 32),
    np.linspace(0.0, 1.0, 32),
)

MIN_RESOLUTION: int = 16
SPRITE_SPAN: float = 1.0 / 3.0
ELLIPSE_ASPECT: float = 2.0
DEFAULT_CHUNK_SIZE: int = 4096


def _heart_value(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Implicit heart ``(x² + y² - 1)³ - x² y³``: negative inside, y pointing up."""
    r2m1 = x * x + y * y - 1.0
    return r2m1 * r2m1 * r2m1 - x * x * y * y * y


def heart_boundary(num_angles: int = 20001, iterations: int = 80) -> np.ndarray:
    """Boundary points ``[num_angles, 2]`` of the canonical implicit heart.

    The heart is star-shaped about the origin (``f(0) = -1 < 0`` and ``f`` has
    one sign change along every ray in ``[0, 2]``; checked in the tests), so the
    boundary radius on each ray is found by vectorised bisection.
    """
    theta = np.linspace(0.0, 2.0 * np.pi, num_angles, endpoint=False)
    c, s = np.cos(theta), np.sin(theta)
    lo = np.zeros_like(theta)
    hi = np.full_like(theta, 2.0)
    for _ in range(iterations):
        mid = 0.5 * (lo + hi)
        inside = _heart_value(mid * c, mid * s) <= 0.0
        lo = np.where(inside, mid, lo)
        hi = np.where(inside, hi, mid)
    r = 0.5 * (lo + hi)
    return np.stack([r * c, r * s], axis=1)


def _heart_frame() -> tuple[float, float, float, float]:
    """Bounding-box centre, longer bbox side and circumradius (about that centre) of the heart."""
    pts = heart_boundary()
    lo, hi = pts.min(axis=0), pts.max(axis=0)
    centre = 0.5 * (lo + hi)
    extent = float(np.max(hi - lo))
    circum = float(np.max(np.linalg.norm(pts - centre, axis=1)))
    return float(centre[0]), float(centre[1]), extent, circum


HEART_CENTRE_X, HEART_CENTRE_Y, HEART_EXTENT, _HEART_CIRCUM = _heart_frame()

#: Circumradius of each shape about its centre, in units of ``SPRITE_SPAN`` at scale 1.
#: The heart's value is slightly enlarged to cover the bisection/sampling error.
SHAPE_CIRCUMRADII: tuple[float, ...] = (
    math.sqrt(0.5),
    0.5,
    _HEART_CIRCUM / HEART_EXTENT * 1.001,
)
POSITION_MARGIN: float = SPRITE_SPAN * max(SHAPE_CIRCUMRADII) + 1.0 / MIN_RESOLUTION


# --------------------------------------------------------------------------- factors


def _check_factors(factors) -> np.ndarray:
    f = np.asarray(factors)
    if f.ndim != 2 or f.shape[1] != len(FACTOR_SIZES):
        raise ValueError(f"factors must have shape [N, {len(FACTOR_SIZES)}], got {f.shape}")
    if f.dtype == np.bool_ or not np.issubdtype(f.dtype, np.integer):
        raise ValueError(f"factors must be an integer array, got dtype {f.dtype}")
    f = f.astype(np.int64, copy=False)
    for k, (name, size) in enumerate(zip(FACTOR_NAMES, FACTOR_SIZES)):
        col = f[:, k]
        if col.size and (col.min() < 0 or col.max() >= size):
            raise ValueError(
                f"factor '{name}' out of range [0, {size - 1}]: got values in [{col.min()}, {col.max()}]"
            )
    return f


def factors_to_index(factors) -> np.ndarray:
    """Flat dSprites index (row-major over ``FACTOR_SIZES``) of int factors ``[N, 5]``."""
    f = _check_factors(factors)
    strides = np.cumprod((FACTOR_SIZES[1:] + (1,))[::-1])[::-1].astype(np.int64)
    return f @ strides


def index_to_factors(index) -> np.ndarray:
    """Int factors ``[N, 5]`` of flat dSprites indices ``[N]`` (inverse of ``factors_to_index``)."""
    idx = np.asarray(index)
    if idx.ndim != 1:
        raise ValueError(f"index must be a 1-D array, got shape {idx.shape}")
    if idx.dtype == np.bool_ or not np.issubdtype(idx.dtype, np.integer):
        raise ValueError(f"index must be an integer array, got dtype {idx.dtype}")
    if idx.size and (idx.min() < 0 or idx.max() >= NUM_IMAGES):
        raise ValueError(f"index out of range [0, {NUM_IMAGES - 1}]: got values in [{idx.min()}, {idx.max()}]")
    return np.stack(np.unravel_index(idx.astype(np.int64), FACTOR_SIZES), axis=1).astype(np.int64)


def full_grid_factors() -> np.ndarray:
    """All ``NUM_IMAGES`` factor vectors ``[737280, 5]`` in dSprites index order."""
    return index_to_factors(np.arange(NUM_IMAGES, dtype=np.int64))


def factor_values(factors) -> np.ndarray:
    """Continuous factor values ``float64 [N, 5]`` (shape id, scale, angle in rad, posX, posY)."""
    f = _check_factors(factors)
    return np.stack([FACTOR_VALUES[k][f[:, k]] for k in range(len(FACTOR_SIZES))], axis=1)


def sprite_centres(factors) -> np.ndarray:
    """Sprite centres ``[N, 2]`` as (x, y) in image units (y down), from posX/posY."""
    v = factor_values(factors)
    return POSITION_MARGIN + v[:, 3:5] * (1.0 - 2.0 * POSITION_MARGIN)


# --------------------------------------------------------------------------- rendering


def _check_resolution(resolution) -> int:
    if isinstance(resolution, bool) or not isinstance(resolution, (int, np.integer)):
        raise ValueError(f"resolution must be an int, got {type(resolution).__name__}")
    if resolution < MIN_RESOLUTION:
        raise ValueError(
            f"resolution {resolution} unsupported: must be >= {MIN_RESOLUTION} "
            "(below it sprites can no longer be kept off the border)"
        )
    return int(resolution)


def _render_chunk(vals: np.ndarray, res: int, window: int) -> np.ndarray:
    """Render one chunk of factor values ``[n, 5]`` into ``uint8 [n, res, res]``."""
    n = vals.shape[0]
    out = np.zeros((n, res, res), dtype=np.uint8)
    if n == 0:
        return out
    shape_id = vals[:, 0].astype(np.int64)
    size = vals[:, 1] * SPRITE_SPAN  # span of the sprite in image units
    cos_t, sin_t = np.cos(vals[:, 2]), np.sin(vals[:, 2])
    cx = POSITION_MARGIN + vals[:, 3] * (1.0 - 2.0 * POSITION_MARGIN)
    cy = POSITION_MARGIN + vals[:, 4] * (1.0 - 2.0 * POSITION_MARGIN)

    # top-left pixel of a window x window box centred on the sprite
    c0 = np.clip(np.floor(cx * res - window / 2.0).astype(np.int64), 0, res - window)
    r0 = np.clip(np.floor(cy * res - window / 2.0).astype(np.int64), 0, res - window)
    offs = np.arange(window)
    cols = c0[:, None] + offs  # [n, W]
    rows = r0[:, None] + offs  # [n, W]
    # offsets of pixel centres from the sprite centre, y pointing up, in sprite-span units
    dx = ((cols + 0.5) / res - cx[:, None]) / size[:, None]
    dy = (cy[:, None] - (rows + 0.5) / res) / size[:, None]
    # canonical coordinates q = R(-theta) d, as an outer sum rows x cols: [n, W, W]
    qu = (cos_t[:, None] * dx)[:, None, :] + (sin_t[:, None] * dy)[:, :, None]
    qv = (-sin_t[:, None] * dx)[:, None, :] + (cos_t[:, None] * dy)[:, :, None]

    mask = np.zeros((n, window, window), dtype=bool)
    sel = shape_id == 0
    if sel.any():  # square of side 1
        mask[sel] = np.maximum(np.abs(qu[sel]), np.abs(qv[sel])) <= 0.5
    sel = shape_id == 1
    if sel.any():  # ellipse with semi-axes 1/2 and 1/(2 * aspect)
        a, b = 2.0 * qu[sel], (2.0 * ELLIPSE_ASPECT) * qv[sel]
        mask[sel] = a * a + b * b <= 1.0
    sel = shape_id == 2
    if sel.any():  # implicit heart, bbox-centred, longer side 1
        x = qu[sel] * HEART_EXTENT + HEART_CENTRE_X
        y = qv[sel] * HEART_EXTENT + HEART_CENTRE_Y
        mask[sel] = _heart_value(x, y) <= 0.0

    out[np.arange(n)[:, None, None], rows[:, :, None], cols[:, None, :]] = mask
    return out


def render_dsprites(factors, resolution: int = 64, chunk_size: int = DEFAULT_CHUNK_SIZE) -> np.ndarray:
    """Render binary dSprites images ``uint8 [N, res, res]`` (values 0/1) for int factors ``[N, 5]``.

    Deterministic; works in chunks of ``chunk_size`` sprites to bound memory.
    """
    f = _check_factors(factors)
    res = _check_resolution(resolution)
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, (int, np.integer)) or chunk_size < 1:
        raise ValueError(f"chunk_size must be a positive int, got {chunk_size!r}")
    # window covering the largest sprite (scale 1) plus two pixels each side
    window = min(res, int(math.ceil(2.0 * SPRITE_SPAN * max(SHAPE_CIRCUMRADII) * res)) + 4)
    vals = factor_values(f)
    out = np.empty((f.shape[0], res, res), dtype=np.uint8)
    for start in range(0, f.shape[0], int(chunk_size)):
        stop = min(start + int(chunk_size), f.shape[0])
        out[start:stop] = _render_chunk(vals[start:stop], res, window)
    return out


class DSprites(GroundTruthData):
    """Procedural dSprites as ground-truth data: 5 factors, ``(1, res, res)`` binary images."""

    factor_names = FACTOR_NAMES

    def __init__(self, resolution: int = 64) -> None:
        self.resolution = _check_resolution(resolution)

    @property
    def factor_sizes(self) -> tuple[int, ...]:
        return FACTOR_SIZES

    @property
    def observation_shape(self) -> tuple[int, ...]:
        return (1, self.resolution, self.resolution)

    def sample_observations_from_factors(self, factors: np.ndarray, random_state) -> np.ndarray:
        """Float32 0/1 images ``[N, 1, res, res]``; rendering is deterministic, ``random_state`` is unused."""
        imgs = render_dsprites(factors, self.resolution)
        return imgs[:, None, :, :].astype(np.float32)
