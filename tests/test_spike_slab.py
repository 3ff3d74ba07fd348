"""Tests for the spike-and-slab distribution and the VSC distribution-level terms (paper 002)."""

from __future__ import annotations

import math

import pytest
import torch
from torch.distributions import Bernoulli, Independent, Normal, kl_divergence

from priorlab.priors.spike_slab import (
    DEFAULT_GAMMA_EPS,
    SpikeSlabNormal,
    bernoulli_kl,
    gaussian_kl,
    pseudo_input_mixture_kl,
    selected_prior_gamma,
    selector_weights_code,
    selector_weights_paper,
    sparsity_kl,
    spike_slab_kl,
    spike_slab_warmup,
)

F64 = torch.float64


def _random_params(gen: torch.Generator, shape: tuple[int, ...]) -> tuple[torch.Tensor, ...]:
    gamma = 0.1 + 0.8 * torch.rand(shape, generator=gen, dtype=F64)
    mu = torch.randn(shape, generator=gen, dtype=F64)
    logvar = 0.8 * torch.randn(shape, generator=gen, dtype=F64)
    return gamma, mu, logvar


# ----------------------------------------------------------------------------- KL divergence
def test_kl_matches_monte_carlo_with_mixed_measure() -> None:
    gen = torch.Generator().manual_seed(0)
    gq, mq, lq = _random_params(gen, (16,))  # 16 latents: MC standard error ~0.2 % of the KL
    gp, mp, lp = _random_params(gen, (16,))
    q = SpikeSlabNormal.from_logvar(gq, mq, lq)
    p = SpikeSlabNormal.from_logvar(gp, mp, lp)
    exact = kl_divergence(q, p).sum()
    z = q.sample((100_000,), generator=gen)
    log_q, log_p = q.log_prob(z), p.log_prob(z)
    mc = (log_q - log_p).sum(-1)
    assert abs(mc.mean() - exact) / exact < 0.01
    # the same samples check the entropy w.r.t. delta_0 + Lebesgue
    ent_mc = -log_q.mean(0)
    torch.testing.assert_close(ent_mc, q.entropy(), atol=0.02, rtol=0.0)


def test_kl_of_distribution_with_itself_is_zero() -> None:
    gen = torch.Generator().manual_seed(1)
    g, m, lv = _random_params(gen, (4, 5))
    g[0, 0], g[0, 1] = 0.0, 1.0
    kl = spike_slab_kl(g, m, lv, g, m, lv)
    assert torch.all(kl.abs() < 1e-12)


def test_kl_reduces_to_gaussian_kl_when_always_active() -> None:
    gen = torch.Generator().manual_seed(2)
    _, mq, lq = _random_params(gen, (7,))
    _, mp, lp = _random_params(gen, (7,))
    ones = torch.ones(7, dtype=F64)
    ours = spike_slab_kl(ones, mq, lq, ones, mp, lp)
    ref = kl_divergence(Normal(mq, torch.exp(0.5 * lq)), Normal(mp, torch.exp(0.5 * lp)))
    torch.testing.assert_close(ours, ref, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(gaussian_kl(mq, lq, mp, lp), ref, rtol=1e-10, atol=1e-12)


def test_kl_reduces_to_bernoulli_kl_when_slabs_equal() -> None:
    gen = torch.Generator().manual_seed(3)
    gq, m, lv = _random_params(gen, (7,))
    gp = 0.01 + 0.98 * torch.rand(7, generator=gen, dtype=F64)
    ours = spike_slab_kl(gq, m, lv, gp, m, lv)
    ref = kl_divergence(Bernoulli(probs=gq), Bernoulli(probs=gp))
    torch.testing.assert_close(ours, ref, rtol=1e-10, atol=1e-12)


def test_kl_independent_wrapper_sums_over_latents() -> None:
    gen = torch.Generator().manual_seed(4)
    gq, mq, lq = _random_params(gen, (3, 5))
    gp, mp, lp = _random_params(gen, (3, 5))
    q = Independent(SpikeSlabNormal.from_logvar(gq, mq, lq), 1)
    p = Independent(SpikeSlabNormal.from_logvar(gp, mp, lp), 1)
    kl = kl_divergence(q, p)
    assert kl.shape == (3,)
    torch.testing.assert_close(kl, spike_slab_kl(gq, mq, lq, gp, mp, lp).sum(-1))


def test_kl_is_finite_with_finite_gradients_at_extreme_spike_probabilities() -> None:
    gamma_q = torch.tensor([0.0, 0.0, 1.0, 1.0, 0.0, 1.0], dtype=F64, requires_grad=True)
    gamma_p = torch.tensor([0.3, 1.0, 0.0, 0.7, 0.0, 1.0], dtype=F64, requires_grad=True)
    mu_q = torch.zeros(6, dtype=F64, requires_grad=True)
    mu_p = torch.ones(6, dtype=F64, requires_grad=True)
    lv = torch.zeros(6, dtype=F64, requires_grad=True)
    kl = spike_slab_kl(gamma_q, mu_q, lv, gamma_p, mu_p, lv)
    assert torch.all(torch.isfinite(kl))
    kl.sum().backward()
    for t in (gamma_q, gamma_p, mu_q, mu_p, lv):
        assert torch.all(torch.isfinite(t.grad))
    # gamma_q = 0: exact limit is KL(Bern 0 || Bern gamma_p) = -log(1 - gamma_p); no slab term
    assert abs(kl[0].item() + math.log(0.7)) < 1e-4
    # gamma_q = 1 vs gamma_p = 0: exact KL is +inf, clamped to about log(1/eps) + Gaussian KL (0.5)
    assert abs(kl[2].item() - (math.log(1.0 / DEFAULT_GAMMA_EPS) + 0.5)) < 1e-3
    # gamma_q = gamma_p = 0: nothing to pay
    assert abs(kl[4].item()) < 1e-12


# ----------------------------------------------------------------------------- density and moments
def test_log_prob_normalises_over_atom_plus_density() -> None:
    gamma = torch.tensor([0.05, 0.4, 0.9, 1.0], dtype=F64)
    loc = torch.tensor([0.0, -1.3, 2.0, 0.2], dtype=F64)
    scale = torch.tensor([0.3, 1.0, 2.5, 0.7], dtype=F64)
    d = SpikeSlabNormal(gamma, loc, scale)
    atom = d.log_prob(torch.zeros(4, dtype=F64)).exp()
    torch.testing.assert_close(atom, 1.0 - gamma)
    lo, hi = (loc - 15 * scale).min(), (loc + 15 * scale).max()
    grid = torch.linspace(lo.item(), hi.item(), 400_001, dtype=F64) + 1.234567e-7
    assert not torch.any(grid == 0)
    dens = d.log_prob(grid[:, None]).exp()  # [G, 4]
    total = atom + torch.trapezoid(dens, grid, dim=0)
    torch.testing.assert_close(total, torch.ones(4, dtype=F64), atol=1e-8, rtol=0.0)


def test_exact_sampler_atom_frequency_and_moments() -> None:
    gen = torch.Generator().manual_seed(5)
    gamma = torch.tensor([0.2, 0.5, 0.85], dtype=F64)
    loc = torch.tensor([1.5, -0.5, 0.0], dtype=F64)
    scale = torch.tensor([0.5, 2.0, 1.0], dtype=F64)
    d = SpikeSlabNormal(gamma, loc, scale)
    z = d.sample((200_000,), generator=gen)
    p_zero = (z == 0).double().mean(0)
    torch.testing.assert_close(p_zero, 1.0 - gamma, atol=5e-3, rtol=0.0)
    torch.testing.assert_close(z.mean(0), d.mean, atol=0.02, rtol=0.0)
    torch.testing.assert_close(z.var(0), d.variance, atol=0.0, rtol=0.02)


def test_log_prob_gradients_are_finite_on_both_branches() -> None:
    gamma = torch.tensor([1.0, 0.0, 0.5, 0.5], dtype=F64, requires_grad=True)
    loc = torch.zeros(4, dtype=F64, requires_grad=True)
    scale = torch.ones(4, dtype=F64, requires_grad=True)
    d = SpikeSlabNormal(gamma, loc, scale)
    value = torch.tensor([0.7, 0.0, 0.0, -1.0], dtype=F64)  # slab at gamma=1, atom at gamma=0
    lp = d.log_prob(value)
    assert torch.all(torch.isfinite(lp))
    torch.testing.assert_close(lp[1], torch.tensor(0.0, dtype=F64))
    lp.sum().backward()
    for t in (gamma, loc, scale):
        assert torch.all(torch.isfinite(t.grad))
    assert torch.isneginf(SpikeSlabNormal(1.0, 0.0, 1.0).log_prob(torch.tensor(0.0)))


# ----------------------------------------------------------------------------- relaxed rsample
def test_rsample_with_large_sharpness_matches_exact_distribution() -> None:
    gen = torch.Generator().manual_seed(6)
    gamma = torch.tensor([0.3, 0.7], dtype=F64)
    loc = torch.tensor([2.0, -1.0], dtype=F64)
    scale = torch.tensor([0.5, 1.5], dtype=F64)
    z = SpikeSlabNormal(gamma, loc, scale, sharpness=1e6).rsample((200_000,), generator=gen)
    active = z.abs() > 1e-6
    torch.testing.assert_close(active.double().mean(0), gamma, atol=5e-3, rtol=0.0)
    for j in range(2):
        zj = z[active[:, j], j]
        assert abs(zj.mean() - loc[j]) < 0.02
        assert abs(zj.std() / scale[j] - 1.0) < 0.02
    # a moderate sharpness leaves many non-binary spike values (so the test above is not trivial)
    z_soft = SpikeSlabNormal(gamma, loc, scale, sharpness=5.0).rsample((20_000,), generator=gen)
    assert (z_soft.abs() > 1e-6).double().mean() > 0.9


def test_rsample_pathwise_gradients_match_finite_differences() -> None:
    """Autograd through rsample equals central differences of the same fixed-noise estimate."""

    def estimate(gamma: torch.Tensor, loc: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        gen = torch.Generator().manual_seed(7)
        z = SpikeSlabNormal(gamma, loc, scale, sharpness=50.0).rsample((5_000,), generator=gen)
        return (z + 0.3 * z.pow(2)).mean()

    params = [torch.tensor(v, dtype=F64, requires_grad=True) for v in (0.4, 0.8, 1.3)]
    estimate(*params).backward()
    h = 1e-6
    for i, p in enumerate(params):
        up = [q.detach().clone() for q in params]
        dn = [q.detach().clone() for q in params]
        up[i] += h
        dn[i] -= h
        fd = (estimate(*up) - estimate(*dn)) / (2 * h)
        assert abs(p.grad.item() - fd.item()) < 1e-6 * max(1.0, abs(fd.item()))
        assert abs(p.grad.item()) > 1e-2  # gradient really flows to this parameter


def test_rsample_gradients_match_relaxed_expectation_analytically() -> None:
    """E[z] = m(gamma) mu and E[z^2] = E[T^2] (mu^2 + sigma^2) for T = sigmoid(c (eta - 1 + gamma)).

    m = (softplus(c g) - softplus(c (g - 1))) / c, so dE[z]/dgamma = mu (S(c g) - S(c (g - 1))),
    dE[z]/dmu = m and dE[z^2]/dsigma = 2 sigma E[T^2], E[T^2] = [softplus(x) - S(x)] / c over x in
    [c (g - 1), c g].  Per-sample pathwise gradients are averaged and compared within 5 standard errors.
    """
    c, g0, m0, s0, n = 20.0, 0.35, 1.2, 0.8, 200_000
    gamma = torch.full((n,), g0, dtype=F64, requires_grad=True)
    loc = torch.full((n,), m0, dtype=F64, requires_grad=True)
    scale = torch.full((n,), s0, dtype=F64, requires_grad=True)
    gen = torch.Generator().manual_seed(8)
    z = SpikeSlabNormal(gamma, loc, scale, sharpness=c).rsample(generator=gen)
    d_gamma, d_loc = torch.autograd.grad(z.sum(), (gamma, loc), retain_graph=True)
    (d_scale,) = torch.autograd.grad(z.pow(2).sum(), scale)

    sp = torch.nn.functional.softplus
    hi, lo = torch.tensor(c * g0, dtype=F64), torch.tensor(c * (g0 - 1.0), dtype=F64)
    m = (sp(hi) - sp(lo)) / c
    e_t2 = ((sp(hi) - torch.sigmoid(hi)) - (sp(lo) - torch.sigmoid(lo))) / c
    expected = {
        "gamma": (d_gamma, m0 * (torch.sigmoid(hi) - torch.sigmoid(lo))),
        "loc": (d_loc, m),
        "scale": (d_scale, 2 * s0 * e_t2),
    }
    for name, (per_sample, target) in expected.items():
        se = per_sample.std() / math.sqrt(n)
        assert abs(per_sample.mean() - target) < 5 * se + 1e-12, name


def test_sharpness_as_a_0d_tensor_draws_what_the_number_draws() -> None:
    """A schedule kept on the device (VSC's buffer) gives bit-identical relaxed draws and gradients."""
    gamma, loc, scale = (torch.rand(64, 5, generator=torch.Generator().manual_seed(1)) * 0.8 + 0.1 for _ in range(3))
    out = []
    for c in (73.5, torch.tensor(73.5)):
        g = gamma.clone().requires_grad_()
        z = SpikeSlabNormal(g, loc, scale, sharpness=c).rsample(generator=torch.Generator().manual_seed(0))
        z.sum().backward()
        out.append((z.detach(), g.grad))
    assert torch.equal(out[0][0], out[1][0]) and torch.equal(out[0][1], out[1][1])
    with pytest.raises(ValueError, match="0-d float tensor"):
        SpikeSlabNormal(0.5, 0.0, 1.0, sharpness=torch.tensor([50.0]))
    with pytest.raises(ValueError, match="sharpness"):
        SpikeSlabNormal(0.5, 0.0, 1.0, sharpness=torch.tensor(-1.0), validate_args=True)
    SpikeSlabNormal(0.5, 0.0, 1.0, sharpness=torch.tensor(-1.0), validate_args=False)  # not read: no check


# ----------------------------------------------------------------------------- validation
def test_invalid_arguments_raise_value_error() -> None:
    with pytest.raises(ValueError):
        SpikeSlabNormal(torch.tensor([1.5]), 0.0, 1.0)
    with pytest.raises(ValueError):
        SpikeSlabNormal(0.5, 0.0, torch.tensor([-1.0]))
    with pytest.raises(ValueError, match="sharpness"):
        SpikeSlabNormal(0.5, 0.0, 1.0, sharpness=0.0)
    with pytest.raises(ValueError, match="lam"):
        spike_slab_warmup(torch.zeros(2), torch.zeros(2), 1.5)
    with pytest.raises(ValueError, match="variant"):
        spike_slab_warmup(torch.zeros(2), torch.zeros(2), 0.5, variant="other")
    with pytest.raises(ValueError, match="alpha"):
        sparsity_kl(torch.full((2, 3), 0.1), alpha=0.0, multiplier=3)
    with pytest.raises(ValueError, match="weights"):
        pseudo_input_mixture_kl(*(torch.rand(2, 3),) * 3, *(torch.rand(4, 3),) * 3, torch.rand(2, 5))
    with pytest.raises(ValueError, match="selector"):
        selector_weights_code(torch.zeros(4))


# ----------------------------------------------------------------------------- warm-up (eq. 7)
@pytest.mark.parametrize("variant", ["paper", "code"])
def test_warmup_endpoints(variant: str) -> None:
    gen = torch.Generator().manual_seed(9)
    _, mu, logvar = _random_params(gen, (3, 4))
    m0, v0 = spike_slab_warmup(mu, logvar, 0.0, variant=variant)
    torch.testing.assert_close(m0, torch.zeros_like(mu))
    torch.testing.assert_close(v0, torch.ones_like(mu))
    m1, v1 = spike_slab_warmup(mu, logvar, 1.0, variant=variant)
    torch.testing.assert_close(m1, mu)
    torch.testing.assert_close(v1, logvar.exp())


def test_warmup_midpoint_follows_each_variant() -> None:
    mu, logvar = torch.tensor([2.0]), torch.tensor([math.log(9.0)])
    m, v = spike_slab_warmup(mu, logvar, 0.5, variant="paper")
    torch.testing.assert_close(m, torch.tensor([1.0]))
    torch.testing.assert_close(v, torch.tensor([0.5 * 9.0 + 0.5]))
    _, v_code = spike_slab_warmup(mu, logvar, 0.5, variant="code")
    torch.testing.assert_close(v_code, torch.tensor([3.0]))


# ----------------------------------------------------------------------------- pseudo-input prior
def test_pseudo_input_mixture_kl_is_weighted_sum_of_component_kls() -> None:
    gen = torch.Generator().manual_seed(10)
    g, m, lv = _random_params(gen, (4, 6))
    gu, mu_u, lvu = _random_params(gen, (3, 6))
    w = torch.rand(4, 3, generator=gen, dtype=F64)
    ours = pseudo_input_mixture_kl(g, m, lv, gu, mu_u, lvu, w)
    ref = torch.zeros(4, dtype=F64)
    for b in range(4):
        for u in range(3):
            q = Independent(SpikeSlabNormal.from_logvar(g[b], m[b], lv[b]), 1)
            p = Independent(SpikeSlabNormal.from_logvar(gu[u], mu_u[u], lvu[u]), 1)
            ref[b] += w[b, u] * kl_divergence(q, p)
    torch.testing.assert_close(ours, ref)
    one_hot = torch.zeros(4, 3, dtype=F64)
    one_hot[torch.arange(4), torch.tensor([2, 0, 1, 2])] = 1.0
    sel = pseudo_input_mixture_kl(g, m, lv, gu, mu_u, lvu, one_hot)
    torch.testing.assert_close(sel[0], spike_slab_kl(g[0], m[0], lv[0], gu[2], mu_u[2], lvu[2]).sum())


# ----------------------------------------------------------------------------- selector (A.3)
def test_selector_outputs_lie_in_unit_interval_and_code_rows_sum_to_one() -> None:
    raw = 3.0 * torch.randn(16, 5, generator=torch.Generator().manual_seed(11))
    for fn in (selector_weights_paper, selector_weights_code):
        w = fn(raw)
        assert w.shape == raw.shape
        assert torch.all((w >= 0) & (w <= 1))
    code = selector_weights_code(raw)
    torch.testing.assert_close(code.sum(-1), torch.ones(16))
    # the released code's L2 normalisation followed by sum(w KL)/sum(w) gives the same weights
    l2 = torch.sigmoid(raw) / torch.sigmoid(raw).norm(dim=-1, keepdim=True)
    torch.testing.assert_close(code, l2 / l2.sum(-1, keepdim=True))


def test_paper_selector_is_near_one_hot_for_a_clear_maximum() -> None:
    raw = torch.full((3, 4), -8.0)
    raw[torch.arange(3), torch.tensor([1, 3, 0])] = 8.0
    w = selector_weights_paper(raw)
    expected = torch.zeros(3, 4)
    expected[torch.arange(3), torch.tensor([1, 3, 0])] = 1.0
    torch.testing.assert_close(w, expected, atol=1e-6, rtol=0.0)
    # the formula on a hand case: equal outputs with U = 2 give u = 0.5 and S(0) = 0.5
    torch.testing.assert_close(selector_weights_paper(torch.zeros(1, 2)), torch.full((1, 2), 0.5))
    # with no clear winner (U = 4) every weight collapses towards 0: u = 0.25 -> S(-15)
    assert torch.all(selector_weights_paper(torch.zeros(1, 4)) < 1e-6)


# ----------------------------------------------------------------------------- sparsity (eq. 4)
def test_sparsity_kl_against_hand_formula() -> None:
    gamma_prior = torch.tensor([[0.05, 0.15], [0.01, 0.01]], dtype=F64)  # means 0.1 and 0.01
    alpha = 0.01
    out = sparsity_kl(gamma_prior, alpha=alpha, multiplier=60)
    g = 0.1
    hand = g * math.log(g / alpha) + (1 - g) * math.log((1 - g) / (1 - alpha))
    torch.testing.assert_close(out, torch.tensor([60 * hand, 0.0], dtype=F64), atol=1e-10, rtol=1e-10)
    torch.testing.assert_close(sparsity_kl(gamma_prior, alpha, 2.0), out / 30.0)
    torch.testing.assert_close(bernoulli_kl(torch.tensor(g), alpha), torch.tensor(hand, dtype=torch.float32))


def test_selected_prior_gamma_selects_or_averages() -> None:
    gamma_u = torch.tensor([[0.1, 0.9], [0.5, 0.3], [0.2, 0.2]])
    one_hot = torch.tensor([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    torch.testing.assert_close(selected_prior_gamma(gamma_u, one_hot), gamma_u[[1, 0]])
    uniform = torch.full((1, 3), 0.2)
    torch.testing.assert_close(selected_prior_gamma(gamma_u, uniform), gamma_u.mean(0, keepdim=True))
    with pytest.raises(ValueError, match="positive sum"):
        selected_prior_gamma(gamma_u, torch.zeros(1, 3))
