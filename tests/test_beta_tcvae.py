"""β-TCVAE model (Chen et al. 2018): objective = ELBO + weighted decomposition terms."""

from __future__ import annotations

import math

import pytest
import torch

from priorlab.config import BetaTCVAEParams, ParamsError, SetupParams, VAEParams
from priorlab.models import build_model
from tests.helpers import tiny_data

SETUP = SetupParams(dataset="x", latent_dim=3, hidden=[16])
OBS = (1, 8, 8)


def tcvae(seed: int = 0, **kw):
    torch.manual_seed(seed)
    m = build_model(SETUP, BetaTCVAEParams(kind="beta_tcvae", **kw), OBS)
    m.set_dataset_size(1000)
    return m


def test_unit_weights_give_exactly_the_elbo():
    m = tcvae(tc_weight=1.0)
    x = tiny_data(32, OBS)
    torch.manual_seed(0)
    loss, logs = m.loss(x)
    assert loss.item() == pytest.approx(-logs["elbo"], rel=1e-6)
    assert logs["tc_penalty"] == 0.0


def test_decomposition_sums_to_the_mc_kl_and_matches_the_analytic_kl():
    m = tcvae()
    x = tiny_data(64, OBS)
    with torch.no_grad():
        q = m.posterior(x)
        z = q.sample((400,))  # [S, B, D]
        total = []
        for zs in z:
            d = m.decomposition(q, zs)
            mc = q.log_prob(zs) - m.prior_distribution(None).log_prob(zs)
            parts = d["mutual_info"] + d["total_correlation"] + d["dimwise_kl"]
            assert torch.allclose(parts, mc, atol=1e-4)
            total.append(parts)
        est = torch.stack(total).mean(0)  # [B]
        analytic = torch.distributions.kl_divergence(q, m.prior_distribution(None))
    se = torch.stack(total).std(0) / math.sqrt(400)
    assert torch.all((est - analytic).abs() < 5 * se + 1e-3)


def test_tc_weight_adds_beta_minus_one_times_tc():
    x = tiny_data(32, OBS)
    base, heavy = tcvae(tc_weight=1.0), tcvae(tc_weight=6.0)
    torch.manual_seed(0)
    l1, logs1 = base.loss(x)
    torch.manual_seed(0)
    l6, logs6 = heavy.loss(x)
    assert logs1["elbo"] == pytest.approx(logs6["elbo"], abs=1e-4)  # same weights, same noise
    assert (l6 - l1).item() == pytest.approx(5.0 * logs6["total_correlation"], rel=1e-4)


def test_mws_gradients_do_not_depend_on_dataset_size():
    x = tiny_data(32, OBS)
    grads = []
    for n in (100, 10**6):
        m = tcvae()
        m.set_dataset_size(n)
        torch.manual_seed(0)
        loss, _ = m.loss(x)
        loss.backward()
        grads.append(torch.cat([p.grad.flatten() for p in m.parameters()]))
    assert torch.allclose(grads[0], grads[1], atol=1e-4, rtol=1e-4)


def test_same_nets_as_the_vae_and_params_checked():
    torch.manual_seed(0)
    vae = build_model(SETUP, VAEParams(kind="vae"), OBS)
    m = tcvae()
    assert [p.shape for p in vae.parameters()] == [p.shape for p in m.parameters()]
    with pytest.raises(ParamsError, match="beta must be 1"):
        BetaTCVAEParams(kind="beta_tcvae", beta=4.0).check("models.t")
    with pytest.raises(ValueError, match="dataset size"):
        m.set_dataset_size(0)
