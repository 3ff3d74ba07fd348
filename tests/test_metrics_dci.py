"""DCI: closed-form importance matrices, reference unit cases, and the fast backend's agreement.

Agreement of backend="hist" with the reference backend="gbt" (|Δ disentanglement|,
|Δ completeness|) is asserted <= 0.05 here on small problems; the numbers measured at
the reference's sizes are quoted in priorlab.metrics.dci's docstring.
"""

from __future__ import annotations

import joblib
import numpy as np
import pytest

from priorlab.metrics import completeness, dci, disentanglement
from priorlab.metrics.dci import equivalent_code_groups, share_tied_importance

LN2_LN10 = np.log(2) / np.log(10)


def _factors(n, sizes, seed):
    rs = np.random.RandomState(seed)
    return np.stack([rs.randint(s, size=n) for s in sizes], axis=1)


def _entropy(p, base):
    p = p / p.sum()
    p = p[p > 0]
    return -(p * np.log(p)).sum() / np.log(base)


@pytest.mark.parametrize("fn", [disentanglement, completeness])
def test_closed_form_reference_cases(fn):
    diag = np.diag(5.0 * np.ones(5))
    assert fn(diag) == pytest.approx(1.0)
    assert fn(np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]])) == pytest.approx(1.0)
    assert fn(np.zeros((10, 10))) == pytest.approx(0.0, abs=1e-7)
    assert fn(diag[:2, :]) == pytest.approx(1.0)
    redundant = fn(np.vstack([diag, diag]))
    one_code_two_factors = fn(np.hstack([diag, diag]))
    if fn is disentanglement:
        assert redundant == pytest.approx(1.0)
        assert one_code_two_factors == pytest.approx(1.0 - LN2_LN10)
    else:
        assert redundant == pytest.approx(1.0 - LN2_LN10)
        assert one_code_two_factors == pytest.approx(1.0)


def test_closed_form_general_matrix():
    assert disentanglement(np.array([[1.0, 1.0], [0.0, 1.0]])) == pytest.approx(1 / 3, abs=1e-9)
    assert completeness(np.array([[1.0, 1.0], [0.0, 1.0]])) == pytest.approx(1 / 3, abs=1e-9)
    r = np.array([[0.6, 0.2], [0.2, 0.0], [0.2, 0.8]])
    d = sum(r[i].sum() / r.sum() * (1 - _entropy(r[i], 2)) for i in range(3))
    c = sum(r[:, j].sum() / r.sum() * (1 - _entropy(r[:, j], 3)) for j in range(2))
    assert disentanglement(r) == pytest.approx(d, abs=1e-9)
    assert completeness(r) == pytest.approx(c, abs=1e-9)


def test_tied_dims_detection():
    rs = np.random.RandomState(0)
    x = rs.randn(50, 3)
    codes = np.hstack([x, 2 * x[:, :1] + 1, np.exp(-x[:, 1:2])])
    np.testing.assert_array_equal(equivalent_code_groups(codes), [0, 1, 2, 0, 1])
    r = np.array([[1.0, 0.0], [0.0, 0.5], [0.0, 0.5], [0.0, 0.0], [0.0, 0.0]])
    np.testing.assert_allclose(share_tied_importance(r, equivalent_code_groups(codes)),
                               [[0.5, 0], [0, 0.25], [0, 0.5], [0.5, 0], [0, 0.25]])


@pytest.mark.parametrize("backend", ["gbt", "hist"])
def test_reference_unit_cases(backend):
    f_tr, f_te = _factors(250, [4] * 5, 0), _factors(150, [4] * 5, 1)
    x_tr, x_te = f_tr.astype(float), f_te.astype(float)
    ident = dci(x_tr, f_tr, x_te, f_te, backend=backend)
    for key in ("disentanglement", "completeness", "informativeness_train", "informativeness_test"):
        assert 0.9 <= ident[key] <= 1.0, (key, ident[key])
    assert ident["importance_matrix"].shape == (5, 5) and ident["backend"] == backend
    dup = dci(np.hstack([x_tr, x_tr]), f_tr, np.hstack([x_te, x_te]), f_te, backend=backend)
    assert dup["disentanglement"] >= 0.9
    assert dup["completeness"] == pytest.approx(1 - LN2_LN10, abs=0.05)


def test_scrambled_codes_score_low():
    # reference bad case: each point's code is a random permutation of its factors
    f_tr, f_te = _factors(250, [4] * 5, 2), _factors(150, [4] * 5, 3)
    rs = np.random.RandomState(4)
    scramble = lambda f: np.take_along_axis(f, np.argsort(rs.rand(*f.shape), axis=1), axis=1).astype(float)
    out = dci(scramble(f_tr), f_tr, scramble(f_te), f_te, backend="gbt")
    assert out["disentanglement"] <= 0.2 and out["completeness"] <= 0.2


def _representations(f, seed):
    """Continuous codes of several kinds for factors f (values scaled to (0, 1))."""
    rs = np.random.RandomState(seed)
    sizes = f.max(axis=0) + 1
    u = (f + 0.5) / sizes
    n, k = u.shape
    q = np.linalg.qr(np.random.RandomState(99).randn(k, k))[0]
    return {
        "identity": u + 0.01 * rs.randn(n, k),
        "noisy": np.hstack([u + 0.15 * rs.randn(n, k), rs.randn(n, 2)]),
        "rotated": u @ q + 0.02 * rs.randn(n, k),
        "dead": np.hstack([u[:, :2] + 0.01 * rs.randn(n, 2), 1e-3 * rs.randn(n, 2), rs.randn(n, 2)]),
    }


def _agreement(n_train, sizes, names, seed):
    f = _factors(n_train + n_train // 2, sizes, seed)
    reps = _representations(f, seed + 1)
    gaps = {}
    for name in names:
        x = reps[name]
        args = (x[:n_train], f[:n_train], x[n_train:], f[n_train:])
        ref, fast = dci(*args, backend="gbt"), dci(*args, backend="hist")
        gaps[name] = (abs(ref["disentanglement"] - fast["disentanglement"]),
                      abs(ref["completeness"] - fast["completeness"]))
    return gaps


def test_hist_backend_agrees_with_gbt_small():
    gaps = _agreement(300, [3, 4, 5], ["noisy", "dead"], seed=10)
    assert max(max(g) for g in gaps.values()) <= 0.05, gaps


@pytest.mark.slow
def test_hist_backend_agrees_with_gbt_bigger():
    gaps = _agreement(1500, [3, 6, 10], ["noisy", "rotated", "dead"], seed=20)
    assert max(max(g) for g in gaps.values()) <= 0.05, gaps


def test_permutation_invariance_and_noise_ladder():
    f = _factors(600, [2, 3, 4], 5)
    rs = np.random.RandomState(6)
    u = (f + 0.5) / np.array([2, 3, 4])
    noise = rs.randn(*u.shape)
    ds, infos = [], []
    for sigma in (0.0, 0.1, 1.0):
        x = u + sigma * noise
        out = dci(x[:400], f[:400], x[400:], f[400:], backend="hist")
        ds.append(out["disentanglement"])
        infos.append(out["informativeness_test"])
        if sigma == 0.1:
            perm = [2, 0, 1]
            p = dci(x[:400, perm], f[:400], x[400:, perm], f[400:], backend="hist")
            assert p["disentanglement"] == pytest.approx(out["disentanglement"], abs=0.02)
            assert p["completeness"] == pytest.approx(out["completeness"], abs=0.02)
            np.testing.assert_allclose(p["importance_matrix"], out["importance_matrix"][perm], atol=0.03)
    assert all(a > b for a, b in zip(ds, ds[1:])), ds
    assert all(a > b for a, b in zip(infos, infos[1:])), infos


def test_n_jobs_gives_the_same_result():
    f = _factors(300, [3, 4], 7)
    x = f + 0.3 * np.random.RandomState(8).randn(300, 2)
    a = dci(x[:200], f[:200], x[200:], f[200:], backend="hist", n_jobs=1)
    with joblib.parallel_config(backend="threading"):  # no process start-up in the fast tests
        b = dci(x[:200], f[:200], x[200:], f[200:], backend="hist", n_jobs=2)
    np.testing.assert_allclose(a["importance_matrix"], b["importance_matrix"], atol=1e-12)


def test_bad_inputs():
    f = _factors(100, [3, 4], 0)
    x = np.random.RandomState(0).randn(100, 3)
    with pytest.raises(ValueError, match="single value"):
        dci(x, np.stack([f[:, 0], np.zeros(100, int)], axis=1), x, f)
    with pytest.raises(ValueError, match="at least 2 factors"):
        dci(x, f[:, :1], x, f[:, :1])
    with pytest.raises(ValueError, match="at least 2 code dimensions"):
        dci(x[:, :1], f, x[:, :1], f)
    with pytest.raises(ValueError, match="backend"):
        dci(x, f, x, f, backend="xgb")
    with pytest.raises(ValueError, match="NaN"):
        dci(x * np.nan, f, x, f)
    with pytest.raises(ValueError, match="non-negative"):
        disentanglement(-np.eye(2))
