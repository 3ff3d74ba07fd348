"""Tests of the Smiley sparse data set (paper 002, supplement E) and its MATLAB imresize port."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from scipy.io import savemat
from scipy.special import ndtri

from priorlab.data.base import GroundTruthData
from priorlab.data.bowtie_template import (
    BOWTIE_TEMPLATE,
    cubic_kernel,
    imresize,
    mat2gray,
    matlab_round,
    resize_weights,
    resized_bowtie,
    template_from_rgb,
)
from priorlab.data.smiley import (
    GROUP_NAMES,
    GROUP_SOURCE_SLICES,
    HEAD,
    SOURCE_NAMES,
    SmileyData,
    l2_normalise,
    load_smiley_mat,
    render_smiley,
    sample_smiley,
    source_presence,
)


def _reference_dir() -> Path:
    shared = os.environ.get("PRIORLAB_SHARED")
    root = Path(shared) if shared else Path(__file__).resolve().parents[1].parent / "shared"
    return root / "reference"


def _require(name: str) -> Path:
    path = _reference_dir() / name
    if not path.is_file():
        pytest.skip(f"developer reference file {path} is absent (set PRIORLAB_SHARED to the shared folder)")
    return path


@pytest.fixture(scope="module")
def reference_set():
    return load_smiley_mat(_require("smiley_test.mat"))


# ----------------------------------------------------------------- the authors' test set


def test_reference_set_reproduced_exactly(reference_set):
    """Rendering the authors' (S, V) gives their X: exact for every one of the 20,000 images."""
    images, presence, sources = reference_set
    assert images.shape == (20000, 32, 32) and presence.shape == (20000, 4)
    assert images.mean() == pytest.approx(0.3356, abs=5e-5)  # value stated in the notes
    rendered = render_smiley(presence, sources)
    equal = rendered == images
    bow = presence[:, 0]
    assert equal[~bow].all(), f"{(~equal[~bow].all(axis=(1, 2))).sum()} images without a bow tie differ"
    exact_bow = equal[bow].all(axis=(1, 2)).mean()
    pixel_bow = equal[bow].mean()
    assert pixel_bow >= 0.99
    # measured: all 10,016 bow tie images match exactly (pixel agreement 1.0)
    assert exact_bow == 1.0, f"bow tie images exact {exact_bow:.4f}, pixel agreement {pixel_bow:.5f}"


def test_template_derived_from_authors_png():
    from PIL import Image

    rgb = np.asarray(Image.open(_require("bowtie.png")).convert("RGB"))
    assert np.array_equal(template_from_rgb(rgb), BOWTIE_TEMPLATE)


def test_reference_group_order(reference_set):
    """The S columns repeat one flag per group in the order bow tie, hat, eyes, mouth."""
    _, presence, sources = reference_set
    assert GROUP_NAMES == ("bowtie", "hat", "eyes", "mouth")
    assert np.all(np.abs(presence.mean(axis=0) - 0.5) < 0.02)
    assert np.all(np.abs(sources.std(axis=0) - 0.5) < 0.02)


# ----------------------------------------------------------------- the loader


def _authors_format(images, presence, sources) -> dict:
    n = images.shape[0]
    x = images.transpose(0, 2, 1).reshape(n, -1)  # column-major flattening per image
    return {"X": x.astype(np.uint8), "S": source_presence(presence).astype(np.uint8), "V": sources}


def test_load_roundtrip(tmp_path):
    images, presence, sources = sample_smiley(50, random_state=3)
    path = tmp_path / "smiley.mat"
    savemat(path, _authors_format(images, presence, sources))
    x, p, v = load_smiley_mat(path)
    assert np.array_equal(x, images) and np.array_equal(p, presence)
    np.testing.assert_array_equal(v, sources)
    # column-major: the first 32 entries of a row are the first image column
    flat = _authors_format(images, presence, sources)["X"]
    assert np.array_equal(flat[0, :32], images[0, :, 0])


def test_load_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="not found"):
        load_smiley_mat(tmp_path / "absent.mat")
    corrupt = tmp_path / "corrupt.mat"
    corrupt.write_bytes(b"this is not a MATLAB file" * 10)
    with pytest.raises(ValueError, match="cannot read"):
        load_smiley_mat(corrupt)
    images, presence, sources = sample_smiley(5, random_state=0)
    good = _authors_format(images, presence, sources)
    savemat(tmp_path / "novars.mat", {"X": good["X"]})
    with pytest.raises(ValueError, match="lacks"):
        load_smiley_mat(tmp_path / "novars.mat")
    bad_s = dict(good, S=good["S"].copy())
    bad_s["S"][0, 1] = 1 - bad_s["S"][0, 0]  # flags differ inside the bow tie group
    savemat(tmp_path / "bad_s.mat", bad_s)
    with pytest.raises(ValueError, match="constant within"):
        load_smiley_mat(tmp_path / "bad_s.mat")
    savemat(tmp_path / "bad_x.mat", dict(good, X=good["X"][:, :1000]))
    with pytest.raises(ValueError, match="X must be"):
        load_smiley_mat(tmp_path / "bad_x.mat")


# ----------------------------------------------------------------- the sampler


def test_determinism():
    a = sample_smiley(300, random_state=11)
    b = sample_smiley(300, random_state=np.random.RandomState(11))
    c = sample_smiley(300, random_state=12)
    for x, y in zip(a, b):
        assert np.array_equal(x, y)
    assert not np.array_equal(a[0], c[0]) and not np.array_equal(a[2], c[2])
    with pytest.raises(ValueError, match="random_state"):
        sample_smiley(3, random_state=None)


def test_mean_pixel_and_source_law():
    images, presence, sources = sample_smiley(20000, random_state=0)
    assert images.dtype == np.uint8 and set(np.unique(images)) == {0, 1}
    assert images.mean() == pytest.approx(0.336, abs=0.005)
    assert np.all(np.abs(presence.mean(axis=0) - 0.5) < 0.015)  # 4.5 standard errors
    assert np.all(np.abs(sources.std(axis=0) - 0.5) < 0.012)
    assert np.all(np.abs(sources.mean(axis=0)) < 0.017)


def test_presence_probability_extremes():
    images, presence, _ = sample_smiley(40, random_state=1, presence_prob=0.0)
    assert not presence.any() and np.array_equal(images, np.broadcast_to(HEAD, images.shape))
    images, presence, _ = sample_smiley(40, random_state=1, presence_prob=1.0)
    assert presence.all()
    assert images[:, :6].any(axis=(1, 2)).all()  # the hat always reaches above the head (rows 1-6)
    assert images[:, 26:].sum(axis=(1, 2)).min() > 10  # the bow tie sits below it


def test_absent_groups_ignore_their_sources():
    rs = np.random.RandomState(5)
    presence = rs.random_sample((200, 4)) < 0.5
    sources = 0.5 * rs.standard_normal((200, 18))
    other = sources.copy()
    for k, group in enumerate(GROUP_NAMES):
        absent = ~presence[:, k]
        other[absent, GROUP_SOURCE_SLICES[group]] = 0.5 * rs.standard_normal(
            (absent.sum(), GROUP_SOURCE_SLICES[group].stop - GROUP_SOURCE_SLICES[group].start)
        )
    assert np.array_equal(render_smiley(presence, sources), render_smiley(presence, other))


def test_single_attributes_hand_checked():
    """Zero sources: each attribute at its nominal geometry, derived by hand from the generator."""
    zero = np.zeros((1, 18))

    def one(group):
        p = np.zeros((1, 4), bool)
        p[0, GROUP_NAMES.index(group)] = True
        return render_smiley(p, zero)[0].astype(int) - HEAD

    eyes = one("eyes")  # discs radius 2 at (x, y) = (12.5, 14) and (20.5, 14): 12 pixels each
    assert eyes.min() == -1 and eyes.max() == 0 and eyes.sum() == -24
    assert eyes[13, 11] == -1 and eyes[13, 19] == -1 and eyes[13, 15] == 0
    mouth = one("mouth")  # rows 21-23, columns 14-18 (15 pixels) + 4 corner pixels
    rows, cols = np.nonzero(mouth)
    assert mouth.sum() == -19
    assert set(rows + 1) == {21, 22, 23} and set(cols + 1) == set(range(12, 21))
    hat = one("hat")  # brim rows 5-7 (padded 10-12), columns 9-24; crown rows 3-5, columns 12-22
    assert hat.min() == 0
    assert np.all(hat[0:2] == 0) and np.array_equal(np.nonzero(hat[2])[0] + 1, np.arange(12, 23))
    assert np.array_equal(np.nonzero(hat[5])[0] + 1, np.arange(9, 25))
    bow = one("bowtie")  # 5 x 12 bow tie, top-left at (x, y) = (11, 27)
    assert bow.min() == 0
    expected = np.zeros((32, 32), int)
    expected[26:31, 10:22] = resized_bowtie(5, 12)
    assert np.array_equal(np.maximum(HEAD + expected, 0).clip(0, 1) - HEAD, bow)


def test_render_speed_vectorised():
    import time

    start = time.perf_counter()
    sample_smiley(20000, random_state=2)
    assert time.perf_counter() - start < 5.0


# ----------------------------------------------------------------- MATLAB imresize port


def test_matlab_round_half_away_from_zero():
    np.testing.assert_array_equal(
        matlab_round([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 2.4999]), [-3, -2, -1, 1, 2, 3, 2]
    )


def test_imresize_identity_and_constant():
    rs = np.random.RandomState(0)
    a = rs.standard_normal((7, 9))
    np.testing.assert_allclose(imresize(a, (7, 9)), a, atol=1e-12)
    for shape in [(3, 4), (15, 20), (4.2, 13.7)]:
        out = imresize(np.full((7, 9), 3.25), shape)
        assert out.shape == (int(np.ceil(shape[0])), int(np.ceil(shape[1])))
        np.testing.assert_allclose(out, 3.25, atol=1e-12)


def test_imresize_hand_computed_upsampling():
    """[0 1] -> 4 columns, scale 2: u = x/2 + 1/4; Keys weights give -3/32, 13/64, 51/64, 35/32."""
    out = imresize(np.array([[0.0, 1.0]]), (1, 4))
    np.testing.assert_allclose(out, [[-0.09375, 0.203125, 0.796875, 1.09375]], atol=1e-12)
    assert cubic_kernel(0.25) == 0.8671875 and cubic_kernel(1.25) == -0.0703125


def test_imresize_hand_computed_antialiased_shrink():
    """4 -> 2, scale 1/2: kernel k(d/2)/2 of width 8, mirrored taps; out_1 = (35/32 a1 + 51/64 a2 + 13/64 a3 - 3/32 a4)/2."""
    a = np.array([[1.0], [2.0], [4.0], [8.0]])
    w = np.array([1.09375, 0.796875, 0.203125, -0.09375]) / 2
    expected = [[w @ a[:, 0]], [w[::-1] @ a[:, 0]]]
    np.testing.assert_allclose(imresize(a, (2, 1)), expected, atol=1e-12)
    np.testing.assert_allclose(resize_weights(4, 2, 0.5)[0], w, atol=1e-12)
    np.testing.assert_allclose(resize_weights(11, 5, 5 / 11).sum(axis=1), 1.0, atol=1e-12)


def test_imresize_separable_and_fractional_rule():
    rs = np.random.RandomState(1)
    a = rs.random_sample((11, 17))
    rows = resize_weights(11, 6, 6 / 11)
    cols = resize_weights(17, 9, 9 / 17)
    np.testing.assert_allclose(imresize(a, (5.3, 8.01)), rows @ a @ cols.T, atol=1e-12)
    with pytest.raises(ValueError):
        imresize(a, (0, 3))
    with pytest.raises(ValueError):
        imresize(a[0], (3, 3))


def test_mat2gray_and_resized_bowtie():
    np.testing.assert_allclose(mat2gray([[2.0, 4.0, 3.0]]), [[0.0, 1.0, 0.5]])
    assert np.array_equal(resized_bowtie(11, 17), BOWTIE_TEMPLATE.astype(bool))
    small = resized_bowtie(4.2, 9.5)
    assert small.shape == (5, 10)
    assert np.array_equal(small, small[::-1]) and np.array_equal(small, small[:, ::-1])


# ----------------------------------------------------------------- GroundTruthData


def test_ground_truth_contract():
    data = SmileyData(n_bins=10)
    assert isinstance(data, GroundTruthData)
    assert data.factor_sizes == (2,) * 4 + (10,) * 18 and data.num_factors == 22
    assert len(data.factor_names) == 22 and tuple(data.factor_names[4:]) == SOURCE_NAMES
    assert data.observation_shape == (1, 32, 32)
    factors = data.sample_factors(5000, random_state=0)
    assert factors.dtype == np.int64 and factors.min() == 0
    assert np.array_equal(factors.max(axis=0), np.asarray(data.factor_sizes) - 1)
    obs = data.sample_observations_from_factors(factors[:100], random_state=0)
    assert obs.shape == (100, 1, 32, 32) and obs.dtype == np.float32
    presence = factors[:100, :4].astype(bool)
    sources = data.continuous_sources_from_factors(factors[:100])
    assert np.array_equal(obs[:, 0], render_smiley(presence, sources).astype(np.float32))


def test_all_flags_off_is_the_head_disc():
    """Disc of radius 10 at (16.5, 16.5): half-row widths 3,5,7,8,8,9,9,10,10,10 -> 316 pixels."""
    data = SmileyData()
    factors = data.sample_factors(20, random_state=4)
    factors[:, :4] = 0
    obs = data.sample_observations_from_factors(factors, random_state=0)[:, 0]
    assert np.all(obs == obs[0]) and obs[0].sum() == 316
    widths = obs[0].sum(axis=1)
    np.testing.assert_array_equal(widths[6:16], [6, 10, 14, 16, 16, 18, 18, 20, 20, 20])
    assert widths[:6].sum() == 0 and np.array_equal(widths[16:26], widths[6:16][::-1])


def test_bins_are_equal_probability_with_conditional_medians():
    """Monte Carlo: binning 0.5 N(0,1) at the quantile edges gives equal mass and the stated medians."""
    data = SmileyData(n_bins=5)
    edges = 0.5 * ndtri(np.arange(1, 5) / 5)
    draws = 0.5 * np.random.RandomState(0).standard_normal(200000)
    bins = np.searchsorted(edges, draws)
    assert np.all(np.abs(np.bincount(bins) / draws.size - 0.2) < 0.005)
    medians = [np.median(draws[bins == b]) for b in range(5)]
    np.testing.assert_allclose(data.bin_values, medians, atol=0.01)
    factors = np.zeros((5, 22), np.int64)
    factors[:, 4:] = np.arange(5)[:, None]
    np.testing.assert_allclose(data.continuous_sources_from_factors(factors)[:, 0], data.bin_values)


def test_l2_normalise():
    images = sample_smiley(10, random_state=0)[0]
    normed = l2_normalise(images)
    assert normed.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(normed.reshape(10, -1), axis=1), 1.0, rtol=1e-6)
    np.testing.assert_allclose(normed * np.sqrt(images.reshape(10, -1).sum(1))[:, None, None], images, atol=1e-6)
    with pytest.raises(ValueError, match="all-zero"):
        l2_normalise(np.zeros((2, 32, 32)))


# ----------------------------------------------------------------- bad input


def test_bad_input_raises():
    p, s = np.zeros((3, 4), bool), np.zeros((3, 18))
    with pytest.raises(ValueError, match="presence"):
        render_smiley(np.zeros((3, 5), bool), s)
    with pytest.raises(ValueError, match="sources"):
        render_smiley(p, np.zeros((3, 17)))
    with pytest.raises(ValueError, match="sources"):
        render_smiley(p, np.zeros((2, 18)))
    with pytest.raises(ValueError, match="finite"):
        render_smiley(p, np.full((3, 18), np.nan))
    with pytest.raises(ValueError, match="0/1"):
        render_smiley(np.full((3, 4), 2), s)
    with pytest.raises(ValueError, match="num"):
        sample_smiley(-1, random_state=0)
    with pytest.raises(ValueError, match="presence_prob"):
        sample_smiley(3, random_state=0, presence_prob=1.5)
    data = SmileyData()
    with pytest.raises(ValueError, match="shape"):
        data.sample_observations_from_factors(np.zeros((3, 21), np.int64), random_state=0)
    bad = np.zeros((3, 22), np.int64)
    bad[0, 0] = 2
    with pytest.raises(ValueError, match="range"):
        data.sample_observations_from_factors(bad, random_state=0)
    with pytest.raises(ValueError, match="n_bins"):
        SmileyData(n_bins=1)
    with pytest.raises(ValueError, match="RGB"):
        template_from_rgb(np.zeros((5, 5)))


def test_discretise_sources_inverts_the_bin_values():
    data = SmileyData(n_bins=10)
    bins = np.arange(10)[None].repeat(18, 0).T  # [10, 18]
    assert np.array_equal(data.discretise_sources(data.bin_values[bins]), bins)
    rs = np.random.RandomState(0)
    counts = np.bincount(data.discretise_sources(0.5 * rs.randn(50000, 18)).ravel(), minlength=10)
    assert np.allclose(counts / counts.sum(), 0.1, atol=0.005)  # equal-probability bins
