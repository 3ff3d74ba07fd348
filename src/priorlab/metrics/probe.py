"""Linear probe: how linearly decodable a label is from the codes."""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler

from .utils import check_codes


def probe_accuracy(codes_train, y_train, codes_test, y_test, random_state=0, max_iter: int = 1000) -> float:
    """Test accuracy of a multinomial logistic regression on standardised codes.

    The scaler is fitted on the training codes (constant dims are left
    centred); sklearn's default L2 penalty (C = 1) and lbfgs solver.
    """
    x = check_codes(codes_train, "codes_train")
    xt = check_codes(codes_test, "codes_test")
    y, yt = np.asarray(y_train), np.asarray(y_test)
    if y.ndim != 1 or yt.ndim != 1:
        raise ValueError(f"y_train and y_test must be 1-D label arrays, got {y.shape} and {yt.shape}")
    if y.shape[0] != x.shape[0] or yt.shape[0] != xt.shape[0]:
        raise ValueError("labels and codes must have the same number of points")
    if x.shape[1] != xt.shape[1]:
        raise ValueError(f"codes_train has {x.shape[1]} dims but codes_test has {xt.shape[1]}")
    if np.unique(y).size < 2:
        raise ValueError("y_train takes a single value; a probe needs at least 2 classes")
    scaler = StandardScaler().fit(x)
    seed = random_state if isinstance(random_state, np.random.RandomState) else int(random_state)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        clf = LogisticRegression(max_iter=max_iter, random_state=seed).fit(scaler.transform(x), y)
    return float(np.mean(clf.predict(scaler.transform(xt)) == yt))
