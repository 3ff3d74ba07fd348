"""VSC's released-code options (paper 002 fidelity): each against its definition, and the preset."""

from __future__ import annotations

import math

import pytest
import torch

from priorlab.config import SetupParams, VSCParams
from priorlab.models import build_model
from priorlab.models.vsc import spike_diagnostics
from priorlab.priors.spike_slab import (
    bernoulli_kl,
    bernoulli_kl_code,
    gaussian_kl,
    pseudo_input_mixture_kl,
    pseudo_input_mixture_kl_code,
    sharpen_spikes,
    sparsity_kl,
)
from tests.helpers import gen, tiny_data

SETUP = SetupParams(dataset="x", latent_dim=6, hidden=[16])


def test_sharpening_is_the_codes_sigmoid_and_keeps_its_range():
    gamma = torch.linspace(0.0, 1.0, 101, dtype=torch.float64)
    log_g = torch.log(gamma.clamp_min(1e-300))
    out = sharpen_spikes(log_g, 10.0).exp()
    torch.testing.assert_close(out, torch.sigmoid(10.0 * (gamma - 0.5)))
    lo, hi = 1 / (1 + math.exp(5.0)), 1 / (1 + math.exp(-5.0))
    assert out.min() >= lo - 1e-12 and out.max() <= hi + 1e-12 and bool((out.diff() > 0).all())
    with pytest.raises(ValueError, match="nu"):
        sharpen_spikes(log_g, 0.0)


def test_code_bernoulli_kl_matches_the_exact_kl_inside_and_keeps_gradients_at_the_ends():
    g = gen(0)
    q = torch.rand(200, generator=g, dtype=torch.float64) * 0.9 + 0.05
    p = torch.rand(200, generator=g, dtype=torch.float64) * 0.9 + 0.05
    torch.testing.assert_close(bernoulli_kl_code(q.log(), p.log()), bernoulli_kl(q, p), atol=1e-4, rtol=0)
    # near 0 and 1 the clamped KL has no gradient; the code's has one (log q used as is)
    for value in (1e-9, 1 - 1e-9):
        lq = torch.tensor(math.log(value), dtype=torch.float64, requires_grad=True)
        bernoulli_kl_code(lq, torch.tensor(math.log(0.3), dtype=torch.float64)).backward()
        gq = torch.tensor(value, dtype=torch.float64, requires_grad=True)
        bernoulli_kl(gq, torch.tensor(0.3, dtype=torch.float64)).backward()
        assert lq.grad != 0 and math.isfinite(lq.grad) and gq.grad == 0
    # finite differences in the interior
    lq = torch.log(q[:5]).clone().requires_grad_()
    assert torch.autograd.gradcheck(lambda a: bernoulli_kl_code(a, p[:5].log()), (lq,))


def test_code_mixture_kl_is_the_weighted_sum_of_per_pseudo_input_kls():
    g = gen(1)
    b, u, j = 4, 3, 5
    log_gamma = -torch.rand(b, j, generator=g, dtype=torch.float64) * 3
    log_gamma_u = -torch.rand(u, j, generator=g, dtype=torch.float64) * 3
    mu, mu_u = torch.randn(b, j, generator=g, dtype=torch.float64), torch.randn(u, j, generator=g, dtype=torch.float64)
    lv, lv_u = torch.randn(b, j, generator=g, dtype=torch.float64), torch.randn(u, j, generator=g, dtype=torch.float64)
    w = torch.softmax(torch.randn(b, u, generator=g, dtype=torch.float64), -1)
    out = pseudo_input_mixture_kl_code(log_gamma, mu, lv, log_gamma_u, mu_u, lv_u, w)
    expected = torch.zeros(b, dtype=torch.float64)
    for i in range(b):
        for k in range(u):
            per = log_gamma[i].exp() * gaussian_kl(mu[i], lv[i], mu_u[k], lv_u[k]) + \
                bernoulli_kl_code(log_gamma[i], log_gamma_u[k])
            expected[i] += w[i, k] * per.sum()
    torch.testing.assert_close(out, expected)
    # the same as the paper's (clamped) KL away from 0 and 1, up to the code's eps
    ref = pseudo_input_mixture_kl(log_gamma.exp(), mu, lv, log_gamma_u.exp(), mu_u, lv_u, w)
    torch.testing.assert_close(out, ref, atol=1e-4, rtol=0)


def test_code_sparsity_term():
    gp = torch.tensor([[0.2, 0.4], [0.05, 0.05]], dtype=torch.float64)
    g_bar = gp.mean(-1)
    expected = 2 * bernoulli_kl_code(g_bar.log(), torch.full_like(g_bar, math.log(0.1)))
    torch.testing.assert_close(sparsity_kl(gp, 0.1, 2.0, bernoulli="code"), expected)
    torch.testing.assert_close(sparsity_kl(gp, 0.1, 2.0, bernoulli="code"), sparsity_kl(gp, 0.1, 2.0), atol=1e-5, rtol=0)


def vsc(**kw):
    torch.manual_seed(0)
    return build_model(SETUP, VSCParams(kind="vsc", n_pseudo_inputs=4, selector="code", **kw), (1, 8, 8))


def test_unwarmed_kl_is_taken_on_the_raw_slabs_while_the_draws_are_warmed():
    """At λ = 0 (spike pre-training) the paper's warmed KL has a zero slab part (both slabs N(0, 1));
    the code's KL still compares the encoder's slabs of data and pseudo-inputs."""
    x = tiny_data(8)
    for kl_slabs in ("warmed", "unwarmed"):
        m = vsc(kl_slabs=kl_slabs)
        m.set_phase("pretrain")
        torch.manual_seed(1)
        terms = m.terms(x)
        feats = m.encoder(torch.cat([x, m.prior.pseudo_inputs]))
        lg, mu, lv = m.posterior_head.raw_parameters(feats)
        if kl_slabs == "unwarmed":
            kmu, klv = mu, lv
        else:
            kmu, klv = torch.zeros_like(mu), torch.zeros_like(lv)  # λ = 0: N(0, 1) slabs
        expected = pseudo_input_mixture_kl(lg[:8].exp(), kmu[:8], klv[:8], lg[8:].exp(), kmu[8:], klv[8:],
                                           m.prior.weights(x))
        torch.testing.assert_close(terms.kl, expected)
        assert torch.allclose(terms.q.base_dist.loc, torch.zeros_like(terms.q.base_dist.loc))  # warmed draws


def test_xavier_pseudo_inputs_lie_in_the_xavier_range():
    m = vsc(pseudo_input_init="xavier")
    bound = math.sqrt(6.0 / (4 + 64))
    pi = m.prior.pseudo_inputs.detach()
    assert pi.abs().max() <= bound and pi.std() == pytest.approx(bound / math.sqrt(3), rel=0.25)
    assert vsc().prior.pseudo_inputs.min() >= 0  # the paper's default: uniform in [0, 1]


def test_preset_sets_every_option_left_at_its_paper_default():
    spec = VSCParams(kind="vsc", preset="released_code", sharpness_start=80.0)
    r = spec.resolved()
    assert (r.prior_spike_sharpening, r.kl_slabs, r.bernoulli_kl, r.pseudo_input_init, r.selector,
            r.warmup_variant, r.sharpness_end) == (10.0, "unwarmed", "code", "xavier", "code", "code", 100.0)
    assert r.sharpness_start == 80.0  # a value other than the paper default is kept
    assert VSCParams(kind="vsc").resolved() == VSCParams(kind="vsc")
    m = build_model(SETUP, VSCParams(kind="vsc", n_pseudo_inputs=4, preset="released_code"), (1, 8, 8))
    assert not m.paper_objective and m.prior_spike_sharpening == 10.0 and m.bernoulli_kl == "code"
    loss, logs = m.loss(tiny_data(8))
    loss.backward()
    assert math.isfinite(loss.item()) and m.prior.pseudo_inputs.grad.abs().sum() > 0
    assert {"spike_input_dependent", "spike_patterns", "selector_entropy"} <= set(logs)


def test_spike_diagnostics():
    gamma = torch.tensor([[0.9, 0.1, 0.9], [0.1, 0.1, 0.9], [0.9, 0.1, 0.9], [0.1, 0.2, 0.9]])
    d = spike_diagnostics(gamma, torch.tensor([[1.0, 1.0], [1.0, 0.0], [2.0, 2.0], [0.0, 3.0]]))
    assert d["spike_input_dependent"] == 1 and d["spike_patterns"] == 2
    assert d["spike_active_per_input"] == pytest.approx(1.5)
    assert d["selector_entropy"] == pytest.approx(math.log(2) / 2)
