"""VSC model (paper 002): warm-up, relaxed-draw gradients, schedules, selector, KLs, IW validity, resume."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from priorlab.config import OptimParams, ParamsError, SetupParams, VSCParams, parse_params
from priorlab.models import build_model
from priorlab.models.estimates import iw_log_likelihood
from priorlab.models.vsc import SelectedPseudoInputPrior, SpikeSlabPosterior, ramp
from priorlab.priors.spike_slab import selector_weights_code, selector_weights_paper
from priorlab.train import fit
from tests.helpers import as_training_set, tiny_data

SETUP = SetupParams(dataset="x", latent_dim=4, hidden=[16])
OBS = (1, 8, 8)


def vsc(seed: int = 0, **kw):
    torch.manual_seed(seed)
    spec = VSCParams(kind="vsc", n_pseudo_inputs=3, **{"selector": "code", **kw})
    return build_model(SETUP, spec, OBS)


def test_pretrain_phase_is_the_n01_slab_objective():
    """λ = 0 (eq. 7): every slab is N(0, 1), so the KL is the selection-weighted Bernoulli KL only."""
    m = vsc()
    m.set_phase("pretrain")
    m.before_step(1000)  # no ramp outside the train phase
    assert float(m.posterior_head.lam) == 0.0 and float(m.posterior_head.sharpness) == 50.0
    x = tiny_data(32, OBS)
    q = m.posterior(x).base_dist
    assert torch.allclose(q.loc, torch.zeros_like(q.loc)) and torch.allclose(q.scale, torch.ones_like(q.scale))
    p = m.prior_distribution(x)
    # clamp in float32 as the model does (1 - 1e-6 is not representable exactly), then compute in float64
    g, gu = q.gamma.clamp(1e-6, 1 - 1e-6).double(), p.gamma_u.clamp(1e-6, 1 - 1e-6).double()
    w = p.weights.double()
    bern = (g[:, None] * (g[:, None] / gu[None]).log() + (1 - g[:, None]) * ((1 - g[:, None]) / (1 - gu[None])).log())
    expected = (w * bern.sum(-1)).sum(-1)
    torch.manual_seed(1)
    assert torch.allclose(m.terms(x).kl.double(), expected, atol=1e-5)


def _relaxed_draw_grads(features, sharpness, seed):
    head = SpikeSlabPosterior(2, sharpness=sharpness)
    torch.manual_seed(seed)
    z = head(features).rsample()
    z.sum().backward()
    return z


def test_relaxed_draw_gradient_reaches_gamma_mu_sigma():
    """∂z/∂v, ∂z/∂μ, ∂z/∂logσ² of z = S(c(η - 1 + γ))(μ + σε) against the analytic derivatives."""
    torch.manual_seed(0)
    feats = torch.cat([torch.randn(64, 2), torch.randn(64, 2), -0.5 * torch.rand(64, 2)], -1).requires_grad_()
    c = 7.0
    _relaxed_draw_grads(feats, c, seed=3)
    torch.manual_seed(3)
    eta, eps = torch.rand(64, 2), torch.randn(64, 2)  # the draw's noise, same order
    mu, logvar, v = feats.detach().chunk(3, -1)
    gamma, sigma = torch.exp(v), torch.exp(0.5 * logvar)
    s = torch.sigmoid(c * (eta - 1 + gamma))
    d_mu, d_logvar = s, s * 0.5 * sigma * eps
    d_v = c * s * (1 - s) * (mu + sigma * eps) * gamma  # v < 0: γ = e^v
    assert torch.allclose(feats.grad, torch.cat([d_mu, d_logvar, d_v], -1), atol=1e-5)
    assert (feats.grad[:, 4:].abs() > 0).float().mean() > 0.9


def test_train_schedules_and_fixed_sharpness():
    m = vsc(warmup_ramp_steps=10, sharpness_ramp_steps=20)
    m.set_phase("train")
    got = []
    for step in (0, 5, 10, 20, 50):
        m.before_step(step)
        got.append((float(m.posterior_head.lam), float(m.posterior_head.sharpness)))
    assert got == [(0.0, 50.0), (0.5, 87.5), (1.0, 125.0), (1.0, 200.0), (1.0, 200.0)]
    fixed = vsc(sharpness_start=100.0, sharpness_end=100.0, sharpness_ramp_steps=20)
    fixed.set_phase("train")
    fixed.before_step(7)
    assert float(fixed.posterior_head.sharpness) == 100.0 and float(fixed.posterior_head.lam) == 1.0
    assert ramp(3, 0, 0.0, 1.0) == 1.0


def test_selector_variants():
    raw = torch.tensor([[8.0, -8.0, -8.0], [0.0, 0.0, 0.0]])
    paper, code = selector_weights_paper(raw), selector_weights_code(raw)
    assert torch.allclose(code.sum(-1), torch.ones(2))
    assert paper[0, 0] > 0.99 and paper[0, 1:].max() < 1e-6  # a clear winner: ~one-hot
    assert paper[1].max() < 1e-3  # no winner: every weight ~0 (the paper's selector switches the KL off)
    m_paper, m_code = vsc(selector="paper"), vsc(selector="code")
    x = tiny_data(8, OBS)
    assert torch.allclose(m_code.prior_distribution(x).weights.sum(-1), torch.ones(8))
    assert m_paper.prior_distribution(x).weights.shape == (8, 3)


def test_mixture_kl_and_sparsity_equal_a_direct_computation():
    m = vsc(alpha=0.05)
    m.set_phase("train")
    x = tiny_data(16, OBS)
    q = m.posterior(x).base_dist
    p = m.prior_distribution(x)
    torch.manual_seed(0)
    terms = m.terms(x)
    g, mu, lv = (t.detach().double().numpy() for t in (q.gamma, q.loc, q.logvar))
    gu, muu, lvu = (t.detach().double().numpy() for t in (p.gamma_u, p.loc_u, p.logvar_u))
    w = p.weights.detach().double().numpy()
    gc = q.gamma.detach().clamp(1e-6, 1 - 1e-6).double().numpy()
    guc = p.gamma_u.detach().clamp(1e-6, 1 - 1e-6).double().numpy()
    expected = np.zeros(16)
    for b in range(16):
        for u in range(3):
            for j in range(4):
                vq, vp = math.exp(lv[b, j]), math.exp(lvu[u, j])
                gkl = 0.5 * (math.log(vp / vq) + (vq + (mu[b, j] - muu[u, j]) ** 2) / vp - 1)
                gq, gp = gc[b, j], guc[u, j]
                bkl = gq * math.log(gq / gp) + (1 - gq) * math.log((1 - gq) / (1 - gp))
                expected[b] += w[b, u] * (g[b, j] * gkl + bkl)
    np.testing.assert_allclose(terms.kl.detach().double().numpy(), expected, rtol=1e-4, atol=1e-5)
    gsel = (w @ gu) / w.sum(1, keepdims=True)
    gbar = gsel.mean(1)
    sparsity = 4 * (gbar * np.log(gbar / 0.05) + (1 - gbar) * np.log((1 - gbar) / 0.95))
    np.testing.assert_allclose(terms.extra["sparsity"].detach().double().numpy(), sparsity, rtol=1e-4)


def _component_prior(gamma, loc, logvar):
    return SelectedPseudoInputPrior(gamma[None], loc[None], logvar[None], torch.ones(1, 1))


def test_one_hot_kl_matches_monte_carlo_and_iw_weights_average_one():
    """Exact draws + log_prob (w.r.t. δ0 + Lebesgue) are consistent with the registered closed form,
    and E_q[p(z)/q(z)] = 1: the importance weights of L_k are valid for the mixed measure."""
    torch.manual_seed(0)
    head = SpikeSlabPosterior(3)
    feats = torch.tensor([[0.3, -1.0, 0.5, -0.2, 0.4, -0.7, -0.4, -1.2, -0.1]], dtype=torch.float64)
    q = head(feats)
    p = _component_prior(torch.tensor([0.5, 0.2, 0.8], dtype=torch.float64),
                         torch.tensor([0.0, 1.0, -0.5], dtype=torch.float64),
                         torch.tensor([0.0, -0.5, 0.3], dtype=torch.float64))
    kl = torch.distributions.kl_divergence(q, p)
    z = q.base_dist.sample((200000,))
    log_ratio = q.log_prob(z) - p.log_prob(z)
    assert float(kl) == pytest.approx(float(log_ratio.mean()), abs=4 * float(log_ratio.std()) / math.sqrt(2e5))
    w = torch.exp(-log_ratio)
    assert float(w.mean()) == pytest.approx(1.0, abs=4 * float(w.std()) / math.sqrt(2e5))


def test_prior_log_prob_is_normalised():
    """J = 1, two components: atom mass + slab integral = 1."""
    p = SelectedPseudoInputPrior(torch.tensor([[0.3], [0.9]], dtype=torch.float64),
                                 torch.tensor([[0.5], [-1.0]], dtype=torch.float64),
                                 torch.tensor([[0.0], [-1.0]], dtype=torch.float64),
                                 torch.tensor([[0.2, 0.6]], dtype=torch.float64))
    grid = torch.linspace(-12, 12, 200001, dtype=torch.float64)[:, None, None]
    grid = grid[grid.squeeze() != 0]
    dens = p.log_prob(grid).exp().squeeze()
    atom = p.log_prob(torch.zeros(1, 1, dtype=torch.float64)).exp()
    total = torch.trapezoid(dens, grid.squeeze()) + atom
    assert float(total) == pytest.approx(1.0, abs=1e-6)
    assert float(atom) == pytest.approx(0.25 * 0.7 + 0.75 * 0.1, abs=1e-12)


def test_iw_bound_runs_and_exceeds_the_exact_draw_elbo():
    m = vsc()
    m.set_phase("train")
    m.before_step(10**6)
    x = tiny_data(16, OBS)
    torch.manual_seed(0)
    lk = iw_log_likelihood(m, x, k=64)
    l1 = torch.stack([iw_log_likelihood(m, x, k=1) for _ in range(64)]).mean(0)
    assert torch.isfinite(lk).all() and float(lk.mean()) > float(l1.mean())


def test_load_pretrained_needs_a_vsc_and_resume_is_bit_identical(tmp_path):
    pre = vsc(seed=1)
    m = vsc(seed=2)
    m.load_pretrained(pre.state_dict())
    assert torch.equal(m.prior.pseudo_inputs, pre.prior.pseudo_inputs)
    torch.manual_seed(0)
    plain = build_model(SETUP, parse_params_model("vae"), OBS)
    with pytest.raises(ValueError, match="VSC pretrain model"):
        m.load_pretrained(plain.state_dict())

    x = tiny_data(128, OBS)
    opt = OptimParams(steps=30, batch_size=32, lr=1e-2, checkpoint_every=10, seed=5)

    def fresh():
        model = vsc(seed=3, warmup_ramp_steps=12, sharpness_ramp_steps=25)
        model.set_phase("train")
        return model

    ref = fresh()
    fit(ref, as_training_set(x), opt, checkpoint=tmp_path / "ref.pt", live_dir=None, fingerprint="fp")

    class Stop(Exception):
        pass

    killed = fresh()
    original = killed.before_step

    def stop_at_25(step):
        if step == 25:
            raise Stop
        original(step)

    killed.before_step = stop_at_25
    with pytest.raises(Stop):
        fit(killed, as_training_set(x), opt, checkpoint=tmp_path / "k.pt", live_dir=None, fingerprint="fp")
    assert (tmp_path / "k.pt").is_file()
    resumed = fresh()
    result = fit(resumed, as_training_set(x), opt, checkpoint=tmp_path / "k.pt", live_dir=None, fingerprint="fp")
    assert result.resumed_from == 20
    a, b = ref.state_dict(), resumed.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert float(b["posterior_head.lam"]) == 1.0 and float(b["posterior_head.sharpness"]) == pytest.approx(200.0)


def parse_params_model(kind):
    from priorlab.config import MODEL_PARAMS

    return MODEL_PARAMS[kind](kind=kind)


def test_params_are_typed_and_validated():
    raw = {
        "profile": "tiny", "device": "cpu",
        "datasets": {"d": {"kind": "smiley", "n_train": 10, "n_test": 10}},
        "setups": {"s": {"dataset": "d", "latent_dim": 4, "pretrain_model": "vsc_pre"}},
        "models": {"vsc_pre": {"kind": "vsc", "alpha": 0.01, "selector": "code"}},
        "pretrain": {"steps": 1, "batch_size": 2, "lr": 0.1},
        "train": {"steps": 1, "batch_size": 2, "lr": 0.1},
        "runs": {"r": {"setup": "s", "model": "vsc_pre"}},
    }
    p = parse_params(raw)
    assert isinstance(p.models["vsc_pre"], VSCParams) and p.models["vsc_pre"].n_pseudo_inputs == 20
    raw["models"]["vsc_pre"]["alpha"] = 1.5
    with pytest.raises(ParamsError, match="alpha"):
        parse_params(raw)
    raw["models"]["vsc_pre"] = {"kind": "vsc", "selector": "softmax"}
    with pytest.raises(ParamsError, match="selector"):
        parse_params(raw)


# ------------------------------------------------ hand-written backward passes (speed work)
def _mixture_kl_reference(g, m, lv, gu, mu_u, lvu, w, eps=1e-6):
    """Selection-weighted KL by plain autograd through the elementwise closed form (eq. 6, A.3)."""
    from priorlab.priors.spike_slab import spike_slab_kl

    kl = spike_slab_kl(g[:, None], m[:, None], lv[:, None], gu[None], mu_u[None], lvu[None], eps).sum(-1)
    return (w * kl).sum(-1)


def test_mixture_kl_backward_equals_autograd():
    """The fused KL autograd node gives the value and gradients of autograd through the readable
    elementwise formula, also where the Bernoulli clamp is active (gamma = 1, gamma < eps, gamma_u in {0, 1})."""
    from priorlab.priors.spike_slab import pseudo_input_mixture_kl

    g0 = torch.Generator().manual_seed(5)
    B, U, J = 7, 5, 4

    def rnd(*shape, lo, hi):
        return lo + (hi - lo) * torch.rand(*shape, generator=g0, dtype=torch.float64)

    gam, gam_u = rnd(B, J, lo=0.01, hi=1.0), rnd(U, J, lo=0.01, hi=1.0)
    gam[0, 0], gam[1, 1], gam[2] = 1.0, 1e-9, 1.0
    gam_u[0, 1], gam_u[1, 2] = 1.0, 0.0
    inputs = [gam, rnd(B, J, lo=-3, hi=3), rnd(B, J, lo=-4, hi=2), gam_u, rnd(U, J, lo=-3, hi=3),
              rnd(U, J, lo=-4, hi=2), rnd(B, U, lo=0, hi=1)]
    grad_out = torch.randn(B, generator=g0, dtype=torch.float64)
    for needs in ([True] * 7, [False, True, False, False, True, False, True]):
        a = [t.clone().requires_grad_(n) for t, n in zip(inputs, needs)]
        b = [t.clone().requires_grad_(n) for t, n in zip(inputs, needs)]
        ours, ref = pseudo_input_mixture_kl(*a), _mixture_kl_reference(*b)
        torch.testing.assert_close(ours, ref, rtol=1e-12, atol=1e-12)
        got = torch.autograd.grad(ours, [t for t in a if t.requires_grad], grad_out)
        want = torch.autograd.grad(ref, [t for t in b if t.requires_grad], grad_out)
        for x, y in zip(got, want):
            torch.testing.assert_close(x, y, rtol=1e-10, atol=1e-10)
    interior = [t.clamp(0.05, 0.95) if i in (0, 3) else t for i, t in enumerate(inputs)]
    assert torch.autograd.gradcheck(pseudo_input_mixture_kl, [t.clone().requires_grad_() for t in interior])


def test_the_joint_pseudo_input_pass_equals_separate_passes():
    """``terms`` encodes data and pseudo-inputs in one pass: same loss and gradients as q(z|x) and the
    prior computed by their own passes (``posterior`` / ``prior_distribution``)."""
    from priorlab.models.elbo import elbo_terms, objective

    setup = SetupParams(dataset="x", latent_dim=4, encoder="conv", decoder="conv", hidden=[16], channels=[4, 4])
    torch.manual_seed(0)
    m = build_model(setup, VSCParams(kind="vsc", n_pseudo_inputs=3, selector="code"), (1, 16, 16)).double()
    x = tiny_data(6, (1, 16, 16)).double()

    def separate(x):
        t = elbo_terms(x, m.posterior(x), m.prior_distribution(x), m.decode, m.likelihood)
        t.extra.update(m.extra_terms(x, t))
        return t

    results = []
    for terms in (separate, m.terms):
        m.zero_grad()
        torch.manual_seed(1)
        loss = objective(terms(x), m.beta)
        loss.backward()
        results.append((loss.detach(), {k: p.grad.clone() for k, p in m.named_parameters()}))
    (l1, g1), (l2, g2) = results
    torch.testing.assert_close(l1, l2, rtol=1e-12, atol=0.0)
    for k in g1:
        torch.testing.assert_close(g1[k], g2[k], rtol=1e-9, atol=1e-12)
