"""The Smiley bow tie template and the MATLAB resizing that scales it.

The authors' generator (paper 002, supplement E; ``make_smile_dataset.m`` and
``add_bowtie.m`` of the released code) builds the template once as
``round(mat2gray(imresize(sum(imread('bowtie.png'), 3), [11 17])))`` and, per
sample, draws ``round(mat2gray(imresize(template, [h w])))`` with fractional
``h = 5 + 2 v4`` and ``w = 12 + 3 v3``.  This module holds that 11 x 17 binary
template (so the data set generates without the PNG) and a numpy port of the
MATLAB pieces involved:

* ``imresize`` for double images with the default bicubic method: Keys cubic
  kernel (a = -0.5), coordinate map ``u = x / s + (1 - 1 / s) / 2``, kernel
  widened by ``1 / s`` when shrinking (antialiasing), symmetric padding,
  weights normalised to sum to one, the dimension with the smaller scale
  resized first.
* Fractional output sizes: the output has ``ceil(size)`` pixels and the scale
  is ``ceil(size) / input_size``.  This was established against the authors'
  published test set (every one of its 10,016 bow tie images is reproduced
  exactly under this rule; using the fractional size as the scale matches
  under 5 % of them).
* ``mat2gray`` (min-max rescaling to [0, 1]) and MATLAB ``round`` (half away
  from zero, unlike numpy's half-to-even).
"""

from __future__ import annotations

import functools

import numpy as np

#: The authors' 11 x 17 binary bow tie ("⋈"): two triangles whose bases are the
#: left and right edges and whose tips meet in the centre ("#" = 1).
_TEMPLATE_ROWS = (
    ".................",
    "###...........###",
    "#####.......#####",
    "#######...#######",
    "#################",
    "#################",
    "#################",
    "#######...#######",
    "#####.......#####",
    "###...........###",
    ".................",
)

BOWTIE_TEMPLATE: np.ndarray = np.array(
    [[char == "#" for char in row] for row in _TEMPLATE_ROWS], dtype=np.uint8
)
BOWTIE_TEMPLATE.setflags(write=False)

TEMPLATE_SHAPE: tuple[int, int] = (11, 17)


def matlab_round(x) -> np.ndarray:
    """MATLAB ``round``: halves go away from zero (``round(2.5) = 3``, ``round(-2.5) = -3``)."""
    x = np.asarray(x, dtype=np.float64)
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def cubic_kernel(x) -> np.ndarray:
    """Keys cubic convolution kernel with a = -0.5 (MATLAB ``imresize`` 'bicubic')."""
    ax = np.abs(np.asarray(x, dtype=np.float64))
    ax2 = ax * ax
    ax3 = ax2 * ax
    inner = (1.5 * ax3 - 2.5 * ax2 + 1.0) * (ax <= 1.0)
    outer = (-0.5 * ax3 + 2.5 * ax2 - 4.0 * ax + 2.0) * ((ax > 1.0) & (ax <= 2.0))
    return inner + outer


def resize_weights(
    in_length: int, out_length: int, scale: float, antialiasing: bool = True
) -> np.ndarray:
    """Dense ``[out_length, in_length]`` bicubic resampling matrix (MATLAB ``contributions``).

    Output pixel ``x`` (1-indexed) samples input coordinate
    ``u = x / scale + (1 - 1 / scale) / 2``; when shrinking with antialiasing the
    kernel is ``scale * k(scale * d)`` with width ``4 / scale``.  Taps outside
    the input are mirrored (symmetric padding) and each row is normalised to 1.
    """
    if in_length < 1 or out_length < 1:
        raise ValueError(f"lengths must be positive, got in={in_length}, out={out_length}")
    if not scale > 0:
        raise ValueError(f"scale must be positive, got {scale}")
    kernel_width = 4.0
    if scale < 1.0 and antialiasing:
        def kernel(d):
            return scale * cubic_kernel(scale * d)

        kernel_width /= scale
    else:
        kernel = cubic_kernel
    x = np.arange(1, out_length + 1, dtype=np.float64)
    u = x / scale + 0.5 * (1.0 - 1.0 / scale)
    left = np.floor(u - kernel_width / 2.0)
    taps = int(np.ceil(kernel_width)) + 2
    ind = left[:, None] + np.arange(taps)[None, :]
    weights = kernel(u[:, None] - ind)
    weights = weights / weights.sum(axis=1, keepdims=True)
    mirror = np.concatenate([np.arange(in_length), np.arange(in_length - 1, -1, -1)])
    src = mirror[np.mod(ind - 1, 2 * in_length).astype(np.int64)]
    matrix = np.zeros((out_length, in_length))
    rows = np.repeat(np.arange(out_length), taps)
    np.add.at(matrix, (rows, src.ravel()), weights.ravel())
    return matrix


def output_length(size: float) -> int:
    """Pixels MATLAB ``imresize`` produces for a (possibly fractional) requested size."""
    size = float(size)
    if not np.isfinite(size) or size <= 0:
        raise ValueError(f"output size must be positive and finite, got {size}")
    return int(np.ceil(size))


def imresize(image, output_shape, antialiasing: bool = True) -> np.ndarray:
    """Bicubic MATLAB-compatible ``imresize(image, [rows cols])`` of a 2-D double image.

    Fractional sizes give ``ceil(size)`` pixels at scale ``ceil(size) / input``
    (see the module docstring).  Returns float64; no clipping (cubic overshoot
    is kept, as for MATLAB double input).
    """
    a = np.asarray(image, dtype=np.float64)
    if a.ndim != 2 or min(a.shape) < 1:
        raise ValueError(f"image must be a non-empty 2-D array, got shape {a.shape}")
    if len(output_shape) != 2:
        raise ValueError(f"output_shape must be (rows, cols), got {output_shape!r}")
    n_rows, n_cols = output_length(output_shape[0]), output_length(output_shape[1])
    scale_rows, scale_cols = n_rows / a.shape[0], n_cols / a.shape[1]
    w_rows = resize_weights(a.shape[0], n_rows, scale_rows, antialiasing)
    w_cols = resize_weights(a.shape[1], n_cols, scale_cols, antialiasing)
    if scale_rows <= scale_cols:  # MATLAB resizes the smaller-scale dimension first
        return (w_rows @ a) @ w_cols.T
    return w_rows @ (a @ w_cols.T)


def mat2gray(a) -> np.ndarray:
    """MATLAB ``mat2gray``: rescale to [0, 1] by min and max (a constant array is only clipped)."""
    a = np.asarray(a, dtype=np.float64)
    lo, hi = a.min(), a.max()
    if hi == lo:
        return np.clip(a, 0.0, 1.0)
    return np.clip((a - lo) / (hi - lo), 0.0, 1.0)


def template_from_rgb(rgb) -> np.ndarray:
    """Derive the binary template from the authors' ``bowtie.png`` pixels ``[H, W, 3]``.

    ``round(mat2gray(imresize(sum(rgb, 3), [11 17])))`` as in ``make_smile_dataset.m``.
    """
    rgb = np.asarray(rgb)
    if rgb.ndim != 3 or rgb.shape[2] < 3:
        raise ValueError(f"expected an RGB image [H, W, 3], got shape {rgb.shape}")
    summed = rgb[..., :3].astype(np.float64).sum(axis=2)
    return matlab_round(mat2gray(imresize(summed, TEMPLATE_SHAPE))).astype(np.uint8)


@functools.lru_cache(maxsize=None)
def _resized_bowtie_cached(n_rows: int, n_cols: int) -> np.ndarray:
    out = matlab_round(mat2gray(imresize(BOWTIE_TEMPLATE, (n_rows, n_cols)))).astype(bool)
    out.setflags(write=False)
    return out


def resized_bowtie(height: float, width: float) -> np.ndarray:
    """Binary bow tie of ``ceil(height) x ceil(width)`` pixels (``add_bowtie.m``).

    ``round(mat2gray(imresize(template, [height width])))``; the result only
    depends on the pixel counts, so it is cached per size.  Read-only bool array.
    """
    return _resized_bowtie_cached(output_length(height), output_length(width))
