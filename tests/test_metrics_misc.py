"""Correlation ordering, active units, clustering accuracy, probes, ranking, support F1, versions."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from priorlab.metrics import (active_dims, cluster_accuracy, correlation_contrast, correlation_matrix,
                              ndcg_at_k, order_latents_by_source, probe_accuracy, recall_at_k, support_f1,
                              versions)


def test_correlation_matrix_matches_corrcoef_and_handles_constants():
    rs = np.random.RandomState(0)
    s = rs.randn(300, 3)
    z = np.hstack([s @ rs.randn(3, 4), np.full((300, 1), 1.5)])
    c = correlation_matrix(z, s)
    ref = np.abs(np.corrcoef(s.T, z[:, :4].T)[:3, 3:])
    np.testing.assert_allclose(c[:, :4], ref, atol=1e-12)
    np.testing.assert_array_equal(c[:, 4], 0.0)
    with pytest.raises(ValueError, match="points"):
        correlation_matrix(z[:10], s)


def test_order_latents_by_source_hand_example():
    corr = np.array([[0.90, 0.05, 0.10, 0.00, 0.30],
                     [0.20, 0.00, 0.80, 0.03, 0.00]])
    out = order_latents_by_source(corr)
    # thresholded rows [.9,0,.1,0,.3] (mean .26) and [.2,0,.8,0,0] (mean .2):
    # latent 0 -> ratios 3.46 vs 1.0 -> source 0; latent 2 -> .38 vs 4 -> source 1;
    # latent 4 -> source 0; latents 1, 3 unused.
    np.testing.assert_array_equal(out["assignment"], [0, -1, 1, -1, 0])
    np.testing.assert_array_equal(out["order"], [0, 4, 2, 1, 3])
    np.testing.assert_allclose(out["matrix"], [[0.9, 0.3, 0.1, 0, 0], [0.2, 0, 0.8, 0, 0]])
    # the row-mean normalisation decides, not the raw maximum
    corr2 = np.array([[0.5, 0.5, 0.5, 0.4], [0.45, 0.0, 0.0, 0.0]])
    assert order_latents_by_source(corr2)["assignment"][0] == 1


def test_correlation_contrast():
    assert correlation_contrast(np.eye(3)) == pytest.approx(1.0)
    assert correlation_contrast(np.array([[0.8, 0.2, 0.0], [0.5, 0.5, 0.1]])) == pytest.approx(0.375)
    assert correlation_contrast(np.array([[0.0, 0.0], [0.6, 0.3]])) == pytest.approx(0.25)
    with pytest.raises(ValueError, match="2 latents"):
        correlation_contrast(np.ones((2, 1)))


def test_active_dims():
    rs = np.random.RandomState(1)
    codes = rs.randn(5000, 4) * np.sqrt([1.0, 0.005, 0.02, 0.0])
    assert active_dims(codes) == 2
    assert active_dims(np.array([0.5, 0.01, 0.011])) == 2  # strictly greater than the threshold
    assert active_dims(codes, threshold=0.001) == 3
    with pytest.raises(ValueError, match="NaN"):
        active_dims(np.array([[1.0, np.nan], [0.0, 1.0]]))


def test_cluster_accuracy():
    rs = np.random.RandomState(2)
    labels = rs.randint(4, size=200)
    perm = np.array([2, 0, 3, 1])
    assert cluster_accuracy(labels, perm[labels]) == 1.0
    # 6 points, 3 clusters, 2 labels: best one-to-one match gets 4 right
    y = np.array([0, 0, 0, 1, 1, 1])
    c = np.array([5, 5, 7, 7, 9, 9])
    assert cluster_accuracy(y, c) == pytest.approx(4 / 6)
    assert cluster_accuracy(y, c, many_to_one=True) == pytest.approx(5 / 6)
    with pytest.raises(ValueError, match="points"):
        cluster_accuracy(y, c[:5])


def test_probe_accuracy():
    rs = np.random.RandomState(3)
    y = rs.randint(3, size=600)
    centres = np.array([[0, 0, 0], [5, 0, 0], [0, 5, 0]], float)
    x = centres[y] * 100 + rs.randn(600, 3)  # large scale: standardisation matters for convergence
    assert probe_accuracy(x[:400], y[:400], x[400:], y[400:]) > 0.97
    noise_labels = rs.randint(3, size=600)  # independent of x: chance level
    assert probe_accuracy(x[:400], noise_labels[:400], x[400:], noise_labels[400:]) < 0.45
    with pytest.raises(ValueError, match="single value"):
        probe_accuracy(x, np.zeros(600), x, y)


def test_ranking_hand_example():
    scores = np.array([[0.9, 0.8, 0.7, 0.1, 0.2],
                       [0.1, 0.2, 0.3, 0.4, 0.5],
                       [0.5, 0.4, 0.3, 0.2, 0.1]])
    heldout = np.array([[0, 1, 0, 1, 0],
                        [1, 0, 0, 0, 0],
                        [0, 0, 0, 0, 0]])  # user 2 has no held-out item: ignored
    # user 0: top3 = items 0,1,2 -> hit at rank 2; recall = 1/min(3,2); DCG = 1/log2(3); IDCG = 1 + 1/log2(3)
    # user 1: top3 = items 4,3,2 -> no hit
    assert recall_at_k(scores, heldout, 3) == pytest.approx((0.5 + 0.0) / 2)
    assert ndcg_at_k(scores, heldout, 3) == pytest.approx(((1 / np.log2(3)) / (1 + 1 / np.log2(3))) / 2)
    # k = 5 finds everything; NDCG user 1: 1/log2(6)
    assert recall_at_k(scores, heldout, 5) == pytest.approx(1.0)
    ndcg5_u0 = (1 / np.log2(3) + 1 / np.log2(6)) / (1 + 1 / np.log2(3))
    assert ndcg_at_k(scores, heldout, 5) == pytest.approx((ndcg5_u0 + 1 / np.log2(6)) / 2)
    # excluding user 0's training items 0 and 2: top2 = items 1, 4 -> recall 1/2; user 1: 0
    exclude = np.array([[1, 0, 1, 0, 0], [0] * 5, [0] * 5])
    assert recall_at_k(scores, heldout, 2, exclude=exclude) == pytest.approx((0.5 + 0.0) / 2)
    assert ndcg_at_k(scores, heldout, 2, exclude=exclude) == pytest.approx((1 / (1 + 1 / np.log2(3))) / 2)
    assert ndcg_at_k(scores, sp.csr_matrix(heldout), 3) == pytest.approx(ndcg_at_k(scores, heldout, 3))
    with pytest.raises(ValueError, match="k must be"):
        recall_at_k(scores, heldout, 0)
    with pytest.raises(ValueError, match="NaN"):
        ndcg_at_k(scores * np.nan, heldout, 2)


def test_support_f1():
    w_true = np.array([[1.0, 0.0], [0.5, 0.0], [0.0, 2.0]])
    w_est = np.array([[0.9, 0.2], [0.05, 0.0], [0.0, -1.5]])
    # threshold 0.1: est support {(0,0),(0,1),(2,1)}; TP = 2, FP = 1, FN = 1 -> F1 = 4/6
    assert support_f1(w_est, w_true, 0.1) == pytest.approx(4 / 6)
    assert support_f1(w_true, w_true, 0.0) == 1.0
    with pytest.raises(ValueError, match="empty support"):
        support_f1(w_est, np.zeros_like(w_true), 0.1)
    with pytest.raises(ValueError, match="shape"):
        support_f1(w_est[:2], w_true, 0.1)


def test_versions():
    v = versions()
    assert set(v) == {"numpy", "scipy", "scikit-learn"}
    assert v["numpy"] == np.__version__
