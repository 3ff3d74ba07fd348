"""SAP score: reference unit cases, both factor types, invariances, errors."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.svm import LinearSVC

from priorlab.metrics import sap, sap_score_matrix


def _factors(n, sizes, seed):
    rs = np.random.RandomState(seed)
    return np.stack([rs.randint(s, size=n) for s in sizes], axis=1)


def test_sap_continuous_reference_unit_cases():
    f_tr, f_te = _factors(3000, [10] * 10, 0), _factors(3000, [10] * 10, 1)
    x_tr, x_te = f_tr.astype(float), f_te.astype(float)
    assert 0.9 <= sap(x_tr, f_tr, x_te, f_te, continuous_factors=True) <= 1.0
    assert sap(np.zeros_like(x_tr), f_tr, np.zeros_like(x_te), f_te, continuous_factors=True) <= 0.2
    dup = sap(np.hstack([x_tr, x_tr]), f_tr, np.hstack([x_te, x_te]), f_te, continuous_factors=True)
    assert dup <= 0.2


def test_sap_continuous_matrix_is_squared_correlation():
    rs = np.random.RandomState(2)
    f = _factors(500, [5, 7], 3)
    x = np.stack([f[:, 0] + rs.randn(500), rs.randn(500), np.full(500, 3.0)], axis=1)
    s = sap_score_matrix(x, f, x, f, continuous_factors=True)
    for i in range(2):
        for j in range(2):
            c = np.cov(x[:, i], f[:, j], ddof=1)
            assert s[i, j] == pytest.approx(c[0, 1] ** 2 / (c[0, 0] * c[1, 1]), abs=1e-12)
    np.testing.assert_array_equal(s[2], 0.0)  # constant code dim scores 0


def test_sap_discrete_matrix_and_value():
    f_tr, f_te = _factors(800, [2, 2, 3], 4), _factors(400, [2, 2, 3], 5)
    rs = np.random.RandomState(6)
    x_tr = f_tr + 0.3 * rs.randn(*f_tr.shape)
    x_te = f_te + 0.3 * rs.randn(*f_te.shape)
    s = sap_score_matrix(x_tr, f_tr, x_te, f_te)
    ref = np.zeros((3, 3))
    for i in range(3):
        for j in range(3):
            clf = LinearSVC(C=0.01, class_weight="balanced").fit(x_tr[:, i:i + 1], f_tr[:, j])
            ref[i, j] = np.mean(clf.predict(x_te[:, i:i + 1]) == f_te[:, j])
    np.testing.assert_allclose(s, ref, atol=1e-12)
    assert np.all(np.diag(s)[:2] > 0.9)
    srt = np.sort(ref, axis=0)
    assert sap(x_tr, f_tr, x_te, f_te) == pytest.approx(np.mean(srt[-1] - srt[-2]), abs=1e-12)
    perm = [2, 0, 1]
    assert sap(x_tr[:, perm], f_tr, x_te[:, perm], f_te) == pytest.approx(sap(x_tr, f_tr, x_te, f_te), abs=1e-12)


def test_sap_drops_along_noise_ladder():
    f_tr, f_te = _factors(2000, [3, 6, 10, 8, 8], 7), _factors(2000, [3, 6, 10, 8, 8], 8)
    rs = np.random.RandomState(9)
    n_tr, n_te = rs.randn(*f_tr.shape), rs.randn(*f_te.shape)
    scores = [sap(f_tr + s * n_tr, f_tr, f_te + s * n_te, f_te, continuous_factors=True)
              for s in (0.0, 1.0, 4.0, 16.0)]
    assert all(a > b for a, b in zip(scores, scores[1:])), scores


def test_sap_bad_inputs():
    f = _factors(100, [3, 4], 0)
    x = np.random.RandomState(0).randn(100, 3)
    with pytest.raises(ValueError, match="at least 2 code dimensions"):
        sap(x[:, :1], f, x[:, :1], f)
    with pytest.raises(ValueError, match="constant"):
        sap(x, np.stack([f[:, 0], np.ones(100)], axis=1), x, f, continuous_factors=True)
    with pytest.raises(ValueError, match="dims"):
        sap(x, f, x[:, :2], f)
    bad = x.copy()
    bad[0, 0] = np.inf
    with pytest.raises(ValueError, match="inf"):
        sap(bad, f, x, f)
