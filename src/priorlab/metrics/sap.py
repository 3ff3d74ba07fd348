"""Separated Attribute Predictability (Kumar et al. 2018, Sec. 3).

Port of disentanglement_lib ``evaluation/metrics/sap_score.py``.  Score matrix
``S [D, K]``: for discrete factors, the test accuracy of
``LinearSVC(C=0.01, class_weight="balanced")`` trained on the single code
dimension i to predict factor j; for continuous factors, the squared Pearson
correlation ``cov(z_i, y_j)^2 / (var z_i var y_j)`` (0 when ``var z_i <= 1e-12``).
SAP = mean over factors of (largest - second largest) entry of the column.
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.svm import LinearSVC

from .utils import check_train_test, require_two_values


def sap_score_matrix(codes_train, factors_train, codes_test, factors_test,
                     continuous_factors: bool = False) -> np.ndarray:
    """The SAP score matrix ``[D, K]`` (see module docstring)."""
    x, y, xt, yt = check_train_test(codes_train, factors_train, codes_test, factors_test)
    d_dim, k_dim = x.shape[1], y.shape[1]
    if continuous_factors:
        yf = y.astype(np.float64)
        n = x.shape[0]
        xc = x - x.mean(axis=0)
        yc = yf - yf.mean(axis=0)
        cov = xc.T @ yc / (n - 1)
        var_x = np.sum(xc * xc, axis=0) / (n - 1)
        var_y = np.sum(yc * yc, axis=0) / (n - 1)
        if np.any(var_y <= 0):
            raise ValueError(f"factors_train: factor(s) {np.flatnonzero(var_y <= 0).tolist()} are constant")
        score = np.zeros((d_dim, k_dim))
        ok = var_x > 1e-12
        score[ok] = cov[ok] ** 2 / (var_x[ok, None] * var_y[None, :])
        return score
    require_two_values(y, "factors_train")
    score = np.zeros((d_dim, k_dim))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for i in range(d_dim):
            for j in range(k_dim):
                clf = LinearSVC(C=0.01, class_weight="balanced")
                clf.fit(x[:, i:i + 1], y[:, j])
                score[i, j] = np.mean(clf.predict(xt[:, i:i + 1]) == yt[:, j])
    return score


def sap(codes_train, factors_train, codes_test, factors_test, continuous_factors: bool = False) -> float:
    """SAP score of ``codes [N, D]`` for ``factors [N, K]`` (train / test split)."""
    score = sap_score_matrix(codes_train, factors_train, codes_test, factors_test, continuous_factors)
    if score.shape[0] < 2:
        raise ValueError("SAP needs at least 2 code dimensions (it takes the gap between the top two)")
    s = np.sort(score, axis=0)
    return float(np.mean(s[-1, :] - s[-2, :]))
