"""Tests of the factorial mixture prior maths (paper 001, sections 2.1-2.7, appendices B-D).

Every analytic formula is checked against Monte Carlo, numerical integration,
an independent closed form (torch.distributions / scipy) or autograd.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import integrate, special, stats

from priorlab.priors import dirichlet
from priorlab.priors import normal_gamma as ng
from priorlab.priors.factorial_mixture import (
    FactorialMixturePrior,
    expected_log_likelihood,
    global_kl,
    kl_r,
    kl_z,
    kmeans,
    mixture_logits,
    robbins_monro_step_size,
    svi_targets,
)
from priorlab.priors.normal_gamma import NormalGammaParams
from tests.helpers import gen

DT = torch.float64


pytestmark = pytest.mark.usefixtures("single_thread")


def random_ng(shape, g, a_low=2.0) -> NormalGammaParams:
    """Random valid Normal-Gamma mean parameters (a >= a_low keeps MC variances finite)."""
    m = torch.randn(shape, generator=g, dtype=DT)
    s = torch.exp(torch.randn(shape, generator=g, dtype=DT) * 0.5)
    a = a_low + 5 * torch.rand(shape, generator=g, dtype=DT)
    b = torch.exp(torch.randn(shape, generator=g, dtype=DT) * 0.5) * a
    return NormalGammaParams(m, s, a, b)


def random_codes(B, I, D, g, scale=1.5):
    mu = scale * torch.randn(B, I * D, generator=g, dtype=DT)
    var = torch.exp(torch.randn(B, I * D, generator=g, dtype=DT) * 0.7 - 0.5)
    return mu, var


def random_prior(ks, D, g, **kw) -> FactorialMixturePrior:
    prior = FactorialMixturePrior(ks, D, **kw)
    I, K = len(ks), max(ks)
    params = random_ng((I, K, D), g)
    c = 1.0 + 20 * torch.rand(I, K, generator=g, dtype=DT)
    prior.set_posterior(params, c)
    return prior


def random_gamma(B, ks, g):
    K = max(ks)
    logits = torch.randn(B, len(ks), K, generator=g, dtype=DT)
    mask = torch.arange(K)[None, :] < torch.tensor(ks)[:, None]
    logits = torch.where(mask, logits, torch.full_like(logits, -math.inf))
    return torch.softmax(logits, -1)


def mc_close(samples: torch.Tensor, value: float, n_se: float = 5.0, rel: float = 2e-2) -> None:
    mean = samples.mean().item()
    se = samples.std().item() / math.sqrt(samples.numel())
    assert abs(mean - value) < n_se * se + 1e-12, (mean, value, se)
    assert abs(mean - value) <= rel * max(abs(value), 1e-3), (mean, value)


# ----------------------------------------------------------------- parameters
def test_normal_gamma_natural_mean_round_trip():
    p = random_ng((4, 3, 5), gen(0), a_low=0.01)
    nat = ng.mean_to_natural(p)
    back = ng.natural_to_mean(nat)
    for x, y in zip(p, back):
        torch.testing.assert_close(x, y, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(ng.mean_to_natural(back), nat, rtol=1e-12, atol=1e-12)
    # eq. 12 for one value: a=2, b=3, s=4, m=0.5 -> [1.5, -(3 + 0.5), 2, -2]
    one = ng.mean_to_natural(ng.as_params(0.5, 4.0, 2.0, 3.0, dtype=DT))
    torch.testing.assert_close(one, torch.tensor([1.5, -3.5, 2.0, -2.0], dtype=DT))
    with pytest.raises(ValueError, match="s must be positive"):
        ng.natural_to_mean(torch.tensor([1.0, -1.0, 0.0, 0.5], dtype=DT))
    with pytest.raises(ValueError, match="trailing axis"):
        ng.natural_to_mean(torch.zeros(3, dtype=DT))


def test_dirichlet_natural_round_trip_and_expected_log_pi_vs_mc():
    c = torch.tensor([0.7, 2.0, 5.0], dtype=DT)
    torch.testing.assert_close(dirichlet.natural_to_mean(dirichlet.mean_to_natural(c)), c)
    pi = dirichlet.sample(c, (200_000,), gen(1))
    e_log = dirichlet.expected_log_pi(c)
    for k in range(3):
        mc_close(torch.log(pi[:, k]), e_log[k].item())
    torch.testing.assert_close(pi.mean(0), dirichlet.expected_pi(c), atol=3e-3, rtol=0)
    # padded slot: zero probability, -inf expected log, sums only over real entries
    mask = torch.tensor([True, True, False])
    e_log_m = dirichlet.expected_log_pi(c, mask)
    assert e_log_m[2] == -math.inf
    torch.testing.assert_close(e_log_m[:2], dirichlet.expected_log_pi(c[:2]))
    assert torch.all(dirichlet.sample(c, (100,), gen(2), mask)[:, 2] == 0)


def test_gamma_sampler_matches_scipy():
    for shape in (0.3, 1.0, 4.5):
        log_g = ng.sample_log_standard_gamma(torch.full((20_000,), shape, dtype=DT), gen(3))
        p = stats.kstest(torch.exp(log_g).numpy(), stats.gamma(shape).cdf).pvalue
        assert p > 1e-3, (shape, p)
    with pytest.raises(ValueError, match="generator"):
        ng.sample_log_standard_gamma(torch.ones(3), None)


def test_expected_sufficient_statistics_vs_mc():
    p = ng.as_params(0.7, 2.5, 3.0, 1.7, dtype=DT)
    mu, alpha = ng.sample(p, (200_000,), gen(4))
    e = ng.expected_stats(p)
    mc_close(torch.log(alpha), e.log_alpha.item())
    mc_close(alpha, e.alpha.item())
    mc_close(alpha * mu, e.alpha_mu.item())
    mc_close(alpha * mu**2, e.alpha_mu2.item())


# ------------------------------------------------------------------------ KLs
def test_normal_gamma_kl_vs_mc_and_independent_closed_form():
    q = ng.as_params(torch.tensor([0.4, -1.2, 2.0]), torch.tensor([3.0, 0.5, 20.0]),
                     torch.tensor([4.0, 2.5, 30.0]), torch.tensor([2.0, 6.0, 10.0]), dtype=DT)
    p = ng.as_params(0.0, 1.0, 0.01, 0.01, dtype=DT)  # the paper's hyperprior
    kl = ng.kl_divergence(q, p)
    # independent route: KL(Gamma) + E_alpha[KL(N(m_q, 1/(s_q alpha)) || N(m_p, 1/(s_p alpha)))]
    kl_gamma = torch.distributions.kl_divergence(torch.distributions.Gamma(q.a, q.b), torch.distributions.Gamma(p.a, p.b))
    kl_norm = 0.5 * (p.s / q.s - 1 - torch.log(p.s / q.s) + p.s * (q.a / q.b) * (q.m - p.m) ** 2)
    torch.testing.assert_close(kl, kl_gamma + kl_norm, rtol=1e-10, atol=1e-10)
    # Monte Carlo with densities from torch.distributions
    mu, alpha = ng.sample(q, (100_000,), gen(5))

    def logpdf(par):
        return (torch.distributions.Gamma(par.a, par.b).log_prob(alpha)
                + torch.distributions.Normal(par.m, 1 / torch.sqrt(par.s * alpha)).log_prob(mu))

    torch.testing.assert_close(ng.log_prob(mu, alpha, q), logpdf(q))
    ratio = logpdf(q) - logpdf(p)
    for j in range(3):
        mc_close(ratio[:, j], kl[j].item(), rel=1e-2)
    torch.testing.assert_close(ng.kl_divergence(q, q), torch.zeros(3, dtype=DT), atol=1e-12, rtol=0)
    # the printed C.1 (psi(a_q) - psi(a_0) in place of lgamma) is far off
    printed = kl + torch.lgamma(q.a) - torch.lgamma(p.a) - (torch.digamma(q.a) - torch.digamma(p.a))
    assert torch.all((printed - kl).abs() > 1.0)


def test_dirichlet_kl_vs_torch_and_mc():
    cq = torch.tensor([[3.0, 0.5, 7.0], [1.2, 40.0, 2.0]], dtype=DT)
    cp = torch.ones(3, dtype=DT)
    kl = dirichlet.kl_divergence(cq, cp)
    ref = torch.distributions.kl_divergence(torch.distributions.Dirichlet(cq), torch.distributions.Dirichlet(cp.expand(2, 3)))
    torch.testing.assert_close(kl, ref)
    pi = dirichlet.sample(cq, (100_000,), gen(6)).clamp_min(1e-300)
    ratio = dirichlet.log_prob(pi, cq) - dirichlet.log_prob(pi, cp)
    for j in range(2):
        mc_close(ratio[:, j], kl[j].item(), rel=1e-2)
    torch.testing.assert_close(dirichlet.kl_divergence(cq, cq), torch.zeros(2, dtype=DT), atol=1e-12, rtol=0)
    # a padded slot is ignored
    padded = torch.cat([cq, torch.full((2, 1), 9.0, dtype=DT)], -1)
    mask = torch.tensor([True, True, True, False])
    torch.testing.assert_close(dirichlet.kl_divergence(padded, torch.ones(4, dtype=DT), mask), kl)


# ------------------------------------------------------------- eq. 6 and KL[z]
def test_eq6_expected_log_likelihood_vs_mc():
    g = gen(7)
    p = random_ng((1, 2, 3), g)  # I=1, K=2, D=3
    mu, var = random_codes(1, 1, 3, g)
    analytic = expected_log_likelihood(mu.view(1, 1, 3), var.view(1, 1, 3), p)[0, 0]  # [K]
    # the logits add E[log pi] = psi(c_k) - psi(sum c) (eq. 5)
    c = torch.tensor([[1.0, 3.0]], dtype=DT)
    logits = mixture_logits(mu.view(1, 1, 3), var.view(1, 1, 3), p, c, torch.ones(1, 2, dtype=torch.bool))[0, 0]
    torch.testing.assert_close(logits - analytic, torch.from_numpy(special.digamma([1.0, 3.0]) - special.digamma(4.0)))
    S = 200_000
    m_s, a_s = ng.sample(p, (S,), g)  # [S, 1, 2, 3]
    z = mu.view(1, 1, 1, 3) + var.sqrt().view(1, 1, 1, 3) * torch.randn(S, 1, 1, 3, generator=g, dtype=DT)
    log_n = torch.distributions.Normal(m_s, 1 / a_s.sqrt()).log_prob(z).sum(-1)[:, 0]  # [S, 2]
    for k in range(2):
        mc_close(log_n[:, k], analytic[k].item(), rel=1e-2)


def test_kl_z_vs_mc_and_nonnegative():
    g = gen(8)
    p = random_ng((1, 3, 2), g)
    mu, var = random_codes(1, 1, 2, g)
    gamma = random_gamma(1, [3], g)
    value = kl_z(mu.view(1, 1, 2), var.view(1, 1, 2), gamma, p)[0, 0]
    S = 200_000
    m_s, a_s = ng.sample(p, (S,), g)  # [S, 1, 3, 2]
    q_z = torch.distributions.Normal(mu.view(1, 1, 2), var.sqrt().view(1, 1, 2))
    z = mu.view(1, 1, 2) + var.sqrt().view(1, 1, 2) * torch.randn(S, 1, 2, generator=g, dtype=DT)
    log_q = q_z.log_prob(z).sum(-1)  # [S, 1]
    log_p = torch.distributions.Normal(m_s, 1 / a_s.sqrt()).log_prob(z.unsqueeze(-2)).sum(-1)  # [S, 1, 3]
    mc = ((log_q.unsqueeze(-1) - log_p) * gamma).sum(-1)[:, 0]
    mc_close(mc, value.item(), rel=1e-2)
    # non-negativity on random inputs, several factors
    prior = random_prior([4, 2, 3], 3, g)
    mu, var = random_codes(64, 3, 3, g, scale=3.0)
    gamma = random_gamma(64, [4, 2, 3], g)
    t = prior.kl_terms(mu, var, gamma, 1000)
    assert torch.all(t.kl_z >= 0) and torch.all(t.kl_r >= 0)
    assert t.kl_normal_gamma > 0 and t.kl_dirichlet > 0


def test_kl_r_matches_definition_and_clamped_rows():
    c = torch.tensor([[2.0, 5.0, 1.0]], dtype=DT)
    mask = torch.ones(1, 3, dtype=torch.bool)
    gamma = torch.tensor([[[0.2, 0.5, 0.3]], [[0.0, 1.0, 0.0]]], dtype=DT)
    e_log_pi = special.digamma([2.0, 5.0, 1.0]) - special.digamma(8.0)
    expected = [float(np.sum([0.2, 0.5, 0.3] * (np.log([0.2, 0.5, 0.3]) - e_log_pi))), -e_log_pi[1]]
    torch.testing.assert_close(kl_r(gamma, c, mask)[:, 0], torch.tensor(expected, dtype=DT))


# --------------------------------------------------------- responsibilities
def test_responsibilities_normalised_clamped_and_differentiable():
    g = gen(9)
    ks = [3, 1, 4]
    prior = random_prior(ks, 2, g)
    mu, var = random_codes(10, 3, 2, g)
    gamma = prior.responsibilities(mu, var)
    torch.testing.assert_close(gamma.sum(-1), torch.ones(10, 3, dtype=DT))
    assert torch.all(gamma[:, 0, 3:] == 0) and torch.all(gamma[:, 1, 1:] == 0) and torch.all(gamma[:, 1, 0] == 1)
    clamp = torch.full((10, 3), -1)
    clamp[0, 0], clamp[3, 2] = 2, 3
    gc = prior.responsibilities(mu, var, clamp=clamp)
    torch.testing.assert_close(gc[0, 0], torch.tensor([0, 0, 1, 0], dtype=DT))
    torch.testing.assert_close(gc[3, 2], torch.tensor([0, 0, 0, 1], dtype=DT))
    unl = clamp < 0
    torch.testing.assert_close(gc[unl], gamma[unl])
    with pytest.raises(ValueError, match="clamp"):
        bad = clamp.clone()
        bad[1, 1] = 1  # factor 1 has a single component
        prior.responsibilities(mu, var, clamp=bad)
    # gradients through the logits (eq. 6 is analytic in mu and var)
    mu_s, var_s = mu[:3].clone().requires_grad_(), var[:3].clone().requires_grad_()
    assert torch.autograd.gradcheck(lambda m, v: torch.log_softmax(prior.logits(m, v), -1)[..., :1], (mu_s, var_s))
    labels = torch.tensor([[0, -1, 2], [1, 0, -1], [-1, -1, -1]])
    ce = prior.cross_entropy(mu_s, var_s, labels)
    assert ce[2] == 0 and torch.all(ce[:2] > 0)
    ce.sum().backward()
    assert mu_s.grad.abs().sum() > 0 and var_s.grad.abs().sum() > 0
    # float32 inputs stay float32 and agree with float64
    l32 = prior.logits(mu.float(), var.float())
    assert l32.dtype == torch.float32
    torch.testing.assert_close(l32.double(), prior.logits(mu, var), rtol=1e-5, atol=1e-5)


def test_eq5_is_the_optimum_and_predictive_bound_identity():
    g = gen(10)
    prior = random_prior([4, 3], 2, g)
    mu, var = random_codes(16, 2, 2, g)
    gamma = prior.responsibilities(mu, var)
    kz, kr = prior.predictive_kl(mu, var)
    # at gamma of eq. 5: KL[z] + KL[r] = -sum_i logsumexp_k(logits) - sum_i H[q(z_i|x)]
    entropy = 0.5 * (math.log(2 * math.pi) + torch.log(var) + 1).sum(-1)
    torch.testing.assert_close(kz + kr, -torch.logsumexp(prior.logits(mu, var), -1).sum(-1) - entropy)
    base = prior.kl_terms(mu, var, gamma, 100)
    torch.testing.assert_close(base.kl_z.sum(-1) + base.kl_r.sum(-1), kz + kr)
    for _ in range(5):  # any other gamma gives a larger local KL
        other = random_gamma(16, [4, 3], g)
        t = prior.kl_terms(mu, var, other, 100)
        assert torch.all(t.kl_z.sum(-1) + t.kl_r.sum(-1) >= kz + kr - 1e-10)


# ----------------------------------------------------------------------- SVI
def batch_elbo(mu, var, gamma, n_data, params, c, prior: FactorialMixturePrior):
    """sum_n [-KL[z] - KL[r]] - (B/N)(KL_NG + KL_Dir): the lambda-dependent part of the batch ELBO."""
    I, D = prior.num_factors, prior.latent_dim
    m, v = mu.view(-1, I, D), var.view(-1, I, D)
    mask = prior.component_mask
    kl_ng, kl_dir = global_kl(params, c, prior.prior_params(), prior.prior_pseudo_count, mask)
    local = kl_z(m, v, gamma, params).sum() + kl_r(gamma, c, mask).sum()
    return -local - mu.shape[0] / n_data * (kl_ng + kl_dir)


def test_svi_step_rho_one_is_the_conjugate_batch_optimum():
    g = gen(11)
    ks, D, B, N = [3, 2], 2, 32, 500
    prior = random_prior(ks, D, g)
    mu, var = random_codes(B, 2, D, g)
    gamma = random_gamma(B, ks, g)
    prior.svi_step(mu, var, gamma, N, rho=1.0)
    p, c = prior.posterior_params(), prior.pseudo_counts()
    # textbook Normal-Gamma conjugate update, written in mean parameters with numpy
    m0, s0, a0, b0 = 0.0, 1.0, 0.01, 0.01
    mu_n, var_n, g_n = mu.view(B, 2, D).numpy(), var.view(B, 2, D).numpy(), gamma.numpy()
    for i, K in enumerate(ks):
        for k in range(K):
            w = N / B * g_n[:, i, k]
            nk = w.sum()
            s_ = s0 + nk
            m_ = (s0 * m0 + (w[:, None] * mu_n[:, i]).sum(0)) / s_
            a_ = a0 + 0.5 * nk
            b_ = b0 + 0.5 * (s0 * m0**2 + (w[:, None] * (mu_n[:, i] ** 2 + var_n[:, i])).sum(0) - s_ * m_**2)
            np.testing.assert_allclose(p.m[i, k].numpy(), m_, rtol=1e-10)
            np.testing.assert_allclose(p.s[i, k].numpy(), s_, rtol=1e-10)
            np.testing.assert_allclose(p.a[i, k].numpy(), a_, rtol=1e-10)
            np.testing.assert_allclose(p.b[i, k].numpy(), b_, rtol=1e-10)
            np.testing.assert_allclose(c[i, k].item(), 1.0 + nk, rtol=1e-12)
    # it maximises the batch ELBO: zero gradient in (m, log s, log a, log b, log c) and worse when perturbed
    leaves = [p.m.clone(), p.s.log(), p.a.log(), p.b.log(), c.log()]
    leaves = [t.requires_grad_() for t in leaves]

    def objective(m, ls, la, lb, lc):
        return batch_elbo(mu, var, gamma, N, NormalGammaParams(m, ls.exp(), la.exp(), lb.exp()), lc.exp(), prior)

    best = objective(*leaves)
    grads = torch.autograd.grad(best, leaves)
    mask = prior.component_mask
    for gr in grads:
        gr = gr[mask] if gr.dim() >= 2 else gr
        assert gr.abs().max() < 1e-8
    with torch.no_grad():
        for _ in range(10):
            pert = [t + 0.05 * torch.randn(t.shape, generator=g, dtype=DT) for t in leaves]
            assert objective(*pert) < best


def test_svi_steps_never_decrease_batch_elbo_and_are_natural_gradients():
    g = gen(12)
    ks, D, B, N = [3, 2], 2, 40, 40
    prior = random_prior(ks, D, g)
    mu, var = random_codes(B, 2, D, g)
    gamma = random_gamma(B, ks, g)
    values = [batch_elbo(mu, var, gamma, N, prior.posterior_params(), prior.pseudo_counts(), prior)]
    for _ in range(6):
        rho = float(torch.rand((), generator=g)) * 0.6 + 0.05
        prior.svi_step(mu, var, gamma, N, rho=rho)
        values.append(batch_elbo(mu, var, gamma, N, prior.posterior_params(), prior.pseudo_counts(), prior))
    assert all(b >= a - 1e-10 for a, b in zip(values, values[1:]))
    assert values[-1] > values[0] + 1.0
    # lambda* - lambda is the natural gradient: grad_lambda L = Fisher(lambda) (lambda* - lambda)
    lam = prior.ng_natural.clone().requires_grad_()
    c = prior.pseudo_counts()
    L = batch_elbo(mu, var, gamma, N, ng.natural_to_mean(lam), c, prior)
    (grad,) = torch.autograd.grad(L, lam)
    target, _ = svi_targets(mu.view(B, 2, D), var.view(B, 2, D), gamma, N, prior.prior_natural, prior.prior_pseudo_count)
    flat = prior.ng_natural.reshape(-1, 4)
    fisher = torch.stack([torch.autograd.functional.hessian(ng.log_partition, row) for row in flat])
    nat_grad_pred = torch.einsum("nij,nj->ni", fisher, (target - prior.ng_natural).reshape(-1, 4))
    mask = prior.component_mask[..., None].expand(2, 3, D).reshape(-1)
    torch.testing.assert_close(grad.reshape(-1, 4)[mask], nat_grad_pred[mask], rtol=1e-8, atol=1e-8)


def test_robbins_monro_schedule_and_validation():
    assert robbins_monro_step_size(1, 0.0, 0.7) == 1.0
    assert robbins_monro_step_size(10, 2000.0, 0.7) == pytest.approx(2010 ** -0.7)
    for kappa in (0.5, 1.01, -0.7, -0.52):
        with pytest.raises(ValueError, match="kappa"):
            robbins_monro_step_size(1, 2000.0, kappa)
        with pytest.raises(ValueError, match="kappa"):
            FactorialMixturePrior(2, 2, 1, kappa=kappa)
    with pytest.raises(ValueError, match="tau0"):
        FactorialMixturePrior(2, 2, 1, tau0=-1.0)
    prior = FactorialMixturePrior(2, 1, 1, tau0=0.0, kappa=1.0)
    mu = torch.tensor([[0.0], [1.0]], dtype=DT)
    gam = torch.tensor([[[1.0, 0.0]], [[0.0, 1.0]]], dtype=DT)
    assert prior.svi_step(mu, torch.ones_like(mu), gam, 2, step=4) == pytest.approx(0.25)
    with pytest.raises(ValueError, match="rho"):
        prior.svi_step(mu, torch.ones_like(mu), gam, 2, rho=1.5)
    with pytest.raises(ValueError, match="sum to one"):
        prior.svi_step(mu, torch.ones_like(mu), 0.3 * gam, 2, rho=0.5)
    with pytest.raises(ValueError, match="positive"):
        prior.kl_terms(mu, -torch.ones_like(mu), gam, 2)
    with pytest.raises(ValueError, match=r"\[B, I\*D\]"):
        prior.logits(mu.view(-1), torch.ones(2, dtype=DT))


# ------------------------------------------------------------ special cases
def test_single_factor_reduces_to_a_bayesian_gmm():
    """I = 1: compare with a per-component computation via the Gaussian KL formula."""
    g = gen(13)
    prior = random_prior([3], 2, g)
    mu, var = random_codes(5, 1, 2, g)
    gamma = prior.responsibilities(mu, var)
    t = prior.kl_terms(mu, var, gamma, 200)
    p = {k: v.numpy()[0] for k, v in prior.posterior_params()._asdict().items()}
    c = prior.pseudo_counts().numpy()[0]
    mu_n, var_n = mu.numpy(), var.numpy()
    for n in range(5):
        logits, kls = [], []
        for k in range(3):
            m, s, a, b = p["m"][k], p["s"][k], p["a"][k], p["b"][k]
            e_log_alpha = special.digamma(a) - np.log(b)
            # E_q(xi) KL(N(mu, var) || N(mu_k, 1/alpha_k)) = 1/2 sum_d [-E log alpha - log var + E[alpha]var + E[alpha (mu - mu_k)^2] - 1]
            kl_k = 0.5 * np.sum(-e_log_alpha - np.log(var_n[n]) + a / b * var_n[n] + a / b * (mu_n[n] - m) ** 2 + 1 / s - 1)
            e_log_pi = special.digamma(c[k]) - special.digamma(c.sum())
            kls.append(kl_k)
            logits.append(e_log_pi - kl_k)  # eq. 5 up to the k-independent entropy of q(z|x)
        resp = special.softmax(logits)
        np.testing.assert_allclose(gamma[n, 0].numpy(), resp, rtol=1e-10)
        np.testing.assert_allclose(t.kl_z[n, 0].item(), np.dot(resp, kls), rtol=1e-10)
        e_log_pi = special.digamma(c) - special.digamma(c.sum())
        np.testing.assert_allclose(t.kl_r[n, 0].item(), np.sum(resp * (np.log(resp) - e_log_pi)), rtol=1e-10)
    # tight hyperposterior: the E-step becomes the posterior of a plain GMM with pi = E[pi], mu = m, 1/alpha = b/a
    tight = FactorialMixturePrior([3], 2)
    scale = 1e7
    tight.set_posterior(NormalGammaParams(prior.posterior_params().m, torch.full((1, 3, 2), scale, dtype=DT),
                                          torch.full((1, 3, 2), scale, dtype=DT), torch.full((1, 3, 2), scale / 2.0, dtype=DT)),
                        prior.pseudo_counts() * scale)
    z = mu
    tiny = torch.full_like(var, 1e-12)
    w = c / c.sum()
    dens = np.stack([w[k] * stats.multivariate_normal(p["m"][k], 0.5 * np.eye(2)).pdf(z.numpy()) for k in range(3)], -1)
    np.testing.assert_allclose(tight.responsibilities(z, tiny)[:, 0].numpy(), dens / dens.sum(-1, keepdims=True), rtol=1e-5)


def test_one_component_tight_standard_normal_gives_the_vae_kl():
    g = gen(14)
    prior = FactorialMixturePrior(1, 3, 2)
    big = 1e8
    prior.set_posterior(NormalGammaParams(torch.zeros(2, 1, 3, dtype=DT), torch.full((2, 1, 3), big, dtype=DT),
                                          torch.full((2, 1, 3), big, dtype=DT), torch.full((2, 1, 3), big, dtype=DT)),
                        torch.full((2, 1), 5.0, dtype=DT))
    mu, var = random_codes(20, 2, 3, g)
    gamma = prior.responsibilities(mu, var)
    t = prior.kl_terms(mu, var, gamma, 1000)
    standard = torch.distributions.kl_divergence(torch.distributions.Normal(mu, var.sqrt()), torch.distributions.Normal(0.0, 1.0))
    torch.testing.assert_close(t.kl_z, standard.view(20, 2, 3).sum(-1), rtol=1e-6, atol=1e-6)
    assert torch.all(t.kl_r == 0)
    # the predictive prior is then N(0, I) as well
    z = 2 * torch.randn(50, 6, generator=g, dtype=DT)
    torch.testing.assert_close(prior.predictive().log_prob(z), torch.distributions.Normal(0.0, 1.0).log_prob(z).sum(-1),
                               rtol=1e-6, atol=1e-6)


def test_padded_factors_equal_independent_single_factor_priors():
    g = gen(15)
    joint = random_prior([4, 2], 3, g)
    p, c = joint.posterior_params(), joint.pseudo_counts()
    parts = []
    for i, K in enumerate([4, 2]):
        single = FactorialMixturePrior([K], 3)
        single.set_posterior(NormalGammaParams(*(t[i : i + 1, :K] for t in p)), c[i : i + 1, :K])
        parts.append(single)
    mu, var = random_codes(7, 2, 3, g)
    lj = joint.logits(mu, var)
    gj = joint.responsibilities(mu, var)
    tj = joint.kl_terms(mu, var, gj, 300)
    kl_ng = kl_dir = 0.0
    for i, (single, K) in enumerate(zip(parts, [4, 2])):
        sl = slice(3 * i, 3 * i + 3)
        torch.testing.assert_close(lj[:, i, :K], single.logits(mu[:, sl], var[:, sl])[:, 0])
        ts = single.kl_terms(mu[:, sl], var[:, sl], gj[:, i : i + 1, :K], 300)
        torch.testing.assert_close(tj.kl_z[:, i], ts.kl_z[:, 0])
        torch.testing.assert_close(tj.kl_r[:, i], ts.kl_r[:, 0])
        kl_ng, kl_dir = kl_ng + ts.kl_normal_gamma, kl_dir + ts.kl_dirichlet
    torch.testing.assert_close(tj.kl_normal_gamma, kl_ng)
    torch.testing.assert_close(tj.kl_dirichlet, kl_dir)
    torch.testing.assert_close(joint.predictive().log_prob(mu),
                               parts[0].predictive().log_prob(mu[:, :3]) + parts[1].predictive().log_prob(mu[:, 3:]))


# ------------------------------------------------------------------ sampling
def test_eq10_student_t_predictive():
    p = ng.as_params(0.8, 2.0, 4.0, 3.0, dtype=DT)
    df, loc, scale = ng.student_t_predictive(p)
    # hierarchical draw mu, alpha ~ q, z ~ N(mu, 1/alpha) follows the Student-t of eq. 10
    mu, alpha = ng.sample(p, (20_000,), gen(16))
    z = mu + torch.randn(20_000, generator=gen(17), dtype=DT) / alpha.sqrt()
    assert stats.kstest(z.numpy(), stats.t(df.item(), loc.item(), scale.item()).cdf).pvalue > 1e-3
    # direct sampler moments vs closed forms: mean m, variance b (s + 1) / (s (a - 1))
    draws = ng.sample_student_t(df.expand(200_000), loc, scale, gen(18))
    mc_close(draws, 0.8)
    var_closed = 3.0 * 3.0 / (2.0 * 3.0)
    assert draws.var().item() == pytest.approx(var_closed, rel=0.03)
    x = torch.linspace(-5, 5, 11, dtype=DT)
    torch.testing.assert_close(ng.student_t_log_prob(x, df, loc, scale),
                               torch.from_numpy(stats.t(df.item(), loc.item(), scale.item()).logpdf(x.numpy())))


def test_predictive_mixture_log_prob_integrates_to_one():
    prior = FactorialMixturePrior([3], 1)
    prior.set_posterior(NormalGammaParams(torch.tensor([[[-2.0], [0.5], [3.0]]], dtype=DT),
                                          torch.tensor([[[1.0], [4.0], [0.3]]], dtype=DT),
                                          torch.tensor([[[0.8], [3.0], [6.0]]], dtype=DT),
                                          torch.tensor([[[0.5], [2.0], [1.0]]], dtype=DT)),
                        torch.tensor([[2.0, 5.0, 3.0]], dtype=DT))
    dist = prior.predictive()

    def density(x):
        return math.exp(dist.log_prob(torch.tensor([[x]], dtype=DT)).item())

    total = sum(integrate.quad(density, lo, hi, limit=200)[0]
                for lo, hi in ((-np.inf, -10), (-10, 10), (10, np.inf)))
    assert total == pytest.approx(1.0, abs=1e-6)
    with pytest.raises(ValueError, match="Generator"):
        dist.sample((3,))


def test_sample_components_and_conditional_sampling():
    prior = FactorialMixturePrior([3, 2], 2)
    m = torch.arange(12, dtype=DT).view(2, 3, 2)
    prior.set_posterior(NormalGammaParams(m, torch.full((2, 3, 2), 2.0, dtype=DT), torch.full((2, 3, 2), 5.0, dtype=DT),
                                          torch.full((2, 3, 2), 4.0, dtype=DT)),
                        torch.tensor([[50.0, 30.0, 20.0], [10.0, 90.0, 1.0]], dtype=DT))
    n = 20_000
    z, k = prior.sample(n, gen(19))
    assert z.shape == (n, 4) and k.shape == (n, 2)
    assert torch.all(k[:, 1] < 2)  # padded component never drawn
    freq0 = torch.bincount(k[:, 0], minlength=3).double() / n
    freq1 = torch.bincount(k[:, 1], minlength=2).double() / n
    torch.testing.assert_close(freq0, torch.tensor([0.5, 0.3, 0.2], dtype=DT), atol=0.015, rtol=0)
    torch.testing.assert_close(freq1, torch.tensor([0.1, 0.9], dtype=DT), atol=0.012, rtol=0)
    zc, kc = prior.sample(n, gen(20), components=torch.tensor([2, -1]))
    assert torch.all(kc[:, 0] == 2)
    var_closed = 4.0 * 3.0 / (2.0 * 4.0)  # b (s+1) / (s (a-1))
    torch.testing.assert_close(zc[:, :2].mean(0), m[0, 2], atol=0.04, rtol=0)
    torch.testing.assert_close(zc[:, :2].var(0), torch.full((2,), var_closed, dtype=DT), rtol=0.05, atol=0)
    # same generator seed, same draws
    z2, k2 = prior.sample(n, gen(19))
    assert torch.equal(z, z2) and torch.equal(k, k2)
    with pytest.raises(ValueError, match="components"):
        prior.sample(5, gen(0), components=torch.tensor([0, 2]))


# -------------------------------------------------------------- init, state
def clustered_codes(g, B=300):
    centres = [torch.tensor([[-6.0, 0.0], [0.0, 6.0], [6.0, 0.0]], dtype=DT), torch.tensor([[0.0, -5.0], [0.0, 5.0]], dtype=DT)]
    labels = torch.stack([torch.randint(3, (B,), generator=g), torch.randint(2, (B,), generator=g)], -1)
    mu = torch.cat([centres[i][labels[:, i]] for i in range(2)], -1) + 0.5 * torch.randn(B, 4, generator=g, dtype=DT)
    return mu, torch.full_like(mu, 0.05), labels


def test_init_from_codes_recovers_clusters_and_is_seeded():
    g = gen(21)
    mu, var, truth = clustered_codes(g)
    prior = FactorialMixturePrior([3, 2], 2)
    hard = prior.init_from_codes(mu, var, "kmeans", gen(22))
    pred = prior.responsibilities(mu, var).argmax(-1)
    for i, K in enumerate([3, 2]):
        table = torch.zeros(K, K)
        table.index_put_((truth[:, i], pred[:, i]), torch.ones(len(mu)), accumulate=True)
        assert torch.all((table > 0).sum(1) == 1) and torch.all((table > 0).sum(0) == 1)  # a permutation
        assert torch.equal(hard[:, i], pred[:, i])
    # the pseudo-counts of q(pi) hold the cluster sizes
    real_counts = torch.where(prior.component_mask, prior.pseudo_counts(), 0.0).sum(-1)
    torch.testing.assert_close(real_counts - torch.tensor([3.0, 2.0], dtype=DT), torch.full((2,), float(len(mu)), dtype=DT))
    again = FactorialMixturePrior([3, 2], 2)
    again.init_from_codes(mu, var, "kmeans", gen(22))
    assert torch.equal(again.ng_natural, prior.ng_natural)
    rand = FactorialMixturePrior([3, 2], 2)
    rand.init_from_codes(mu, var, "random", gen(23), n_data=3000)
    real_counts = torch.where(rand.component_mask, rand.pseudo_counts(), 0.0).sum(-1)
    torch.testing.assert_close(real_counts, torch.tensor([3003.0, 3002.0], dtype=DT))
    with pytest.raises(ValueError, match="method"):
        rand.init_from_codes(mu, var, "spectral", gen(0))
    centres, labels = kmeans(mu[:, :2], 3, gen(24))
    assert sorted(centres[:, 0].round().tolist()) == [-6.0, 0.0, 6.0]


def test_state_dict_round_trip():
    g = gen(25)
    mu, var, _ = clustered_codes(g, 100)
    prior = FactorialMixturePrior([3, 2], 2, tau0=10.0, kappa=0.9)
    prior.init_from_codes(mu, var, "kmeans", gen(26))
    prior.svi_step(mu, var, prior.responsibilities(mu, var), 1000, step=3)
    fresh = FactorialMixturePrior([3, 2], 2)
    fresh.load_state_dict(prior.state_dict())
    assert (fresh.tau0, fresh.kappa) == (10.0, 0.9)
    torch.testing.assert_close(fresh.logits(mu, var), prior.logits(mu, var))
    gam = prior.responsibilities(mu, var)
    torch.testing.assert_close(fresh.kl_terms(mu, var, gam, 50).per_point(), prior.kl_terms(mu, var, gam, 50).per_point())
    assert torch.equal(fresh.sample(10, gen(1))[0], prior.sample(10, gen(1))[0])
    with pytest.raises((ValueError, RuntimeError)):
        FactorialMixturePrior([3, 3], 2).load_state_dict(prior.state_dict())


# ------------------------------------------------------ cached fast paths (speed work)
@pytest.mark.parametrize("ks,hyper", [([5], {}), ([4, 4], {}), ([4, 2, 3], dict(m0=0.3, s0=2.0, a0=0.5, b0=0.2, c0=3.0))])
def test_cached_training_terms_equal_the_pure_functions(ks, hyper):
    """The per-step fast paths (cached coefficients, KL[r] via xlogy, global KL from shared intermediates,
    one-bmm SVI targets, scalar-rho update) equal the readable pure functions they replace."""
    g = gen(40)
    D, B, N = 3, 24, 700
    prior = random_prior(ks, D, g, **hyper)
    I, K = len(ks), max(ks)
    mask = prior.component_mask
    for _ in range(3):  # the caches must follow every q(xi) update
        mu, var = random_codes(B, I, D, g)
        clamp = torch.stack([torch.randint(-1, k, (B,), generator=g) for k in ks], 1)
        p, c = prior.posterior_params(), prior.pseudo_counts()
        m, v = mu.view(B, I, D), var.view(B, I, D)
        for cl in (None, clamp):
            kz, kr, gamma = prior.local_kl(mu, var, cl)
            ref_gamma = torch.softmax(mixture_logits(m, v, p, c, mask), -1)
            if cl is not None:
                one_hot = torch.nn.functional.one_hot(cl.clamp(min=0), K).to(DT)
                ref_gamma = torch.where((cl >= 0).unsqueeze(-1), one_hot, ref_gamma)
            torch.testing.assert_close(gamma, ref_gamma, rtol=1e-12, atol=1e-14)
            torch.testing.assert_close(kz, kl_z(m, v, ref_gamma, p), rtol=1e-11, atol=1e-11)
            torch.testing.assert_close(kr, kl_r(ref_gamma, c, mask), rtol=1e-11, atol=1e-11)
        kl_ng, kl_dir = global_kl(p, c, prior.prior_params(), prior.prior_pseudo_count, mask)
        torch.testing.assert_close(prior.global_kl_per_point(N), (kl_ng + kl_dir) / N, rtol=1e-12, atol=0.0)
        # SVI: explicit natural-parameter update with einsum statistics, all factors in any order
        gamma = random_gamma(B, ks, g)
        rho = 0.3
        scale = N / B
        s1 = scale * torch.einsum("bik,bid->ikd", gamma, m)
        s2 = scale * torch.einsum("bik,bid->ikd", gamma, m * m + v)
        n_kd = (scale * gamma.sum(0)).unsqueeze(-1).expand_as(s1)
        target = prior.prior_natural + torch.stack([0.5 * n_kd, -0.5 * s2, s1, -0.5 * n_kd], -1)
        expected_ng = (1 - rho) * prior.ng_natural + rho * target
        expected_dir = (1 - rho) * prior.dirichlet_natural + rho * (prior.prior_pseudo_count + scale * gamma.sum(0) - 1)
        prior.svi_step(mu, var, gamma, N, rho=rho, factors=list(reversed(range(I))))
        torch.testing.assert_close(prior.ng_natural, expected_ng, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(prior.dirichlet_natural, expected_dir, rtol=1e-12, atol=1e-12)


def test_svi_step_on_a_factor_subset_leaves_the_others():
    g = gen(41)
    ks, D, B, N = [3, 4], 2, 16, 200
    a, b = random_prior(ks, D, g), random_prior(ks, D, gen(41))
    mu, var = random_codes(B, 2, D, g)
    gamma = random_gamma(B, ks, g)
    full = random_prior(ks, D, gen(41))
    full.svi_step(mu, var, gamma, N, rho=0.5)
    a.svi_step(mu, var, gamma, N, rho=0.5, factors=[1])
    torch.testing.assert_close(a.ng_natural[0], b.ng_natural[0], rtol=0, atol=0)
    torch.testing.assert_close(a.ng_natural[1], full.ng_natural[1], rtol=1e-14, atol=1e-14)
    torch.testing.assert_close(a.dirichlet_natural[1], full.dirichlet_natural[1], rtol=1e-14, atol=1e-14)
    with pytest.raises(ValueError, match="factors"):
        a.svi_step(mu, var, gamma, N, rho=0.5, factors=[0, 2])
