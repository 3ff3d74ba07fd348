"""Tests for the procedural dSprites renderer (priorlab.data.dsprites)."""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch

from priorlab.data import dsprites as ds
from priorlab.data.dsprites import (
    FACTOR_SIZES,
    NUM_IMAGES,
    DSprites,
    factors_to_index,
    full_grid_factors,
    index_to_factors,
    render_dsprites,
)


def _grid(**fixed) -> np.ndarray:
    """Factor rows over the product of the given per-factor value lists."""
    lists = [np.atleast_1d(fixed.get(n, [0])) for n in ds.FACTOR_NAMES]
    mesh = np.meshgrid(*lists, indexing="ij")
    return np.stack([m.ravel() for m in mesh], axis=1).astype(np.int64)


def _reference_render(factors: np.ndarray, res: int) -> np.ndarray:
    """Brute-force renderer over the whole image with explicit rotation matrices."""
    v = ds.factor_values(factors)
    centre = ds.POSITION_MARGIN + v[:, 3:5] * (1 - 2 * ds.POSITION_MARGIN)
    g = (np.arange(res) + 0.5) / res
    px, py = np.meshgrid(g, g, indexing="xy")  # py[r, c] = row coordinate
    out = np.zeros((len(factors), res, res), dtype=np.uint8)
    for i, (shape, scale, theta, _, _) in enumerate(v):
        d = np.stack([px - centre[i, 0], -(py - centre[i, 1])], axis=-1)  # y up
        rot_inv = np.array([[np.cos(theta), np.sin(theta)], [-np.sin(theta), np.cos(theta)]])
        q = d @ rot_inv.T / (scale * ds.SPRITE_SPAN)
        u, w = q[..., 0], q[..., 1]
        if shape == 0:
            m = (np.abs(u) <= 0.5) & (np.abs(w) <= 0.5)
        elif shape == 1:
            m = (u / 0.5) ** 2 + (w / 0.25) ** 2 <= 1
        else:
            x = u * ds.HEART_EXTENT + ds.HEART_CENTRE_X
            y = w * ds.HEART_EXTENT + ds.HEART_CENTRE_Y
            m = (x**2 + y**2 - 1) ** 3 <= x**2 * y**3
        out[i] = m
    return out


def _centroids(imgs: np.ndarray) -> np.ndarray:
    """Pixel-centre centroids (x, y-down) in pixel units, ``[N, 2]``."""
    res = imgs.shape[-1]
    g = np.arange(res) + 0.5
    mass = imgs.sum(axis=(1, 2)).astype(np.float64)
    cx = (imgs.sum(axis=1) * g).sum(axis=1) / mass
    cy = (imgs.sum(axis=2) * g).sum(axis=1) / mass
    return np.stack([cx, cy], axis=1)


# --------------------------------------------------------------------------- factors / index


def test_factor_grid_matches_original_dsprites_values():
    assert FACTOR_SIZES == (3, 6, 40, 32, 32) and NUM_IMAGES == 737280
    np.testing.assert_allclose(ds.FACTOR_VALUES[1], [0.5, 0.6, 0.7, 0.8, 0.9, 1.0])
    assert ds.FACTOR_VALUES[2][0] == 0.0 and ds.FACTOR_VALUES[2][-1] == pytest.approx(2 * np.pi)
    np.testing.assert_allclose(np.diff(ds.FACTOR_VALUES[2]), 2 * np.pi / 39)
    np.testing.assert_allclose(np.diff(ds.FACTOR_VALUES[3]), 1 / 31)


def test_index_factor_round_trip_and_row_major_order():
    rs = np.random.RandomState(0)
    idx = np.concatenate([[0, 1, NUM_IMAGES - 2, NUM_IMAGES - 1], rs.randint(0, NUM_IMAGES, 5000)])
    f = index_to_factors(idx)
    np.testing.assert_array_equal(factors_to_index(f), idx)
    np.testing.assert_array_equal(f[0], [0, 0, 0, 0, 0])
    np.testing.assert_array_equal(f[1], [0, 0, 0, 0, 1])  # posY varies fastest
    np.testing.assert_array_equal(f[3], [2, 5, 39, 31, 31])
    # stride of each factor: explicit dSprites "latents_bases"
    bases = np.array([6 * 40 * 32 * 32, 40 * 32 * 32, 32 * 32, 32, 1])
    np.testing.assert_array_equal(factors_to_index(f), f @ bases)
    grid = full_grid_factors()
    assert grid.shape == (NUM_IMAGES, 5)
    np.testing.assert_array_equal(factors_to_index(grid), np.arange(NUM_IMAGES))
    assert np.all(grid.min(axis=0) == 0) and np.all(grid.max(axis=0) == np.array(FACTOR_SIZES) - 1)


def test_rendering_is_deterministic_and_chunk_independent():
    f = index_to_factors(np.random.RandomState(1).randint(0, NUM_IMAGES, 300))
    a = render_dsprites(f, 64)
    b = render_dsprites(f, 64, chunk_size=7)
    c = render_dsprites(f[::-1], 64)[::-1]
    assert a.dtype == np.uint8 and a.shape == (300, 64, 64)
    assert set(np.unique(a)) == {0, 1}
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, c)
    assert np.all(a.sum(axis=(1, 2)) > 0)


@pytest.mark.parametrize("res", [64, 32])
def test_windowed_renderer_matches_full_image_reference(res):
    f = index_to_factors(np.random.RandomState(2).randint(0, NUM_IMAGES, 120))
    f = np.concatenate([f, _grid(shape=[0, 1, 2], scale=[5], orientation=[0, 7, 21], posX=[0, 31], posY=[0, 31])])
    got = render_dsprites(f, res)
    ref = _reference_render(f, res)
    # identical up to float rounding of pixel centres lying exactly on a boundary
    assert np.mean(got != ref) < 1e-4
    assert np.all((got != ref).sum(axis=(1, 2)) <= 2)


# --------------------------------------------------------------------------- geometry


def test_heart_is_star_shaped_and_boundary_encloses_monte_carlo_area():
    theta = np.linspace(0, 2 * np.pi, 721)
    r = np.linspace(0, 2, 4001)
    vals = ds._heart_value(r[None, :] * np.cos(theta)[:, None], r[None, :] * np.sin(theta)[:, None])
    sign_changes = (np.diff(vals <= 0, axis=1) != 0).sum(axis=1)  # inside -> outside once
    assert np.all(sign_changes == 1)
    pts = ds.heart_boundary(num_angles=4000)
    assert np.max(np.abs(ds._heart_value(pts[:, 0], pts[:, 1]))) < 1e-9
    # polar area (1/2) ∮ r² dθ vs Monte Carlo over the bounding box [-1.5, 1.5]²
    area_polar = 0.5 * np.mean(np.sum(pts**2, axis=1)) * 2 * np.pi
    xy = np.random.RandomState(3).uniform(-1.5, 1.5, size=(400_000, 2))
    area_mc = 9.0 * np.mean(ds._heart_value(xy[:, 0], xy[:, 1]) <= 0)
    se = 9.0 * np.sqrt(area_mc / 9 * (1 - area_mc / 9) / len(xy))
    assert abs(area_polar - area_mc) < 4 * se


def _analytic_area_fraction(shape: int) -> float:
    """Area of a scale-1 sprite as a fraction of SPRITE_SPAN²."""
    if shape == 0:
        return 1.0
    if shape == 1:
        return np.pi * 0.5 * 0.25
    pts = ds.heart_boundary(num_angles=20000)
    return 0.5 * np.mean(np.sum(pts**2, axis=1)) * 2 * np.pi / ds.HEART_EXTENT**2


def test_sprite_span_and_area_match_the_analytic_geometry():
    res = 64
    f = _grid(shape=[0, 1, 2], scale=[5], orientation=[0], posX=[16], posY=[16])
    imgs = render_dsprites(f, res)
    span_px = ds.SPRITE_SPAN * res
    for img, shape in zip(imgs, range(3)):
        rows, cols = np.nonzero(img)
        w, h = cols.max() - cols.min() + 1, rows.max() - rows.min() + 1
        assert abs(max(w, h) - span_px) <= 1.5
        if shape == 1:
            assert abs(w / h - ds.ELLIPSE_ASPECT) < 0.2  # 2:1 ellipse lying flat at angle 0
        area_expected = _analytic_area_fraction(shape) * span_px**2
        assert abs(img.sum() - area_expected) / area_expected < 0.05
    # at scale 1, a sprite spans 1/3 of the image: between 1/3 and 0.4 as in dSprites
    assert 1 / 3 - 1e-12 <= ds.SPRITE_SPAN <= 0.4


def test_area_grows_with_scale_and_is_rotation_invariant():
    res = 64
    f = _grid(shape=[0, 1, 2], scale=list(range(6)), orientation=list(range(40)), posX=[16], posY=[16])
    area = render_dsprites(f, res).sum(axis=(1, 2)).reshape(3, 6, 40).astype(np.float64)
    # strictly increasing in scale for every shape and orientation
    assert np.all(np.diff(area, axis=1) > 0)
    # pixel area ≈ analytic area × scale², at every orientation (within 8 % at scale 0.5, 4 % at 1)
    scales = ds.FACTOR_VALUES[1]
    for shape in range(3):
        expected = _analytic_area_fraction(shape) * (scales * ds.SPRITE_SPAN * res) ** 2
        rel = np.abs(area[shape] / expected[:, None] - 1)
        assert rel[-1].max() < 0.04
        assert rel.max() < 0.08
    # rotation invariance: spread over the 40 orientations is small
    spread = (area.max(axis=2) - area.min(axis=2)) / area.mean(axis=2)
    assert spread[:, -1].max() < 0.06


def test_centroid_moves_monotonically_with_position():
    res = 64
    pos = list(range(32))
    for shape in range(3):
        fx = _grid(shape=[shape], scale=[3], orientation=[11], posX=pos, posY=[9])
        fy = _grid(shape=[shape], scale=[3], orientation=[11], posX=[9], posY=pos)
        cx = _centroids(render_dsprites(fx, res))
        cy = _centroids(render_dsprites(fy, res))
        assert np.all(np.diff(cx[:, 0]) > 0) and np.ptp(cx[:, 1]) < 0.5
        assert np.all(np.diff(cy[:, 1]) > 0) and np.ptp(cy[:, 0]) < 0.5
        # total travel = (1 - 2 * margin) of the image side
        travel = (1 - 2 * ds.POSITION_MARGIN) * res
        assert abs((cx[-1, 0] - cx[0, 0]) - travel) < 1.0
    # symmetric shapes: centroid equals the nominal sprite centre
    f = _grid(shape=[0, 1], scale=[5], orientation=[0, 13], posX=[0, 7, 31], posY=[3, 31])
    np.testing.assert_allclose(_centroids(render_dsprites(f, res)), ds.sprite_centres(f) * res, atol=0.35)


def test_orientation_rotates_counter_clockwise_on_screen():
    res = 64
    orient = list(range(40))
    theta = ds.FACTOR_VALUES[2]
    # ellipse: principal axis of the second moments is at angle theta (mod pi), y up
    imgs = render_dsprites(_grid(shape=[1], scale=[5], orientation=orient, posX=[16], posY=[16]), res)
    rows, cols = np.indices((res, res))
    for img, th in zip(imgs, theta):
        x, y = cols[img > 0] + 0.5, -(rows[img > 0] + 0.5)
        cov = np.cov(np.stack([x, y]))
        vals, vecs = np.linalg.eigh(cov)
        axis_angle = np.arctan2(vecs[1, 1], vecs[0, 1])
        diff = np.angle(np.exp(2j * (axis_angle - th))) / 2
        assert abs(diff) < np.deg2rad(3)
    # heart (no symmetry): centroid offset from the sprite centre rotates by theta over the full circle
    xy = np.random.RandomState(4).uniform(-1.5, 1.5, size=(200_000, 2))
    inside = xy[ds._heart_value(xy[:, 0], xy[:, 1]) <= 0]
    canon = (inside.mean(axis=0) - [ds.HEART_CENTRE_X, ds.HEART_CENTRE_Y]) / ds.HEART_EXTENT
    assert canon[1] > 0.02  # the lobes pull the centroid above the bbox centre
    f = _grid(shape=[2], scale=[5], orientation=orient, posX=[16], posY=[16])
    off = _centroids(render_dsprites(f, res)) - ds.sprite_centres(f) * res
    off[:, 1] *= -1  # y up
    c, s = np.cos(theta), np.sin(theta)
    expected = np.stack([c * canon[0] - s * canon[1], s * canon[0] + c * canon[1]], axis=1)
    expected *= ds.SPRITE_SPAN * res
    np.testing.assert_allclose(off, expected, atol=0.3)


@pytest.mark.parametrize("res", [64, 32, 16])
def test_no_sprite_touches_the_border(res):
    edge = [0, 31]
    allpos = list(range(32))
    f = np.concatenate(
        [
            _grid(shape=[0, 1, 2], scale=[5], orientation=list(range(40)), posX=edge, posY=allpos),
            _grid(shape=[0, 1, 2], scale=[5], orientation=list(range(40)), posX=allpos, posY=edge),
        ]
    )
    imgs = render_dsprites(f, res)
    ring = np.concatenate(
        [imgs[:, 0, :], imgs[:, -1, :], imgs[:, :, 0], imgs[:, :, -1]], axis=1
    )
    assert ring.sum() == 0
    # ... and the margin is not wasteful: at an edge position some sprite comes within 2 px of the ring
    rows, cols = np.nonzero(imgs.any(axis=0))
    assert min(rows.min(), cols.min(), res - 1 - rows.max(), res - 1 - cols.max()) <= max(2, res // 16 + 1)


def test_shapes_are_distinguishable_at_32px():
    """A small MLP on translation-invariant |FFT| features separates the shapes (held out)."""
    rs = np.random.RandomState(5)
    idx = rs.choice(NUM_IMAGES, 4000, replace=False)
    f = index_to_factors(idx)
    x = render_dsprites(f, 32).astype(np.float64)
    y = torch.tensor(f[:, 0])
    k = 8  # low spatial frequencies |k_x|, |k_y| <= 8
    spec = np.abs(np.fft.rfft2(x))
    feats = np.concatenate([spec[:, : k + 1, : k + 1], spec[:, -k:, : k + 1]], axis=1).reshape(len(x), -1)
    feats = feats / feats[:, :1]  # divide by the area (DC term)
    tr, te = slice(0, 3000), slice(3000, None)
    mu, sd = feats[tr].mean(axis=0), feats[tr].std(axis=0) + 1e-9
    xt = torch.tensor((feats - mu) / sd, dtype=torch.float32)
    gen = torch.Generator().manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(xt.shape[1], 128), torch.nn.ReLU(), torch.nn.Linear(128, 3))
    with torch.no_grad():
        for p in net.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) / np.sqrt(p.shape[-1]))
    opt = torch.optim.Adam(net.parameters(), lr=3e-3)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny model: threading only adds contention on a shared box
    try:
        for _ in range(300):
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(net(xt[tr]), y[tr])
            loss.backward()
            opt.step()
    finally:
        torch.set_num_threads(threads)
    with torch.no_grad():
        acc = (net(xt[te]).argmax(dim=1) == y[te]).float().mean().item()
    print(f"held-out shape accuracy at 32 px: {acc:.4f}")
    assert acc >= 0.99


# --------------------------------------------------------------------------- class / errors / timing


def test_dsprites_ground_truth_data_interface():
    data = DSprites(resolution=32)
    assert tuple(data.factor_names) == ("shape", "scale", "orientation", "posX", "posY")
    assert data.factor_sizes == FACTOR_SIZES and data.observation_shape == (1, 32, 32)
    f, obs = data.sample(50, random_state=0)
    assert obs.shape == (50, 1, 32, 32) and obs.dtype == np.float32
    np.testing.assert_array_equal(obs[:, 0], render_dsprites(f, 32).astype(np.float32))
    again = data.sample_observations_from_factors(f, random_state=123)
    np.testing.assert_array_equal(obs, again)
    f2, _ = data.sample(50, random_state=0)
    np.testing.assert_array_equal(f, f2)
    assert np.all(f.max(axis=0) < np.array(FACTOR_SIZES))


def test_bad_input_raises_clear_errors():
    good = np.zeros((2, 5), dtype=np.int64)
    with pytest.raises(ValueError, match="shape"):
        render_dsprites(np.zeros((2, 4), dtype=np.int64))
    with pytest.raises(ValueError, match="integer"):
        render_dsprites(good.astype(np.float32))
    bad = good.copy()
    bad[1, 2] = 40
    with pytest.raises(ValueError, match="orientation"):
        render_dsprites(bad)
    bad = good.copy()
    bad[0, 0] = -1
    with pytest.raises(ValueError, match="shape"):
        factors_to_index(bad)
    with pytest.raises(ValueError, match="resolution"):
        render_dsprites(good, resolution=8)
    with pytest.raises(ValueError, match="resolution"):
        DSprites(resolution=15)
    with pytest.raises(ValueError, match="resolution"):
        render_dsprites(good, resolution=32.0)
    with pytest.raises(ValueError, match="index"):
        index_to_factors(np.array([NUM_IMAGES]))
    with pytest.raises(ValueError, match="chunk_size"):
        render_dsprites(good, chunk_size=0)


def test_full_grid_render_time_extrapolated_from_50k_chunk():
    f = index_to_factors(np.random.RandomState(6).choice(NUM_IMAGES, 50_000, replace=False))
    times = {}
    for res in (64, 32):
        t0 = time.perf_counter()
        imgs = render_dsprites(f, res)
        times[res] = (time.perf_counter() - t0) * NUM_IMAGES / len(f)
        assert imgs.shape == (50_000, res, res)
    print(f"extrapolated full-grid render time: 64px {times[64]:.1f} s, 32px {times[32]:.1f} s")
    assert times[64] < 600 and times[32] < 300  # minutes, not hours, even on a loaded 2-core box
