"""Lp-nested (ISA) prior of paper 004: normaliser, special cases, sampler, gradients, module."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats
from scipy.special import betaln

from priorlab.priors.lp_nested import (
    LpNested,
    LpNestedLayout,
    LpNestedPrior,
    dsprites_layout,
    log_surface,
    lp_nested_norm,
)

pytestmark = pytest.mark.usefixtures("single_thread")

D = torch.float64


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def dist(p0, subspaces, scale=1.0) -> LpNested:
    return LpNested(torch.tensor(p0, dtype=D), torch.tensor([p for p, _ in subspaces], dtype=D),
                    [n for _, n in subspaces], torch.tensor(scale, dtype=D))


def orthant_rule(upper: float, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Gauss-Legendre on [0, upper] after z = upper * t^2 (smooths the |z|^p cusp at 0)."""
    t, w = np.polynomial.legendre.leggauss(k)
    t, w = (t + 1) / 2, w / 2
    return upper * t**2, w * 2 * upper * t


def tensor_grid(z: np.ndarray, w: np.ndarray, dim: int) -> tuple[torch.Tensor, np.ndarray]:
    pts = np.stack([g.ravel() for g in np.meshgrid(*([z] * dim), indexing="ij")], -1)
    wts = np.prod(np.stack([g.ravel() for g in np.meshgrid(*([w] * dim), indexing="ij")], -1), -1)
    return torch.tensor(pts), wts


def cutoff(p0: float, scale: float) -> float:
    """f(z) >= max_i |z_i|, so beyond this every coordinate has f^p0 / s > 45 (mass < e^-40)."""
    return (45.0 * scale) ** (1.0 / p0)


# Unequal-exponent layouts (p0, [[p_l, n_l], ...], s) used for the integration / sampler checks.
UNEQUAL = [
    (1.5, [[3.0, 2]], 1.0),
    (2.5, [[1.3, 1], [4.0, 2]], 0.7),
    (1.4, [[3.0, 2], [2.0, 1]], 1.5),
    (1.2, [[5.0, 1], [1.5, 1], [2.5, 1]], 1.0),
]


# ----------------------------------------------------------------------------- layout


def test_layout_param_form_roundtrip_and_dsprites():
    lay = LpNestedLayout.from_params({"p0": 2.1, "subspaces": [[2.2, 5], [3, 1]]})
    assert lay.sizes == (5, 1) and lay.p_sub == (2.2, 3.0) and lay.n == 6
    assert LpNestedLayout.from_params(lay.to_params()) == lay
    ds = dsprites_layout()
    assert ds.to_params() == {"p0": 2.1, "subspaces": [[2.2, 5]] * 5} and ds.n == 25


@pytest.mark.parametrize(
    "params, message",
    [
        ({"p0": 1.0, "subspaces": [[2.0, 2]]}, "p0 must be a finite number > 1"),
        ({"p0": float("nan"), "subspaces": [[2.0, 2]]}, "p0 must be a finite number > 1"),
        ({"p0": "2", "subspaces": [[2.0, 2]]}, "p0 must be a finite number > 1"),
        ({"p0": 2.0, "subspaces": []}, "non-empty list"),
        ({"p0": 2.0, "subspaces": [[2.0, 0]]}, r"subspace 0 size n_l must be an integer >= 1"),
        ({"p0": 2.0, "subspaces": [[2.0, 2], [2.0, 2.5]]}, r"subspace 1 size n_l must be an integer >= 1"),
        ({"p0": 2.0, "subspaces": [[2.0, True]]}, r"size n_l must be an integer"),
        ({"p0": 2.0, "subspaces": [[0.5, 2]]}, r"subspace 0 exponent p_l must be a finite number > 1"),
        ({"p0": 2.0, "subspaces": [[2.0]]}, r"subspace 0 must be a pair"),
        ({"p0": 2.0}, r"missing \['subspaces'\]"),
        ({"p0": 2.0, "subspaces": [[2.0, 2]], "scale": 1}, r"unknown \['scale'\]"),
        ([2.0, [[2.0, 2]]], "expected a mapping"),
    ],
)
def test_layout_parser_rejects_bad_input(params, message):
    with pytest.raises(ValueError, match=message):
        LpNestedLayout.from_params(params)


# ----------------------------------------------------------------------------- f and S_f(1)


def test_norm_matches_naive_formula_and_is_stable():
    g = gen(0)
    p0 = 1.7  # subspaces: (p 3.0, size 2), (1.2, 1), (2.5, 3)
    z = torch.randn(50, 6, generator=g, dtype=D)
    za = z.abs().numpy()
    f_sub = [(za[:, 0:2] ** 3.0).sum(1) ** (1 / 3.0), za[:, 2], (za[:, 3:6] ** 2.5).sum(1) ** (1 / 2.5)]
    naive = sum(fl**p0 for fl in f_sub) ** (1 / p0)
    f = lp_nested_norm(z, p0, [3.0, 1.2, 2.5], [2, 1, 3])
    np.testing.assert_allclose(f.numpy(), naive, rtol=1e-12)
    # homogeneity far outside the range where |z|^p is representable, and exact zeros
    for c in (1e-250, 1e250):
        np.testing.assert_allclose((lp_nested_norm(c * z, p0, [3.0, 1.2, 2.5], [2, 1, 3]) / c).numpy(), naive, rtol=1e-12)
    z0 = z[:3].clone()
    z0[0] = 0.0
    z0[1, :2] = 0.0  # one whole subspace at zero
    np.testing.assert_allclose(lp_nested_norm(z0, p0, [3.0, 1.2, 2.5], [2, 1, 3])[0].item(), 0.0)
    np.testing.assert_allclose(lp_nested_norm(z0[1], p0, [3.0, 1.2, 2.5], [2, 1, 3]).item(),
                               (za[1, 2] ** p0 + f_sub[2][1] ** p0) ** (1 / p0), rtol=1e-12)


def test_log_prob_and_gradients_finite_at_zero():
    p0 = torch.tensor(2.1, dtype=D, requires_grad=True)
    p_sub = torch.tensor([2.2, 1.5], dtype=D, requires_grad=True)
    z = torch.zeros(2, 4, dtype=D, requires_grad=True)
    with torch.no_grad():
        z[1, 2:] = torch.tensor([0.3, -1.0], dtype=D)  # first subspace exactly zero
    lp = LpNested(p0, p_sub, [2, 2]).log_prob(z)
    lp.sum().backward()
    for t in (lp, p0.grad, p_sub.grad, z.grad):
        assert torch.isfinite(t).all()


def notes_log_surface(p0: float, subspaces) -> float:
    """The notes' generic form: n log 2 + sum_I [-(l_I - 1) log p_I + sum_k log B(sum_{j<=k} n_Ij/p_I, n_I,k+1/p_I)]."""

    def node(p, child_leaves):
        out, acc = -(len(child_leaves) - 1) * math.log(p), child_leaves[0]
        for nk in child_leaves[1:]:
            out += betaln(acc / p, nk / p)
            acc += nk
        return out

    sizes = [n for _, n in subspaces]
    total = sum(sizes) * math.log(2.0) + node(p0, sizes)
    return total + sum(node(p, [1] * n) for p, n in subspaces if n > 1)


@pytest.mark.parametrize("p0, subspaces", [(2.1, [[2.2, 5]] * 5), (1.3, [[4.0, 3], [1.1, 1], [2.7, 2]]), (3.5, [[1.6, 7]])])
def test_log_surface_matches_notes_beta_product(p0, subspaces):
    got = log_surface(torch.tensor(p0, dtype=D), torch.tensor([p for p, _ in subspaces], dtype=D), [n for _, n in subspaces])
    assert got.item() == pytest.approx(notes_log_surface(p0, subspaces), abs=1e-10)


def test_log_surface_l2_sphere():
    for n in (1, 2, 3, 7):
        expected = math.log(2.0) + 0.5 * n * math.log(math.pi) - math.lgamma(n / 2)  # 2 pi^(n/2) / Gamma(n/2)
        two = torch.tensor(2.0, dtype=D)
        assert log_surface(two, [2.0], [n]).item() == pytest.approx(expected, abs=1e-12)
        assert log_surface(two, [2.0, 2.0], [n, 1]).item() == pytest.approx(log_surface(two, [2.0], [n + 1]).item(), abs=1e-12)


# ----------------------------------------------------------------------------- density special cases


@pytest.mark.parametrize("subspaces", [[[2.0, 1]], [[2.0, 3]], [[2.0, 2], [2.0, 1], [2.0, 4]], [[2.0, 1]] * 4, [[2.0, 5]] * 5])
@pytest.mark.parametrize("scale", [0.7, 2.0])
def test_all_exponents_two_is_isotropic_gaussian(subspaces, scale):
    d = dist(2.0, subspaces, scale)
    z = 1.3 * torch.randn(20, d.n, generator=gen(1), dtype=D)
    ref = torch.distributions.Normal(torch.zeros((), dtype=D), math.sqrt(scale / 2)).log_prob(z).sum(-1)
    torch.testing.assert_close(d.log_prob(z), ref, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(d.variance, torch.full((d.n,), scale / 2, dtype=D))


@pytest.mark.parametrize("p", [1.3, 2.5, 4.0])
@pytest.mark.parametrize("sizes", [[3], [2, 1, 4], [1, 1]])
@pytest.mark.parametrize("scale", [0.5, 1.8])
def test_equal_exponents_is_product_of_generalised_normals(p, sizes, scale):
    d = dist(p, [[p, n] for n in sizes], scale)
    z = 1.5 * torch.randn(20, d.n, generator=gen(2), dtype=D)
    per_dim = math.log(p) - math.log(2.0) - math.log(scale) / p - math.lgamma(1 / p) - z.abs() ** p / scale
    torch.testing.assert_close(d.log_prob(z), per_dim.sum(-1), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("p0, subspaces, scale", UNEQUAL)
def test_density_integrates_to_one(p0, subspaces, scale):
    d = dist(p0, subspaces, scale)
    z, w = orthant_rule(cutoff(p0, scale), 60)
    pts, wts = tensor_grid(z, w, d.n)
    total = 2**d.n * float((wts * d.log_prob(pts).exp().numpy()).sum())  # symmetric in every sign
    assert total == pytest.approx(1.0, abs=1e-8)
    # the normaliser of the flat Lp-sphere with exponent p0 (ignoring the tree) would be visibly wrong
    if any(n > 1 for _, n in subspaces):
        wrong = d.log_prob(pts) - d.log_normalizer() + dist(p0, [[p0, d.n]], scale).log_normalizer()
        assert abs(2**d.n * float((wts * wrong.exp().numpy()).sum()) - 1) > 1e-3


def test_entropy_matches_quadrature():
    p0, subspaces, scale = UNEQUAL[1]
    d = dist(p0, subspaces, scale)
    z, w = orthant_rule(cutoff(p0, scale), 60)
    pts, wts = tensor_grid(z, w, d.n)
    lp = d.log_prob(pts)
    assert -2**d.n * float((wts * (lp.exp() * lp).numpy()).sum()) == pytest.approx(d.entropy().item(), abs=1e-7)


# ----------------------------------------------------------------------------- gradients


def test_log_prob_gradcheck_exponents_scale_and_z():
    sizes = [2, 1, 3]
    z = torch.randn(5, 6, generator=gen(3), dtype=D)
    p0 = torch.tensor(1.8, dtype=D, requires_grad=True)
    p_sub = torch.tensor([2.7, 1.9, 1.4], dtype=D, requires_grad=True)
    s = torch.tensor(0.8, dtype=D, requires_grad=True)
    zz = z.clone().requires_grad_(True)
    assert torch.autograd.gradcheck(lambda a, b, c, x: LpNested(a, b, sizes, c).log_prob(x), (p0, p_sub, s, zz))
    assert torch.autograd.gradcheck(lambda a, b: log_surface(a, b, sizes), (p0, p_sub))
    # p of the single-leaf subspace cancels: zero gradient
    LpNested(p0, p_sub, sizes, s).log_prob(z).sum().backward()
    assert p_sub.grad[1].item() == pytest.approx(0.0, abs=1e-12) and p_sub.grad[0] != 0 and p0.grad != 0


# ----------------------------------------------------------------------------- sampler


def test_sampler_reproducible_with_generator():
    d = LpNested.from_layout(dsprites_layout(), dtype=D)
    a, b, c = d.sample((7, 3), generator=gen(5)), d.sample((7, 3), generator=gen(5)), d.sample((7, 3), generator=gen(6))
    assert a.shape == (7, 3, 25) and a.dtype == D
    assert torch.equal(a, b) and not torch.equal(a, c)
    torch.manual_seed(11)
    x = d.sample((4,))
    torch.manual_seed(11)
    assert torch.equal(x, d.sample((4,)))
    assert d.sample().shape == (25,)


@pytest.mark.parametrize(
    "p0, subspaces, scale",
    [(2.1, [[2.2, 5]] * 5, 1.0), UNEQUAL[1], (1.3, [[12.0, 3], [1.5, 2]], 2.0)],  # p = 12: Dirichlet(1/12) boost path
)
def test_sampled_radius_is_gamma(p0, subspaces, scale):
    d = dist(p0, subspaces, scale)
    z = d.sample((5000,), generator=gen(7))
    assert torch.isfinite(z).all()
    t = (lp_nested_norm(z, d.p0, d.p_sub, d.sizes) ** p0 / scale).numpy()
    assert stats.kstest(t, stats.gamma(d.n / p0).cdf).pvalue > 1e-3
    assert stats.kstest(t, stats.gamma(d.n / p0 * 1.1).cdf).pvalue < 1e-3  # the test has power


@pytest.mark.slow
def test_sampled_marginals_match_integrated_density():
    """1-D marginals of a 3-D layout: KS of samples against the CDF integrated from log_prob."""
    p0, subspaces, scale = UNEQUAL[1]  # p0 = 2.5 over [[1.3, 1], [4, 2]], s = 0.7
    d = dist(p0, subspaces, scale)
    upper = cutoff(p0, scale)
    x = np.linspace(0.0, upper, 1201)
    zi, wi = orthant_rule(upper, 40)
    inner, w_inner = tensor_grid(zi, wi, 2)
    samples = d.sample((5000,), generator=gen(8)).numpy()
    cdfs = {}
    for k in (0, 1):  # the single leaf (p = 1.3) and a leaf of the p = 4 subspace
        pts = torch.empty(len(x), len(inner), 3, dtype=D)
        pts[..., k] = torch.tensor(x)[:, None]
        pts[..., [j for j in range(3) if j != k]] = inner[None]
        marg = 4 * (d.log_prob(pts).exp().numpy() * w_inner).sum(-1)  # density of z_k at x >= 0
        cum = np.concatenate([[0.0], np.cumsum(0.5 * (marg[1:] + marg[:-1]) * np.diff(x))])
        assert 2 * cum[-1] == pytest.approx(1.0, abs=1e-5)
        assert 2 * np.trapezoid(x**2 * marg, x) == pytest.approx(d.variance[k].item(), rel=1e-4)
        cdfs[k] = lambda v, cum=cum: 0.5 + np.sign(v) * np.interp(np.abs(v), x, cum)
        assert stats.kstest(samples[:, k], cdfs[k]).pvalue > 1e-3
    assert stats.kstest(samples[:, 1], lambda v: cdfs[1](v / 1.15)).pvalue < 1e-3  # the test has power


@pytest.mark.slow
def test_sample_moments_match_variance_and_entropy():
    d = dist(1.4, [[3.0, 2], [2.0, 1], [1.3, 4]], 1.5)
    z = d.sample((40000,), generator=gen(9))
    torch.testing.assert_close(z.var(0), d.variance, rtol=0.05, atol=0)
    assert z.mean(0).abs().max().item() < 0.05
    assert (z > 0).double().mean().item() == pytest.approx(0.5, abs=0.01)
    assert -d.log_prob(z).mean().item() == pytest.approx(d.entropy().item(), abs=0.05)


# ----------------------------------------------------------------------------- prior module


def test_prior_module_initialises_exponents_and_parameters():
    layout = {"p0": 2.1, "subspaces": [[2.2, 5], [1.05, 1], [7.5, 3]]}
    prior = LpNestedPrior(layout)
    assert prior.latent_dim == 9
    p0, p_sub = prior.exponents()
    assert torch.equal(p0, torch.tensor(2.1)) and torch.equal(p_sub, torch.tensor([2.2, 1.05, 7.5]))  # exact in float32
    params = prior.exponent_parameters()
    assert len(params) == 2 and {id(p) for p in params} == {id(p) for p in prior.parameters()}
    dist_ = prior()
    assert isinstance(dist_, LpNested) and dist_.event_shape == (9,)
    dist_.log_prob(torch.randn(4, 9, generator=gen(10))).sum().backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() and p.grad.abs().sum() > 0 for p in params)
    assert prior.sample(6, generator=gen(1)).shape == (6, 9)
    assert torch.equal(prior.sample(6, generator=gen(1)), prior.sample(6, generator=gen(1)))


def test_prior_module_fixed_exponents_and_float64():
    prior = LpNestedPrior(dsprites_layout(), learn_exponents=False, scale=2.0)
    assert list(prior.parameters()) == [] and prior.exponent_parameters() == []
    assert {"theta0", "theta_sub", "scale"} <= set(prior.state_dict())
    prior = prior.double()
    p0, p_sub = prior.exponents()
    assert p0.dtype == D and p0.item() == pytest.approx(2.1, rel=1e-7) and prior().log_prob(torch.zeros(25, dtype=D)).dtype == D
    with pytest.raises(ValueError, match="scale must be"):
        LpNestedPrior(dsprites_layout(), scale=0.0)


def test_log_surface_from_a_sizes_tensor_is_the_same_number():
    p0, p_sub, sizes = torch.tensor(2.1), torch.tensor([2.2, 1.7, 3.0]), (2, 3, 1)
    assert torch.equal(log_surface(p0, p_sub, sizes, torch.tensor(sizes, dtype=torch.float32)),
                       log_surface(p0, p_sub, sizes))
    prior = LpNestedPrior({"p0": 2.1, "subspaces": [[2.2, 2], [1.7, 3], [3.0, 1]]}).double()
    d = prior()
    assert d.sizes_tensor.dtype == torch.float64 and not d._validate_args
    assert torch.equal(d.log_normalizer(), LpNested(d.p0, d.p_sub, sizes, d.scale).log_normalizer())
