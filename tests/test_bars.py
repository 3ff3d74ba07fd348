"""The bars benchmark generator and the Hungarian bar-recovery score (paper 000)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from priorlab.data.bars import DEFAULT_RECOVERY_THRESHOLD, bar_matrix, bars_recovery, make_bars


def test_bar_matrix_layout():
    W = bar_matrix(3)
    assert W.shape == (9, 6)
    img = W.reshape(3, 3, 6)
    assert np.array_equal(img[..., 1], [[0, 0, 0], [1, 1, 1], [0, 0, 0]])  # horizontal bar, row 1
    assert np.array_equal(img[..., 5], [[0, 0, 1], [0, 0, 1], [0, 0, 1]])  # vertical bar, column 2
    assert np.array_equal(W.sum(0), np.full(6, 3.0))
    assert len({tuple(c) for c in W.T}) == 6


def test_shapes_dtypes_and_bar_probability():
    n, R = 4000, 5
    d = make_bars(n, R, random_state=0)
    assert d.Y.shape == (n, 25) and d.Y.dtype == np.float32
    assert d.S.shape == (n, 10) and d.W.shape == (25, 10)
    freq = (d.S != 0).mean()
    assert abs(freq - 0.2) < 4 * math.sqrt(0.2 * 0.8 / (n * 10))
    act = d.S[d.S != 0]
    assert abs(act.mean() - 1.0) < 0.02 and abs(act.std() - 0.25) < 0.02
    fixed = make_bars(500, R, p=0.3, intensity="fixed", random_state=0)
    assert set(np.unique(fixed.S)) == {0.0, 1.0}
    assert abs((fixed.S != 0).mean() - 0.3) < 0.03


@pytest.mark.parametrize("rule", ["max", "sum"])
def test_combination_rule(rule):
    d = make_bars(300, 4, rule=rule, noise_std=0.0, random_state=1)
    S, W = d.S, d.W
    expect = np.array([[max(W[i, h] * S[n, h] for h in range(8)) for i in range(16)] for n in range(300)]) \
        if rule == "max" else S @ W.T
    np.testing.assert_allclose(d.Y, expect, rtol=1e-6, atol=1e-6)
    overlap = [n for n in range(300) if S[n, 0] > 0 and S[n, 4] > 0]  # row 0 and column 0 share pixel 0
    assert overlap
    n = overlap[0]
    want = max(S[n, 0], S[n, 4]) if rule == "max" else S[n, 0] + S[n, 4]
    assert d.Y[n, 0] == pytest.approx(want, rel=1e-6)


def test_noise_level_and_determinism():
    a = make_bars(2000, 5, noise_std=0.1, random_state=7)
    b = make_bars(2000, 5, noise_std=0.1, random_state=np.random.RandomState(7))
    c = make_bars(2000, 5, noise_std=0.1, random_state=8)
    assert np.array_equal(a.Y, b.Y) and np.array_equal(a.S, b.S)
    assert not np.array_equal(a.Y, c.Y)
    resid = a.Y - (a.S[:, None, :] * a.W[None]).max(-1)
    assert resid.std() == pytest.approx(0.1, rel=0.03)


def test_recovery_of_permuted_noisy_copy_and_failure_on_random():
    rs = np.random.RandomState(0)
    W = bar_matrix(5)
    perm = rs.permutation(10)
    noisy = 2.5 * W[:, perm] + 0.1 * rs.standard_normal(W.shape)  # scale-free correlation
    extra = np.concatenate([noisy, rs.uniform(size=(25, 2))], 1)  # surplus learned columns allowed
    for learned in (noisy, extra):
        rec = bars_recovery(learned, W)
        assert rec["recovered"] and rec["n_recovered"] == 10 and rec["fraction"] == 1.0
        assert np.array_equal(rec["assignment"], perm.argsort())  # true bar i sits in column perm⁻¹(i)
        assert rec["correlations"].min() > 0.95
    for seed in range(5):
        rec = bars_recovery(np.random.RandomState(seed).uniform(size=(25, 10)), W)
        assert not rec["recovered"] and rec["n_recovered"] <= 2


def test_recovery_threshold_rejects_merged_bars():
    W = bar_matrix(5)
    merged = W.copy()
    merged[:, 0] = np.maximum(W[:, 0], W[:, 1])  # one column holds two bars, bar 1 appears twice
    rec = bars_recovery(merged, W)
    assert not rec["recovered"] and rec["n_recovered"] == 9
    assert rec["correlations"].min() == pytest.approx(math.sqrt(3 / 8), abs=1e-12)
    assert DEFAULT_RECOVERY_THRESHOLD == 0.9
    assert bars_recovery(np.c_[W[:, :9], np.zeros(25)], W)["n_recovered"] == 9  # a constant column scores 0


def test_bad_input_raises():
    with pytest.raises(ValueError, match="random_state"):
        make_bars(10, 3)
    with pytest.raises(ValueError, match="R"):
        make_bars(10, 1, random_state=0)
    with pytest.raises(ValueError, match="rule"):
        make_bars(10, 3, rule="min", random_state=0)
    with pytest.raises(ValueError, match="intensity"):
        make_bars(10, 3, intensity="uniform", random_state=0)
    with pytest.raises(ValueError, match="p"):
        make_bars(10, 3, p=1.5, random_state=0)
    with pytest.raises(ValueError, match="fewer"):
        bars_recovery(np.ones((9, 3)), bar_matrix(3))
    with pytest.raises(ValueError, match="equal D"):
        bars_recovery(np.ones((8, 6)), bar_matrix(3))
