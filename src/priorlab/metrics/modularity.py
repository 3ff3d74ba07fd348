"""Modularity and explicitness (Ridgeway & Mozer 2018, "Learning Deep Disentangled
Embeddings With the F-Statistic Loss", Sec. 3).

Port of disentanglement_lib ``evaluation/metrics/modularity_explicitness.py``.
Modularity: from the discrete mutual information ``m [D, K]`` (same
discretisation as MIG), per code ``1 - delta_i`` with
``delta_i = (sum_j m_ij^2 - theta_i) / (theta_i (K - 1))``, ``theta_i = max_j m_ij^2``;
codes with zero MI to every factor score 0; mean over codes.
Explicitness: per factor, ROC-AUC (macro over one-hot classes) of a default
``LogisticRegression`` on the standardised codes (train mean / std);
averaged over factors.
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.preprocessing import MultiLabelBinarizer

from .discretise import discretised_codes, mutual_information
from .utils import check_train_test, require_two_values


def modularity(mutual_info) -> float:
    """Modularity score from a mutual-information matrix ``[D, K]`` (K >= 2)."""
    m = np.asarray(mutual_info, dtype=np.float64)
    if m.ndim != 2:
        raise ValueError(f"mutual_info must be 2-D [num_codes, num_factors], got shape {m.shape}")
    if m.shape[1] < 2:
        raise ValueError("modularity needs at least 2 factors (it divides by K - 1)")
    if not np.all(np.isfinite(m)):
        raise ValueError("mutual_info contains NaN or inf values")
    sq = np.square(m)
    max_sq = np.max(sq, axis=1)
    numerator = np.sum(sq, axis=1) - max_sq
    denominator = max_sq * (sq.shape[1] - 1.0)
    dead = max_sq == 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        score = 1.0 - numerator / np.where(dead, 1.0, denominator)
    score[dead] = 0.0
    return float(np.mean(score))


def explicitness_per_factor(x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray,
                            y_test: np.ndarray, align_classes: bool = False) -> tuple[float, float]:
    """Train / test ROC-AUC of a default logistic regression for one factor.

    The reference one-hot encodes the test labels on their own, so it fails when
    the test set misses a training class; that case raises ``ValueError`` here
    unless ``align_classes=True`` (deviation, off by default), which scores the
    test set on the classifier's classes, macro-averaging over the classes
    present in the test labels with both positives and negatives.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        clf = LogisticRegression().fit(x_train, y_train)
    p_train = clf.predict_proba(x_train)
    p_test = clf.predict_proba(x_test)
    mlb = MultiLabelBinarizer()
    roc_train = roc_auc_score(mlb.fit_transform(np.expand_dims(y_train, 1)), p_train)
    test_classes = np.unique(y_test)
    if test_classes.size == clf.classes_.size and np.array_equal(test_classes, clf.classes_):
        roc_test = roc_auc_score(mlb.fit_transform(np.expand_dims(y_test, 1)), p_test)
    elif align_classes:
        onehot = (y_test[:, None] == clf.classes_[None, :]).astype(int)
        keep = (onehot.sum(axis=0) > 0) & (onehot.sum(axis=0) < len(y_test))
        if not keep.any():
            raise ValueError("explicitness: no test class has both positives and negatives")
        roc_test = roc_auc_score(onehot[:, keep], p_test[:, keep])
    else:
        raise ValueError(
            f"explicitness: test labels {test_classes.tolist()} differ from the training classes "
            f"{clf.classes_.tolist()} (the reference cannot score this; use align_classes=True)")
    return float(roc_train), float(roc_test)


def modularity_explicitness(codes_train, factors_train, codes_test, factors_test, n_bins: int = 20,
                            discretised=None, align_classes: bool = False,
                            explicitness: bool = True) -> dict:
    """Modularity (from ``codes_train``) and explicitness (train / test).

    ``discretised`` optionally supplies the precomputed labels of ``codes_train``
    (shared with :func:`priorlab.metrics.mig`).  Constant code dimensions are
    standardised with std 1 instead of 0 (the reference would divide by zero and
    crash on the NaN; no score the reference produces changes).
    Returns ``{modularity, explicitness_score_train, explicitness_score_test}``;
    ``explicitness=False`` skips the logistic regressions (the costly part with
    many-class factors) and returns ``{modularity}`` only.
    """
    x, y, xt, yt = check_train_test(codes_train, factors_train, codes_test, factors_test)
    require_two_values(y, "factors_train")
    z = discretised_codes(x, n_bins, discretised, "codes_train")
    mod = modularity(mutual_information(z, y))
    if not explicitness:
        return {"modularity": mod}
    mean = x.mean(axis=0)
    std = x.std(axis=0)
    std = np.where(std > 0, std, 1.0)
    xn = (x - mean) / std
    xtn = (xt - mean) / std
    train, test = zip(*(explicitness_per_factor(xn, y[:, k], xtn, yt[:, k], align_classes)
                        for k in range(y.shape[1])))
    return {"modularity": mod,
            "explicitness_score_train": float(np.mean(train)),
            "explicitness_score_test": float(np.mean(test))}
