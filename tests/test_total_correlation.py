"""Tests for the beta-TCVAE minibatch estimators (Chen et al. 2018): MWS and MSS."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
from scipy.stats import norm

from priorlab.models.total_correlation import (
    log_density_gaussian,
    log_importance_weight_matrix,
    mws_decomposition,
)

F64 = torch.float64


def _gaussian_batch(seed: int, batch: int, dim: int, rho: float, scale: float):
    """Posterior means from an equicorrelated N(0, C_rho); z ~ N(mu, scale^2 I)."""
    gen = torch.Generator().manual_seed(seed)
    cov = torch.full((dim, dim), rho, dtype=F64) + (1.0 - rho) * torch.eye(dim, dtype=F64)
    mu = torch.randn(batch, dim, generator=gen, dtype=F64) @ torch.linalg.cholesky(cov).T
    logvar = torch.full((batch, dim), 2.0 * math.log(scale), dtype=F64)
    z = mu + scale * torch.randn(batch, dim, generator=gen, dtype=F64)
    return z, mu, logvar


def test_log_density_gaussian_matches_scipy() -> None:
    gen = torch.Generator().manual_seed(0)
    z, mu, lv = (torch.randn(5, 3, generator=gen, dtype=F64) for _ in range(3))
    ref = norm.logpdf(z.numpy(), loc=mu.numpy(), scale=np.exp(0.5 * lv.numpy()))
    np.testing.assert_allclose(log_density_gaussian(z, mu, lv).numpy(), ref, rtol=1e-12)


def test_tiny_example_matches_direct_computation() -> None:
    z = [[0.3, -1.0], [1.2, 0.4], [-0.5, 0.9]]
    mu = [[0.0, -0.8], [1.0, 0.0], [-0.2, 1.5]]
    sd = [[0.5, 1.2], [0.8, 0.6], [1.1, 0.4]]
    n_data, b, d = 10, 3, 2

    def q(i: int, k: int, dims: list[int]) -> float:  # q(z_i restricted to dims | n_k)
        return math.prod(norm.pdf(z[i][j], mu[k][j], sd[k][j]) for j in dims)

    mws_qz = [math.log(sum(q(i, k, [0, 1]) for k in range(b)) / (b * n_data)) for i in range(b)]
    mws_prod = [
        sum(math.log(sum(q(i, k, [j]) for k in range(b)) / (b * n_data)) for j in range(d)) for i in range(b)
    ]
    m = b - 1

    def w(i: int, k: int) -> float:
        if k == i:
            return 1.0 / n_data
        if k == (i + 1) % b:
            return (n_data - m) / (n_data * m)
        return 1.0 / m

    mss_qz = [math.log(sum(w(i, k) * q(i, k, [0, 1]) for k in range(b))) for i in range(b)]
    mss_prod = [sum(math.log(sum(w(i, k) * q(i, k, [j]) for k in range(b))) for j in range(d)) for i in range(b)]

    zt, mut = torch.tensor(z, dtype=F64), torch.tensor(mu, dtype=F64)
    lvt = 2.0 * torch.log(torch.tensor(sd, dtype=F64))
    for est, ref_qz, ref_prod in (("mws", mws_qz, mws_prod), ("mss", mss_qz, mss_prod)):
        out = mws_decomposition(zt, mut, lvt, n_data, estimator=est)
        np.testing.assert_allclose(out["log_qz"].numpy(), ref_qz, rtol=1e-12)
        np.testing.assert_allclose(out["log_prod_qzj"].numpy(), ref_prod, rtol=1e-12)
    own = [math.log(q(i, i, [0, 1])) for i in range(b)]
    np.testing.assert_allclose(out["log_qz_given_x"].numpy(), own, rtol=1e-12)


def test_identical_posteriors_expose_the_mws_offset_and_mss_exactness() -> None:
    """All q(z|n) = N(0, I): q(z) is exactly N(0, I), whatever the batch."""
    b, d, n_data = 8, 4, 1000
    z = torch.randn(b, d, generator=torch.Generator().manual_seed(1), dtype=F64)
    zeros = torch.zeros(b, d, dtype=F64)
    true_log_qz = log_density_gaussian(z, zeros, zeros).sum(1)
    mws = mws_decomposition(z, zeros, zeros, n_data)
    torch.testing.assert_close(mws["log_qz"], true_log_qz - math.log(n_data))
    torch.testing.assert_close(mws["total_correlation"], torch.full((b,), (d - 1) * math.log(n_data), dtype=F64))
    mss = mws_decomposition(z, zeros, zeros, n_data, estimator="mss")
    torch.testing.assert_close(mss["log_qz"], true_log_qz)
    torch.testing.assert_close(mss["total_correlation"], torch.zeros(b, dtype=F64), atol=1e-12, rtol=0.0)


def test_mss_estimate_of_q_z_is_unbiased_over_all_minibatches() -> None:
    """Enumerate every ordered minibatch (n*, two others) of a 5-point data set: E[q_hat(z)] = q(z)."""
    gen = torch.Generator().manual_seed(2)
    n_data, b = 5, 3
    mu_all = torch.randn(n_data, 2, generator=gen, dtype=F64)
    lv_all = 0.5 * torch.randn(n_data, 2, generator=gen, dtype=F64)
    z0 = torch.tensor([0.2, -0.3], dtype=F64)
    true_qz = log_density_gaussian(z0, mu_all, lv_all).sum(1).exp().mean()
    for n_star in range(n_data):
        others = [n for n in range(n_data) if n != n_star]
        mss_vals, mws_vals, mws_expected = [], [], []
        for pair in itertools.permutations(others, b - 1):
            idx = torch.tensor([n_star, *pair])
            z = z0.expand(b, 2)  # only row 0 (sample of n*) is read
            for est, store in (("mss", mss_vals), ("mws", mws_vals)):
                out = mws_decomposition(z, mu_all[idx], lv_all[idx], n_data, estimator=est)
                store.append(out["log_qz"][0].exp())
            dens = log_density_gaussian(z0, mu_all[idx], lv_all[idx]).sum(1).exp()
            mws_expected.append(dens.sum() / (b * n_data))
        torch.testing.assert_close(torch.stack(mss_vals).mean(), true_qz, rtol=1e-12, atol=0.0)
        torch.testing.assert_close(torch.stack(mws_vals), torch.stack(mws_expected))
        assert torch.stack(mws_vals).mean() < 0.5 * true_qz  # MWS is biased low


def test_product_batch_has_tc_near_zero_with_dataset_size_equal_to_batch() -> None:
    """N = B: MWS equals the batch-mixture TC plus (D - 1) log B exactly; both estimators ~ 0 here."""
    b, d = 256, 3
    mws_tc, mss_tc = [], []
    for seed in range(3):
        z, mu, lv = _gaussian_batch(seed, b, d, rho=0.0, scale=1.0)
        mws_tc.append(mws_decomposition(z, mu, lv, b)["total_correlation"].mean() - (d - 1) * math.log(b))
        mss_tc.append(mws_decomposition(z, mu, lv, b, estimator="mss")["total_correlation"].mean())
    assert abs(torch.stack(mws_tc).mean()) < 0.03
    assert abs(torch.stack(mss_tc).mean()) < 0.03


def test_correlated_batch_tc_is_positive_and_increases_with_correlation() -> None:
    """Reference: for a Gaussian aggregate with correlation r, TC = -0.5 log(1 - r^2), D = 2."""
    b, d, scale = 256, 2, 0.5
    for est, offset in (("mws", (d - 1) * math.log(b)), ("mss", 0.0)):
        means = []
        for rho in (0.0, 0.5, 0.9):
            tcs = [
                mws_decomposition(*_gaussian_batch(s, b, d, rho, scale), b, estimator=est)["total_correlation"].mean()
                for s in range(3)
            ]
            tc = torch.stack(tcs).mean().item() - offset
            r = rho / (1.0 + scale**2)
            assert abs(tc - (-0.5 * math.log(1.0 - r**2))) < 0.06, (est, rho, tc)
            means.append(tc)
        assert means[1] > means[0] + 0.05 and means[2] > means[1] + 0.2, (est, means)
        assert means[1] > 0 and means[2] > 0


def test_terms_sum_to_the_monte_carlo_kl_and_prior_defaults_to_standard_normal() -> None:
    z, mu, lv = _gaussian_batch(3, 16, 3, rho=0.3, scale=0.7)
    for est in ("mws", "mss"):
        out = mws_decomposition(z, mu, lv, 1000, estimator=est)
        total = out["mutual_info"] + out["total_correlation"] + out["dimwise_kl"]
        torch.testing.assert_close(total, out["log_qz_given_x"] - out["log_pz"])
        ref_pz = torch.distributions.Normal(0.0, 1.0).log_prob(z).sum(1)
        torch.testing.assert_close(out["log_pz"], ref_pz)
        ref_qzx = torch.distributions.Normal(mu, torch.exp(0.5 * lv)).log_prob(z).sum(1)
        torch.testing.assert_close(out["log_qz_given_x"], ref_qzx)
    custom = torch.full((16,), -3.0, dtype=F64)
    out = mws_decomposition(z, mu, lv, 1000, log_pz=custom)
    torch.testing.assert_close(out["dimwise_kl"], out["log_prod_qzj"] + 3.0)


def test_mss_weight_matrix_structure() -> None:
    n_data, b = 50, 6
    w = log_importance_weight_matrix(b, n_data, dtype=F64).exp()
    m = b - 1
    torch.testing.assert_close(w.sum(1), torch.ones(b, dtype=F64))
    torch.testing.assert_close(torch.diagonal(w), torch.full((b,), 1.0 / n_data, dtype=F64))
    idx = torch.arange(b)
    torch.testing.assert_close(w[idx, (idx + 1) % b], torch.full((b,), (n_data - m) / (n_data * m), dtype=F64))
    assert int((w == 1.0 / m).sum()) == b * (b - 2)
    w2 = log_importance_weight_matrix(2, 10, dtype=F64).exp()
    torch.testing.assert_close(w2, torch.tensor([[0.1, 0.9], [0.9, 0.1]], dtype=F64))


def test_invalid_inputs_raise_value_error() -> None:
    z = torch.zeros(4, 3)
    with pytest.raises(ValueError, match="mu"):
        mws_decomposition(z, torch.zeros(4, 2), z, 10)
    with pytest.raises(ValueError, match="dataset_size"):
        mws_decomposition(z, z, z, 3)
    with pytest.raises(ValueError, match="estimator"):
        mws_decomposition(z, z, z, 10, estimator="iwae")
    with pytest.raises(ValueError, match="log_pz"):
        mws_decomposition(z, z, z, 10, log_pz=torch.zeros(3))
    with pytest.raises(ValueError, match="z must be"):
        mws_decomposition(torch.zeros(4), torch.zeros(4), torch.zeros(4), 10)
    with pytest.raises(ValueError, match="batch_size >= 2"):
        log_importance_weight_matrix(1, 10)
