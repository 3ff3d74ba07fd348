"""β-VAE and FactorVAE scores on a tiny in-test ground-truth data set."""

from __future__ import annotations

import numpy as np
import pytest

from priorlab.data.base import GroundTruthData
from priorlab.metrics import beta_vae_score, factor_vae_score
from priorlab.metrics.beta_vae import beta_vae_features
from priorlab.metrics.factor_vae import factor_vae_votes


class IdentityData(GroundTruthData):
    """Observations are the factors themselves (as disentanglement_lib's IdentityObservationsData)."""

    def __init__(self, sizes=(10, 10, 10, 10, 10)):
        self._sizes = tuple(sizes)
        self.factor_names = [f"f{i}" for i in range(len(sizes))]

    @property
    def factor_sizes(self):
        return self._sizes

    @property
    def observation_shape(self):
        return (len(self._sizes),)

    def sample_observations_from_factors(self, factors, random_state):
        return np.asarray(factors, dtype=np.float32)


class CountingRepresent:
    def __init__(self, fn):
        self.fn, self.calls = fn, 0

    def __call__(self, x):
        self.calls += 1
        return self.fn(x)


def test_beta_vae_pairs_share_exactly_the_label_factor():
    data = IdentityData()
    feats, labels = beta_vae_features(data, lambda x: x, 400, 64, np.random.RandomState(0))
    assert feats.shape == (400, 5)
    np.testing.assert_array_equal(feats[np.arange(400), labels], 0.0)
    mask = np.ones_like(feats, dtype=bool)
    mask[np.arange(400), labels] = False
    assert np.all(feats[mask] > 0)
    # free factors: E|U1 - U2| for U uniform on 10 values is (n^2 - 1) / (3n) = 3.3
    assert feats[mask].mean() == pytest.approx(3.3, abs=0.03)
    assert np.all(np.abs(np.bincount(labels, minlength=5) - 80) < 30)


def test_beta_vae_reference_unit_cases():
    data = IdentityData()
    rep = CountingRepresent(lambda x: x)
    ident = beta_vae_score(data, rep, 0, batch_size=5, num_train=2000, num_eval=2000)
    assert 0.9 <= ident["train_accuracy"] <= 1.0 and 0.9 <= ident["eval_accuracy"] <= 1.0
    # batched: 2 x 5 x 4000 observations in chunks of 8192 -> a handful of calls, not 8000
    assert rep.calls <= 6
    zero = beta_vae_score(data, np.zeros_like, 0, batch_size=5, num_train=1000, num_eval=1000)
    assert zero["eval_accuracy"] <= 0.3


def test_beta_vae_drops_with_noise():
    data = IdentityData()
    accs = []
    for sigma in (0.0, 2.0, 8.0):
        noise_rs = np.random.RandomState(1)
        rep = lambda x, s=sigma, r=noise_rs: x + s * r.randn(*x.shape)
        accs.append(beta_vae_score(data, rep, 0, batch_size=16, num_train=1000, num_eval=1000)["eval_accuracy"])
    assert accs[0] > 0.95 and accs[0] > accs[1] > accs[2], accs


def test_factor_vae_votes_go_to_the_fixed_factor():
    data = IdentityData()
    gv = np.full(7, 8.25)
    active = np.array([True] * 5 + [False] * 2)
    votes = factor_vae_votes(data, lambda x: np.hstack([x, np.zeros((len(x), 2))]), 500, 16,
                             np.random.RandomState(0), gv, active)
    assert votes.sum() == 500
    assert votes[:, 5:].sum() == 0  # pruned dims never win
    np.testing.assert_array_equal(votes[:, :5], np.diag(np.diag(votes)))
    assert np.all(np.abs(np.diag(votes) - 100) < 40)


def test_factor_vae_reference_unit_cases():
    data = IdentityData()
    rep = CountingRepresent(lambda x: x)
    ident = factor_vae_score(data, rep, 0, batch_size=5, num_train=3000, num_eval=2000,
                             num_variance_estimate=2500)
    assert 0.9 <= ident["train_accuracy"] <= 1.0 and 0.9 <= ident["eval_accuracy"] <= 1.0
    assert ident["num_kept_dims"] == 5 and ident["num_active_dims"] == 5
    assert rep.calls <= 6
    zero = factor_vae_score(data, np.zeros_like, 0, batch_size=5, num_train=3000, num_eval=2000,
                            num_variance_estimate=2500)
    assert zero == {"train_accuracy": 0.0, "eval_accuracy": 0.0, "num_active_dims": 0, "num_kept_dims": 0}


def test_factor_vae_pruning_permutation_and_noise():
    data = IdentityData()
    padded = factor_vae_score(data, lambda x: np.hstack([np.zeros((len(x), 2)), x[:, ::-1]]), 0,
                              batch_size=16, num_train=500, num_eval=500, num_variance_estimate=1000)
    assert padded["eval_accuracy"] == 1.0
    assert padded["num_kept_dims"] == 5
    assert padded["num_active_dims"] == 7  # reference quirk: len(mask), all dims
    accs = []
    for sigma in (0.0, 3.0, 12.0):
        noise_rs = np.random.RandomState(2)
        rep = lambda x, s=sigma, r=noise_rs: x + s * r.randn(*x.shape)
        accs.append(factor_vae_score(data, rep, 0, batch_size=16, num_train=1000, num_eval=1000,
                                     num_variance_estimate=1000)["eval_accuracy"])
    assert accs[0] == 1.0 and accs[0] > accs[1] > accs[2], accs


def test_bad_represent_raises():
    data = IdentityData()
    with pytest.raises(ValueError, match="NaN"):
        beta_vae_score(data, lambda x: x * np.nan, 0, num_train=10, num_eval=10)
    with pytest.raises(ValueError, match=r"codes \[n, D\]"):
        factor_vae_score(data, lambda x: x[:, 0], 0, num_train=10, num_eval=10, num_variance_estimate=10)
    with pytest.raises(ValueError, match="random_state"):
        beta_vae_score(data, lambda x: x, None, num_train=10, num_eval=10)
