"""The factorial mixture prior VAE (paper 001) as a model: ELBO wiring, special cases, SVI, semi-supervision.

The prior's maths is tested in test_factorial_mixture.py; here: the registered KL is
KL[z] + KL[r] at the E-step optimum, I = 1 is a GMM-prior VAE, K = 1 a Gaussian-prior
VAE, clamping and the cross-entropy gradient, the SVI / first-order updates of
``after_step`` and bit-identical resume through the trainer.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import special
from torch.distributions import Independent, Normal, kl_divergence

from priorlab.config import FactorialMixtureParams, OptimParams, ParamsError, parse_params, SetupParams, VAEParams
from priorlab.data.store import Dataset
from priorlab.models import build_model
from priorlab.models.estimates import iw_log_likelihood
from priorlab.models.protocol import Batch, TrainingSet
from priorlab.models.fmvae import (
    FactorialMixtureLatent,
    labelled_subset,
)
from priorlab.priors.factorial_mixture import first_order_objective
from priorlab.priors.normal_gamma import NormalGammaParams
from priorlab.train import fit
from tests.helpers import gen

DT = torch.float64
OBS = (1, 8, 8)


def identity(b):
    return b


pytestmark = pytest.mark.usefixtures("single_thread")


def fm_model(latent_dim=4, seed=0, **kw):
    torch.manual_seed(seed)
    spec = FactorialMixtureParams(kind="fmvae", **{"prior_init_steps": 10, **kw})
    return build_model(SetupParams(dataset="x", latent_dim=latent_dim, hidden=[16]), spec, OBS)


def data(n=64, seed=0):
    return (torch.rand(n, *OBS, generator=gen(seed)) > 0.7).float()


def set_random_posterior(prior, g, sharp=False):
    I, K, D = prior.num_factors, prior.max_components, prior.latent_dim
    m = 2.0 * torch.randn(I, K, D, generator=g, dtype=DT)
    prec = torch.exp(0.5 * torch.randn(I, K, D, generator=g, dtype=DT))
    big = 1e9 if sharp else 3.0
    a = torch.full((I, K, D), big, dtype=DT)
    c = (1e9 if sharp else 5.0) * (1.0 + torch.rand(I, K, generator=g, dtype=DT))
    prior.set_posterior(NormalGammaParams(m, torch.full_like(m, big), a, a / prec), c)


def gaussian_q(B, width, g):
    mu = torch.randn(B, width, generator=g, dtype=DT)
    var = torch.exp(0.5 * torch.randn(B, width, generator=g, dtype=DT) - 1.0)
    return mu, var


# ----------------------------------------------------------------- ELBO wiring and special cases
def test_registered_kl_is_the_optimal_gamma_bound_of_eq_11():
    """For I = 1 the KL is E_q log q - log sum_k exp(E log pi_k + eq. 6): a direct numpy evaluation."""
    model = fm_model(latent_dim=3, num_factors=1, num_components=[4])
    set_random_posterior(model.prior, gen(1))
    mu, var = gaussian_q(7, 3, gen(2))
    q = Independent(Normal(mu, var.sqrt()), 1)
    kl = kl_divergence(q, model.prior_distribution(None))
    p = model.prior.posterior_params()
    c = model.prior.pseudo_counts()[0].numpy()
    m, s, a, b = (t[0].numpy() for t in p)
    e_log_pi = special.digamma(c) - special.digamma(c.sum())
    direct = []
    for n in range(7):
        x, v = mu[n].numpy(), var[n].numpy()
        ell = 0.5 * (special.digamma(a) - np.log(b) - np.log(2 * np.pi) - 1 / s - a / b * ((x - m) ** 2 + v)).sum(-1)
        neg_entropy = -0.5 * (np.log(2 * np.pi) + np.log(v) + 1).sum()
        direct.append(neg_entropy - special.logsumexp(ell + e_log_pi))
    np.testing.assert_allclose(kl.numpy(), direct, rtol=1e-10)
    # and the split of eq. 11: both parts non-negative in sum, KL[r] >= 0 at the optimum
    kz, kr, gamma = model.prior_distribution(None).local_kl(mu, var)
    torch.testing.assert_close((kz + kr).sum(-1), kl)
    assert bool((kr >= -1e-12).all()) and torch.allclose(gamma.sum(-1), torch.ones((), dtype=DT))


def test_single_factor_is_a_gmm_prior_vae():
    """I = 1 with a sharp q(xi): KL[z] + KL[r] is the variational upper bound on KL(q || GMM),
    tight when q(z|x) sits inside one well-separated component (Monte Carlo check)."""
    model = fm_model(latent_dim=2, num_factors=1, num_components=[3])
    m = torch.tensor([[[-6.0, 0.0], [6.0, 0.0], [0.0, 6.0]]], dtype=DT)
    prec = torch.tensor([[[1.0, 2.0], [0.5, 1.0], [1.0, 1.0]]], dtype=DT)
    big = torch.full_like(m, 1e9)
    weights = torch.tensor([[0.2, 0.3, 0.5]], dtype=DT)
    model.prior.set_posterior(NormalGammaParams(m, big, big, big / prec), 1e9 * weights)
    gmm = torch.distributions.MixtureSameFamily(
        torch.distributions.Categorical(weights[0]), Independent(Normal(m[0], prec[0].rsqrt()), 1)
    )
    g = gen(3)
    for centre, tight in (([-6.0, 0.3], True), ([0.0, 0.0], False)):
        mu = torch.tensor([centre], dtype=DT)
        var = torch.tensor([[0.3, 0.2]], dtype=DT)
        q = Independent(Normal(mu, var.sqrt()), 1)
        bound = kl_divergence(q, model.prior_distribution(None)).item()
        z = mu + var.sqrt() * torch.randn(400_000, 2, generator=g, dtype=DT)
        mc = (q.log_prob(z) - gmm.log_prob(z)).mean().item()
        assert bound >= mc - 5e-3
        if tight:
            assert bound == pytest.approx(mc, abs=5e-3)
        else:
            assert bound > mc + 0.05  # between components the single-allocation bound is loose
    # the predictive density of the sharp posterior is the GMM itself
    z = torch.randn(50, 2, generator=g, dtype=DT) * 4
    torch.testing.assert_close(model.prior_distribution(None).log_prob(z), gmm.log_prob(z), rtol=1e-5, atol=1e-5)


def test_one_component_per_factor_is_the_gaussian_vae():
    """K_i = 1 with q(mu, alpha) concentrated at (0, 1): the model's ELBO terms equal the N(0, I) VAE's."""
    fm = fm_model(latent_dim=4, num_factors=2, num_components=[1])
    torch.manual_seed(0)
    vae = build_model(SetupParams(dataset="x", latent_dim=4, hidden=[16]), VAEParams(kind="vae"), OBS)
    vae.load_state_dict({k: v for k, v in fm.state_dict().items() if not k.startswith("prior.") and k in vae.state_dict()},
                        strict=False)
    big = torch.full((2, 1, 2), 1e9, dtype=DT)
    fm.prior.set_posterior(NormalGammaParams(torch.zeros_like(big), big, big, big), torch.ones(2, 1, dtype=DT))
    x = data(32)
    torch.manual_seed(5)
    t_fm = fm.terms(x)
    torch.manual_seed(5)
    t_vae = vae.terms(x)
    torch.testing.assert_close(t_fm.log_lik, t_vae.log_lik)
    torch.testing.assert_close(t_fm.kl, t_vae.kl, rtol=1e-5, atol=1e-5)
    assert t_vae.kl.mean() > 0.1  # a non-trivial KL was compared


# ----------------------------------------------------------------- semi-supervision
def test_clamped_rows_use_the_label_component_and_unlabelled_rows_the_optimum():
    model = fm_model(latent_dim=4, num_factors=2, num_components=[3, 2])
    set_random_posterior(model.prior, gen(6))
    mu, var = gaussian_q(6, 4, gen(7))
    labels = torch.tensor([0, 2, -1, 1, -1, 2])
    clamp = model.clamp_of(labels)
    p_free, p_clamped = FactorialMixtureLatent(model.prior), FactorialMixtureLatent(model.prior, clamp)
    kz_f, kr_f, _ = p_free.local_kl(mu, var)
    kz_c, kr_c, gamma = p_clamped.local_kl(mu, var)
    lab = labels >= 0
    assert torch.equal(gamma[lab, 0].argmax(-1), labels[lab]) and bool((gamma[lab, 0].max(-1).values == 1).all())
    torch.testing.assert_close(kz_c[~lab], kz_f[~lab])
    torch.testing.assert_close(kz_c[:, 1], kz_f[:, 1])  # factor 1 is never clamped
    # clamped KL[r] = -E[log pi_y]; the free allocation is optimal so clamping can only raise the KL
    e_log_pi = model.prior.expected_log_pi()[0]
    torch.testing.assert_close(kr_c[lab, 0], -e_log_pi[labels[lab]])
    assert bool(((kz_c + kr_c).sum(-1) >= (kz_f + kr_f).sum(-1) - 1e-10).all())
    assert bool(((kz_c + kr_c).sum(-1)[lab] > (kz_f + kr_f).sum(-1)[lab] + 1e-6).any())


def test_semi_supervised_cross_entropy_gradient():
    """-log g_{0,y} (eq. 8, logits from eq. 6) is differentiable in the encoder output: gradcheck
    against finite differences, and it reaches the encoder weights only for labelled rows while Delta > 0."""
    model = fm_model(latent_dim=4, num_factors=2, num_components=[3, 2], supervised_factor="shape",
                     labelled_fraction=0.5, delta=10.0)
    set_random_posterior(model.prior, gen(8))
    labels = model.clamp_of(torch.tensor([1, -1, 0]))
    mu, var = gaussian_q(3, 4, gen(9))
    assert torch.autograd.gradcheck(
        lambda m, v: model.prior.cross_entropy(m, v, labels), (mu.requires_grad_(), var.requires_grad_())
    )
    x = data(3)
    model.set_phase("train")
    model.before_step(1)
    w = next(model.encoder.parameters())
    lab = torch.tensor([1, -1, 0])
    terms = model.terms(x, lab)
    ce = terms.extra["semi_supervised_ce"]
    assert ce[1] == 0 and bool((ce[[0, 2]] > 0).all())
    (grad,) = torch.autograd.grad(ce.sum(), w)
    assert grad.abs().sum() > 0
    assert "semi_supervised_ce" not in model.terms(x).extra  # no labels, no term
    model.set_phase("prior_init")
    assert "semi_supervised_ce" not in model.terms(x, lab).extra  # Delta is a joint-training term


def first_order_case(g: torch.Generator):
    """Two factors (K = 3 and 2, so factor 1 has a padded slot) with a random q(xi), 20 codes, factor 0
    labelled on three rows in four, and the E-step responsibilities: ``(model, mu, var, labels, gamma)``."""
    model = fm_model(latent_dim=4, num_factors=2, num_components=[3, 2])
    set_random_posterior(model.prior, g)
    mu, var = gaussian_q(20, 4, g)
    labels = model.clamp_of(torch.tensor([0, 1, 2, -1] * 5))
    return model, mu, var, labels, model.prior.responsibilities(mu, var, labels)


def test_first_order_objective_matches_the_elbo_terms_and_the_step_ascends():
    model, mu, var, labels, gamma = first_order_case(gen(10))
    prior = model.prior
    terms = prior.kl_terms(mu, var, gamma, 500)
    ce = prior.cross_entropy(mu, var, labels)
    p, c = prior.posterior_params(), prior.pseudo_counts()
    both = first_order_objective(mu.view(20, 2, 2), var.view(20, 2, 2), gamma, 500, p, c, prior.prior_params(),
                                 prior.prior_pseudo_count, prior.component_mask, labels, delta=3.0)
    expected = -terms.per_point().mean() - 3.0 * ce.mean()
    torch.testing.assert_close(both, expected)
    before_nat = prior.ng_natural.clone()
    values = []
    for _ in range(5):
        values.append(prior.first_order_step(mu, var, gamma, 500, [0], lr=1e-3, labels=labels, delta=3.0))
    assert all(b > a for a, b in zip(values, values[1:]))
    assert not torch.equal(prior.ng_natural[0], before_nat[0])
    assert torch.equal(prior.ng_natural[1], before_nat[1])  # untouched factor
    assert int(prior.fo_steps[0]) == 5 and int(prior.fo_steps[1]) == 0
    with pytest.raises(ValueError, match="factors"):
        prior.first_order_step(mu, var, gamma, 500, [2], lr=1e-3)


def test_first_order_step_is_adams_first_step_on_the_autograd_gradient():
    """From zero moments, bias-corrected Adam's first step is lr * g / (|g| + eps) per coordinate:
    the step of section 2.5 in u = (m, log s, log a, log b) and log c, with g the gradient of F / N
    taken here by plain autograd (the update takes it with torch.func).  Padded slots stay put."""
    model, mu, var, labels, gamma = first_order_case(gen(11))
    prior = model.prior
    p, c = prior.posterior_params(), prior.pseudo_counts()
    u = torch.stack([p.m, p.s.log(), p.a.log(), p.b.log()], -1).requires_grad_()
    log_c = c.log().requires_grad_()
    params = NormalGammaParams(u[..., 0], u[..., 1].exp(), u[..., 2].exp(), u[..., 3].exp())
    obj = first_order_objective(mu.view(20, 2, 2), var.view(20, 2, 2), gamma, 500, params, log_c.exp(),
                                prior.prior_params(), prior.prior_pseudo_count, prior.component_mask, labels, delta=3.0)
    g_u, g_c = torch.autograd.grad(obj, (u, log_c))
    before_nat, before_dir = prior.ng_natural.clone(), prior.dirichlet_natural.clone()
    lr = 1e-3
    returned = prior.first_order_step(mu, var, gamma, 500, [0, 1], lr=lr, labels=labels, delta=3.0)
    torch.testing.assert_close(returned, obj.detach())
    q = prior.posterior_params()
    mask = prior.component_mask
    u_new = torch.stack([q.m, q.s.log(), q.a.log(), q.b.log()], -1)
    torch.testing.assert_close(u_new[mask], (u + lr * g_u / (g_u.abs() + 1e-8)).detach()[mask])
    torch.testing.assert_close(prior.pseudo_counts().log()[mask], (log_c + lr * g_c / (g_c.abs() + 1e-8)).detach()[mask])
    assert (g_u[mask].abs() > 1e-6).float().mean() > 0.9  # most coordinates move by a full lr
    assert torch.equal(prior.ng_natural[~mask], before_nat[~mask])
    assert torch.equal(prior.dirichlet_natural[~mask], before_dir[~mask])
    assert prior.fo_steps.tolist() == [1, 1]


# ----------------------------------------------------------------- SVI inside the training loop
def batch_objective(model, mu, var, clamp, gamma):
    """Per-point batch ELBO in lambda with gamma fixed: -mean(KL[z] + KL[r]) - global KL / N."""
    t = model.prior.kl_terms(mu, var, gamma, int(model.n_data))
    return -t.per_point().mean().item()


def test_after_step_svi_changes_lambda_and_never_decreases_the_batch_elbo():
    model = fm_model(latent_dim=4, num_factors=2, num_components=[3, 2], tau0=1.0, kappa=0.6)
    x = data(128)
    model.set_phase("prior_init")
    model.init_prior(TrainingSet(x, identity), gen(11))
    assert int(model.n_data) == 128 and int(model.svi_count) == 10
    model.set_phase("train")
    for step in range(1, 6):
        model.before_step(step)
        terms = model.terms(x[:32])
        mu, var, clamp = terms.q.mean.detach(), terms.q.variance.detach(), None
        gamma = terms.p.last[2]
        torch.testing.assert_close(gamma, model.prior.responsibilities(mu, var, clamp))
        before, lam = batch_objective(model, mu, var, clamp, gamma), model.prior.ng_natural.clone()
        model.after_step(Batch(x[:32]), terms, step)
        assert not torch.equal(model.prior.ng_natural, lam)
        after = batch_objective(model, mu, var, clamp, gamma)
        assert after >= before - 1e-9
        # the E-step on the new lambda can only improve it further
        assert batch_objective(model, mu, var, clamp, model.prior.responsibilities(mu, var, clamp)) >= after - 1e-9
    assert int(model.svi_count) == 15


def test_supervised_prior_init_sets_factor_zero_from_the_labels():
    model = fm_model(latent_dim=4, num_factors=2, num_components=[3, 2], supervised_factor="shape",
                     labelled_fraction=0.5, prior_init_steps=0)
    x = data(90)
    model.set_phase("prior_init")
    with torch.no_grad():
        mu, var = model.encode_codes([x])
    labels = torch.arange(90) % 3
    mu0 = mu[:, :2].double()
    train_labels = torch.as_tensor(labelled_subset(labels.numpy(), 0.5, 0))
    model.init_prior(TrainingSet(x, identity, train_labels), gen(12))
    lab = train_labels >= 0
    for k in range(3):
        sel = lab & (train_labels == k)
        s = model.prior.posterior_params().s[0, k, 0]
        expected = mu0[sel].sum(0) * (90 / lab.sum()) / s  # conjugate mean with m0 = 0
        torch.testing.assert_close(model.prior.posterior_params().m[0, k], expected, rtol=1e-5, atol=1e-6)


def toy_dataset(n=96):
    g = gen(13)
    x = (torch.rand(n, *OBS, generator=g) > 0.7).to(torch.uint8).numpy()
    factors = np.stack([np.arange(n) % 3, np.arange(n) % 2], 1).astype(np.int64)
    arrays = {"x_train": x, "factors_train": factors, "x_test": x[:32], "factors_test": factors[:32]}
    return Dataset("toy", arrays, {"factor_names": ["shape", "other"], "pixel_max": 1})


def test_seeded_labelled_subset_and_training_set_labels():
    labels = labelled_subset(np.arange(50) % 3, 0.4, seed=3)
    assert (labels >= 0).sum() == 20 and np.array_equal(labels, labelled_subset(np.arange(50) % 3, 0.4, seed=3))
    assert not np.array_equal(labels, labelled_subset(np.arange(50) % 3, 0.4, seed=4))
    model = fm_model(latent_dim=4, num_factors=2, num_components=[3, 2], supervised_factor="shape",
                     labelled_fraction=0.5, label_seed=7)
    ds = toy_dataset()
    ts = model.training_set(ds)
    expected = labelled_subset(ds.factors("train")[:, 0], 0.5, 7)
    assert torch.equal(ts.x, ds.x("train")) and np.array_equal(ts.labels.numpy(), expected)
    batch = ts.batch(torch.tensor([5, 0, 7]))
    assert torch.equal(batch.labels, torch.as_tensor(expected[[5, 0, 7]]))
    assert fm_model(latent_dim=4, num_factors=2).training_set(ds).labels is None


class Interrupt(RuntimeError):
    pass


def train_once(tmp_path, interrupt_at=None):
    model = fm_model(latent_dim=4, num_factors=2, num_components=[3, 2], supervised_factor="shape",
                     labelled_fraction=0.5, delta=5.0, delta_steps=25, kl_z_weight=3.0, kl_z_weight_steps=10)
    ds = toy_dataset()
    model.set_phase("prior_init")
    model.bind_data(ds)
    model.init_prior(model.training_set(ds), gen(15))
    model.set_phase("train")
    if interrupt_at is not None:
        original = model.after_step

        def after(batch, terms, step):
            original(batch, terms, step)
            if step == interrupt_at:
                raise Interrupt

        model.after_step = after
    opt = OptimParams(steps=40, batch_size=16, lr=1e-3, checkpoint_every=20, log_every=100, seed=2)
    res = fit(model, model.training_set(ds), opt, checkpoint=tmp_path / "ck.pt", live_dir=None, fingerprint="f")
    return model, res


def test_resume_is_bit_identical_including_prior_buffers(tmp_path):
    reference, _ = train_once(tmp_path / "a")
    with pytest.raises(Interrupt):
        train_once(tmp_path / "b", interrupt_at=30)
    assert (tmp_path / "b" / "ck.pt").is_file()
    resumed, res = train_once(tmp_path / "b")
    assert res.resumed_from == 20
    ref, out = reference.state_dict(), resumed.state_dict()
    assert set(ref) == set(out) and {"prior.ng_natural", "prior.fo_ng_moments", "svi_count"} <= set(ref)
    assert all(torch.equal(ref[k], out[k]) if torch.is_tensor(ref[k]) else ref[k] == out[k] for k in ref)
    assert int(ref["prior.fo_steps"][0]) == 25 and int(ref["prior.fo_steps"][1]) == 0  # Delta off after 25 steps
    assert int(ref["svi_count"]) == 10 + 40


def test_evaluation_extras_report_the_eq_11_split_and_accuracy():
    model = fm_model(latent_dim=4, num_factors=2, num_components=[3, 2], supervised_factor="shape",
                     labelled_fraction=0.5)
    ds = toy_dataset()
    model.set_phase("prior_init")
    model.init_prior(model.training_set(ds), gen(16))
    x = ds.prepare(ds.x("test"))
    torch.manual_seed(0)
    out = model.evaluation_extras(ds, x)
    assert out["elbo"] == pytest.approx(out["log_lik"] - out["kl_z"] - out["kl_r"])
    assert out["kl_r"] >= 0 and 0.0 <= out["heldout_accuracy"] <= 1.0
    # per point and per [label, cluster]: the records the paired ratio and the diagnosis read
    from priorlab.io import unpack_flags
    hits, conf = unpack_flags(out["heldout_correct"], len(x)), np.asarray(out["heldout_confusion"])
    assert hits.mean() == pytest.approx(out["heldout_accuracy"]) and conf.sum() == len(x)
    assert np.trace(conf) / len(x) == pytest.approx(out["heldout_accuracy"])
    # the iw bound uses the predictive density of sec. 2.6 and lies above the ELBO on average
    torch.manual_seed(0)
    lk = iw_log_likelihood(model, x, 200).mean().item()
    assert math.isfinite(lk) and lk > out["elbo"] - 1.0


def test_params_validation():
    base = {"profile": "tiny", "device": "cpu", "datasets": {"d": {"kind": "smiley", "n_train": 10, "n_test": 5}},
            "setups": {"s": {"dataset": "d", "latent_dim": 4}}, "pretrain": {"steps": 1, "batch_size": 2, "lr": 0.1},
            "train": {"steps": 1, "batch_size": 2, "lr": 0.1}, "runs": {"r": {"setup": "s", "model": "m"}}}

    def parse(**model):
        return parse_params({**base, "models": {"pretrain": {"kind": "vae"}, "m": {"kind": "fmvae", **model}}})

    assert parse(num_factors=2, num_components=[4]).models["m"].components() == [4, 4]
    for bad, msg in (({"kappa": 0.5}, "kappa"), ({"num_factors": 2, "num_components": [1, 2, 3]}, "num_components"),
                     ({"delta": 1.0}, "supervised_factor"), ({"labelled_fraction": 1.5}, "labelled_fraction")):
        with pytest.raises(ParamsError, match=msg):
            parse(**bad)
    with pytest.raises(ValueError, match="divisible"):
        fm_model(latent_dim=5, num_factors=2)


def test_labels_stay_aligned_with_their_rows_through_the_trainer_shuffle(tmp_path):
    """The label reaching the loss is the label of the row's own pixels after fit's seeded shuffling
    (labels derived from the pixels: shape = number of white pixels mod 3), 40 % of rows labelled."""
    n = 120
    g = gen(21)
    x = (torch.rand(n, *OBS, generator=g) > 0.6).to(torch.uint8).numpy()
    shape = x.reshape(n, -1).sum(1) % 3
    factors = np.stack([shape, np.arange(n) % 2], 1).astype(np.int64)
    ds = Dataset("toy", {"x_train": x, "factors_train": factors, "x_test": x[:8], "factors_test": factors[:8]},
                 {"factor_names": ["shape", "other"], "pixel_max": 1})
    model = fm_model(latent_dim=4, num_factors=2, num_components=[3, 2], supervised_factor="shape",
                     labelled_fraction=0.4, delta=5.0)
    model.set_phase("prior_init")
    model.init_prior(model.training_set(ds), gen(22))
    model.set_phase("train")
    seen = {"labelled": 0, "rows": 0}
    original = model.extra_terms

    def checked(xb, terms, lab):
        own = xb.reshape(len(xb), -1).sum(1).round().long() % 3
        assert lab is not None and torch.equal(lab[lab >= 0], own[lab >= 0])
        seen["labelled"] += int((lab >= 0).sum())
        seen["rows"] += len(lab)
        out = original(xb, terms, lab)
        ce = out["semi_supervised_ce"]
        assert bool((ce[lab < 0] == 0).all()) and bool((ce[lab >= 0] > 0).all())
        return out

    model.extra_terms = checked
    opt = OptimParams(steps=12, batch_size=30, lr=1e-3, checkpoint_every=100, log_every=100, seed=3)
    fit(model, model.training_set(ds), opt, checkpoint=tmp_path / "ck.pt", live_dir=None, fingerprint="f")
    assert seen["rows"] == 12 * 30 and seen["labelled"] == 12 * 30 * 0.4  # 3 full epochs of 120 rows, 48 labelled
