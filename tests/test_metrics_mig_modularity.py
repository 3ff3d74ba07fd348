"""MIG, discretisation, mutual information and modularity / explicitness."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import mutual_info_score

from priorlab.metrics import (discretise, factor_entropy, mig, modularity, modularity_explicitness,
                              mutual_information)


def _factors(n, sizes, seed):
    rs = np.random.RandomState(seed)
    return np.stack([rs.randint(s, size=n) for s in sizes], axis=1)


def _naive_discretise(x, n_bins):
    return np.stack([np.digitize(x[:, d], np.histogram(x[:, d], n_bins)[1][:-1])
                     for d in range(x.shape[1])], axis=1)


def test_discretise_matches_histogram_digitize():
    rs = np.random.RandomState(0)
    x = np.hstack([rs.randn(500, 3), rs.rand(500, 1) ** 3, np.full((500, 1), 2.5)])
    for arr in (x, x.astype(np.float32)):
        z = discretise(arr, 20)
        np.testing.assert_array_equal(z, _naive_discretise(arr, 20))
        assert z.min() == 1 and z[:, :4].max() == 20
    assert np.unique(discretise(x, 20)[:, 4]).size == 1  # constant dim: one bin


def test_mutual_information_and_entropy_match_sklearn():
    rs = np.random.RandomState(1)
    f = _factors(700, [2, 5, 13], 2)
    z = np.stack([rs.randint(7, size=700), f[:, 1] * 2 + rs.randint(2, size=700),
                  np.zeros(700, dtype=int), f[:, 2]], axis=1)
    m = mutual_information(z, f)
    ref = np.array([[mutual_info_score(f[:, j], z[:, i]) for j in range(3)] for i in range(4)])
    np.testing.assert_allclose(m, ref, rtol=0, atol=1e-13)
    h = factor_entropy(f)
    p = [np.bincount(f[:, j]) / 700 for j in range(3)]
    np.testing.assert_allclose(h, [-(q[q > 0] * np.log(q[q > 0])).sum() for q in p], atol=1e-13)
    np.testing.assert_allclose(m[3, 2], h[2], atol=1e-13)  # I(y; y) = H(y)


def test_mig_reference_unit_cases():
    f = _factors(3000, [10] * 10, 0)
    # identity representation with the identity discretiser (as in the reference's mig_test)
    assert 0.9 <= mig(f.astype(float), f, discretised=f) <= 1.0
    # identity through the default 20-bin histogram discretiser
    assert 0.9 <= mig(f.astype(float), f) <= 1.0
    assert mig(np.zeros(f.shape), f) <= 0.2
    dup = np.hstack([f, f]).astype(float)
    assert mig(dup, f) <= 0.1


def test_mig_details_and_hand_value():
    # codes: z0 = y0 exactly, z1 independent of both -> gap for y0 = H(y0) - I(z1;y0)
    f = _factors(2000, [4, 3], 5)
    rs = np.random.RandomState(3)
    codes = np.stack([f[:, 0], rs.randint(5, size=2000)], axis=1).astype(float)
    d = mig(codes, f, n_bins=4, details=True)
    m = d["mutual_information"]
    assert m.shape == (2, 2)
    expected = np.mean([(m[0, 0] - m[1, 0]) / d["entropy"][0], abs(m[0, 1] - m[1, 1]) / d["entropy"][1]])
    assert d["mig"] == pytest.approx(expected, abs=1e-12)
    assert d["per_factor"][0] > 0.99


def test_mig_invariances():
    f = _factors(3000, [3, 6, 10, 8, 8], 1)
    rs = np.random.RandomState(4)
    codes = (f + 0.5 * rs.randn(*f.shape)) @ (np.eye(5) + 0.3 * rs.rand(5, 5))
    base = mig(codes, f)
    perm = rs.permutation(5)
    assert mig(codes[:, perm], f) == pytest.approx(base, abs=1e-12)
    assert mig(3.0 * codes - 7.0, f) == pytest.approx(base, abs=1e-12)
    assert mig(-codes, f) == pytest.approx(base, abs=1e-12)


def test_mig_and_modularity_drop_along_noise_ladder():
    f = _factors(4000, [3, 6, 10, 8, 8], 2)
    rs = np.random.RandomState(5)
    scaled = f / np.array([3, 6, 10, 8, 8])
    noise = rs.randn(*f.shape)
    migs, mods = [], []
    for sigma in (0.0, 0.5, 2.0, 8.0):
        codes = scaled + sigma * noise
        z = discretise(codes, 20)
        migs.append(mig(codes, f, discretised=z))
        mods.append(modularity(mutual_information(z, f)))
    assert all(a > b for a, b in zip(migs, migs[1:])), migs
    assert migs[0] > 0.9 and migs[-1] < 0.05
    assert all(a > b for a, b in zip(mods, mods[1:])), mods


def test_modularity_closed_forms():
    diag = np.diag(5.0 * np.ones(5))
    assert modularity(diag) == pytest.approx(1.0)
    assert modularity(np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]])) == pytest.approx(2.0 / 3.0)
    assert modularity(np.zeros((10, 10))) == pytest.approx(0.0)
    assert modularity(np.vstack([diag, diag])) == pytest.approx(1.0)
    assert modularity(diag[:2, :]) == pytest.approx(1.0)
    assert modularity(np.hstack([diag, diag])) == pytest.approx(1.0 - 1.0 / 9.0)
    # one code with MI (3, 1, 0): delta = 1 / (9 * 2)
    assert modularity(np.array([[3.0, 1.0, 0.0]])) == pytest.approx(1.0 - 1.0 / 18.0)


def test_modularity_explicitness_unit_cases():
    f_tr, f_te = _factors(600, [10] * 3, 6), _factors(600, [10] * 3, 7)
    ident = modularity_explicitness(f_tr.astype(float), f_tr, f_te.astype(float), f_te, discretised=f_tr)
    assert 0.9 <= ident["modularity"] <= 1.0
    assert ident["explicitness_score_train"] > 0.9 and ident["explicitness_score_test"] > 0.9
    f = _factors(3000, [10] * 5, 6)
    dup = np.hstack([f, f]).astype(float)
    assert modularity(mutual_information(discretise(dup, 20), f)) >= 0.9


def test_modularity_explicitness_permutation_invariant():
    f_tr, f_te = _factors(600, [4, 6, 8], 1), _factors(600, [4, 6, 8], 2)
    rs = np.random.RandomState(0)
    codes_tr = f_tr + rs.randn(*f_tr.shape)
    codes_te = f_te + rs.randn(*f_te.shape)
    a = modularity_explicitness(codes_tr, f_tr, codes_te, f_te)
    perm = [2, 0, 1]
    b = modularity_explicitness(codes_tr[:, perm], f_tr, codes_te[:, perm], f_te)
    for key in a:
        assert b[key] == pytest.approx(a[key], abs=1e-6)
    noisier = modularity_explicitness(codes_tr + 3 * rs.randn(*f_tr.shape), f_tr,
                                      codes_te + 3 * rs.randn(*f_te.shape), f_te)
    assert noisier["explicitness_score_test"] < a["explicitness_score_test"] - 0.05


def test_modularity_low_for_scrambled_codes():
    # reference bad case: each point's code is a random permutation of its factors
    f = _factors(20000, [10] * 10, 8)
    rs = np.random.RandomState(9)
    scrambled = np.take_along_axis(f, np.argsort(rs.rand(*f.shape), axis=1), axis=1)
    assert modularity(mutual_information(scrambled, f)) <= 0.2


def test_explicitness_missing_test_class():
    f_tr = _factors(400, [3, 3], 0)
    f_te = f_tr.copy()
    f_te[f_te[:, 0] == 2, 0] = 1  # test set lacks class 2 of factor 0
    codes = f_tr + 0.1 * np.random.RandomState(0).randn(400, 2)
    with pytest.raises(ValueError, match="differ from the training classes"):
        modularity_explicitness(codes, f_tr, codes, f_te)
    out = modularity_explicitness(codes, f_tr, codes, f_te, align_classes=True)
    assert 0.5 < out["explicitness_score_test"] <= 1.0


@pytest.mark.parametrize("fn", ["mig", "modexp"])
def test_bad_inputs_raise(fn):
    f = _factors(100, [3, 4], 0)
    codes = np.random.RandomState(0).randn(100, 3)

    def call(c, y):
        if fn == "mig":
            return mig(c, y)
        return modularity_explicitness(c, y, c, y)

    bad_nan = codes.copy()
    bad_nan[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        call(bad_nan, f)
    with pytest.raises(ValueError, match="single value"):
        call(codes, np.stack([f[:, 0], np.zeros(100, int)], axis=1))
    with pytest.raises(ValueError, match="points"):
        call(codes[:50], f)
    with pytest.raises(ValueError, match="2-D"):
        call(codes[:, 0], f)
    with pytest.raises(ValueError, match="2-D"):
        call(codes, f[:, 0])
