"""The sparse VAE model kind (paper 003): fit + exact resume, SSL and σ-MAP wiring after each step,
the B.2 prior option, config errors, and the synthetic study's metric / claim logic."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch

from priorlab.config import OptimParams, ParamsError, SetupParams, SparseVAEParams, VAEParams
from priorlab.data.store import Dataset
from priorlab.errors import DataError, UserError
from priorlab.studies.sparse_vae_experiments import aggregate as A
from priorlab.studies.sparse_vae_experiments import claims as C
from priorlab.studies.sparse_vae_experiments import report as E
from priorlab.studies.claims import VERDICTS
from priorlab.studies.sparse_vae_experiments import fit as F
from priorlab.studies.sparse_vae_experiments import real as R
from priorlab.studies.param_slices import run_param_slices
from priorlab.models import build_model
from priorlab.models.protocol import Batch, StepContext
from priorlab.models.sparse_vae import SparseVAE, gaussian_kl_general
from priorlab.train import fit
from tests.helpers import crash_at

G, K = 7, 4


def data(n: int = 64, seed: int = 0, counts: bool = False) -> Dataset:
    rs = np.random.RandomState(seed)
    x = rs.poisson(3.0, (n, G)).astype(np.int64) if counts else rs.standard_normal((n, G)).astype(np.float32)
    return Dataset(name="t", arrays={"x_train": x, "x_test": x[:8]},
                   manifest={"observation_kind": "counts" if counts else "vector"})


def model(seed: int = 0, likelihood: str = "gaussian_ig", **kw) -> SparseVAE:
    torch.manual_seed(seed)
    setup = SetupParams(dataset="t", latent_dim=K, hidden=[8, 8], likelihood=likelihood, obs_std=1.0)
    return build_model(setup, SparseVAEParams(kind="sparse_vae", warm_start="scratch", **kw), (G,))


def one_step(m: SparseVAE, d: Dataset, lr: float = 1e-2):
    m.bind_data(d)
    opt = torch.optim.Adam(m.param_groups(lr)[0]["params"], lr=lr)
    x = d.prepare(d.x("train"))[:16]
    return m.train_step(Batch(x), 0, StepContext(opt)), x


def test_fit_resumes_bit_identically(tmp_path):
    d = data()
    opt = OptimParams(steps=30, batch_size=16, lr=1e-2, checkpoint_every=10, seed=0)
    ref = model()
    ref.bind_data(d)
    fit(ref, ref.training_set(d), opt, checkpoint=tmp_path / "a.pt", live_dir=None, fingerprint="fp")
    crashed = model()
    crashed.bind_data(d)
    crash_at(crashed, 25)
    with pytest.raises(KeyboardInterrupt):
        fit(crashed, crashed.training_set(d), opt, checkpoint=tmp_path / "b.pt", live_dir=None, fingerprint="fp")
    torch.manual_seed(99)
    resumed = model(seed=5)
    resumed.bind_data(d)
    res = fit(resumed, resumed.training_set(d), opt, checkpoint=tmp_path / "b.pt", live_dir=None, fingerprint="fp")
    assert res.resumed_from == 20
    for k, v in ref.state_dict().items():
        assert torch.equal(v, resumed.state_dict()[k]), k


def test_ssl_update_runs_after_every_step_on_the_new_weights():
    m, d = model(), data()
    p0, t0, w0 = m.ssl.p_star.clone(), m.ssl.theta.clone(), m.decoder.W.detach().clone()
    logs, _ = one_step(m, d)
    assert not torch.equal(m.ssl.p_star, p0) and not torch.equal(m.ssl.theta, t0)
    expected = m.ssl.inclusion_probability(m.decoder.W.detach(), t0)  # p* from the pre-step θ, post-step W
    torch.testing.assert_close(m.ssl.p_star, expected)
    # the step's loss held Σ λ*|w| / N at the pre-step state (p* = 0.5: λ* = (λ0 + λ1) / 2), N = 64
    assert logs["ssl_penalty"] == pytest.approx(5.5 * w0.abs().sum().item() / 64, rel=1e-5)


def test_penalty_needs_bound_data():
    m = model()
    with pytest.raises(RuntimeError, match="bind_data"):
        m.terms(torch.zeros(2, G))


def test_released_likelihood_needs_bound_data_outside_training():
    from priorlab.device import deferred_value_checks

    m = model(likelihood="gaussian_ig_released", loss_scaling="released_code")
    with pytest.raises(ValueError, match="needs ξ"):
        m.likelihood.loss_terms(torch.zeros(2, G), m.scaling)
    with deferred_value_checks():  # deferred in training: the NaN ξ makes a NaN loss, and that stops it
        assert torch.isnan(m.likelihood.loss_terms(torch.zeros(2, G), m.scaling)["sigma_prior"]).all()


def step_residuals(m: SparseVAE, d: Dataset) -> tuple[torch.Tensor, torch.Tensor]:
    """One training step; the batch and its residuals at the step's codes with the new weights."""
    captured = {}
    original = m.after_step

    def spy(batch, terms, step):
        captured["z"] = terms.z.detach().clone()
        original(batch, terms, step)

    m.after_step = spy
    _, x = one_step(m, d)
    return x, x.double() - m.decode_mean(captured["z"]).double()


def test_sigma_map_update_is_the_closed_form_on_the_batch():
    m, d = model(), data()
    x, resid = step_residuals(m, d)
    lik = m.likelihood
    n, b = 64.0, x.shape[0]
    expected = (lik.nu * float(lik.xi) + (n / b) * resid.pow(2).sum(0)) / (lik.nu + n + 2)
    torch.testing.assert_close(lik.sigma2.double(), expected, rtol=1e-5, atol=1e-7)


def test_released_code_scaling_weighs_the_terms_as_the_authors_code():
    """loss_scaling: released_code = −(1/G) log p(x|z) + (β/K) KL + penalty / B per observation
    (models.py:125, 189, 263 of the released code); paper = −log p(x|z) + β KL + penalty / N."""
    d = data()
    x = d.prepare(d.x("train"))[:16]
    for scaling in ("paper", "released_code"):
        m = model(loss_scaling=scaling, beta=2.0)
        m.bind_data(d)
        torch.manual_seed(3)
        loss, _ = m.loss(x)
        torch.manual_seed(3)
        t = m.terms(x)
        pen = m.ssl.penalty(m.decoder.W)
        if scaling == "paper":
            expected = (-t.log_lik + 2.0 * t.kl).mean() + pen / 64
        else:
            expected = (-t.log_lik / G + 2.0 * t.kl / K).mean() + pen / 16
        torch.testing.assert_close(loss, expected)


def test_released_code_sigma_is_the_minimiser_of_the_codes_sigma_objective():
    m, d = model(loss_scaling="released_code"), data()
    x, resid = step_residuals(m, d)
    lik = m.likelihood
    b, nu, xi = x.shape[0], lik.nu, float(lik.xi)

    def code_objective(log_sigma):  # reconstruction_loss + sigma_loss of the released code, per batch
        s2 = torch.exp(2 * log_sigma)
        recon = 0.5 * (resid.pow(2) / s2).mean()
        return recon + ((b + nu + 2) * log_sigma.sum() + 0.5 * nu * xi * (1 / s2).sum()) / b

    log_sigma = (0.5 * lik.sigma2.double().log()).requires_grad_(True)
    grad, = torch.autograd.grad(code_objective(log_sigma), log_sigma)
    assert grad.abs().max() < 1e-6  # σ_j² (stored in float32) is its stationary point ...
    for delta in (-0.05, 0.05):  # ... and a minimum
        assert code_objective(log_sigma.detach() + delta) > code_objective(log_sigma.detach())


def test_released_likelihood_is_the_codes_sigma_objective_and_learns_log_sigma():
    """``gaussian_ig_released``: the σ-dependent part of the model's loss equals the released code's
    reconstruction_loss + sigma_loss (models.py:185-211) up to a constant; σ_j starts at the std
    (ddof 0), ξ at the squared quantile of the stds; the gradient vanishes at the closed form the
    ``gaussian_ig`` variant jumps to, and one Adam step moves log σ_j by about lr."""
    from scipy.stats import chi2

    d = data()
    m = model(likelihood="gaussian_ig_released", loss_scaling="released_code")
    m.bind_data(d)
    lik, x_all = m.likelihood, d.x("train").double()
    torch.testing.assert_close(lik.log_sigma.double(), x_all.std(0, unbiased=False).log().float().double())
    xi_code = np.quantile(x_all.std(0, unbiased=False).numpy(), 0.05) ** 2 * chi2.ppf(0.1, 3) / 3
    assert float(lik.xi) == pytest.approx(xi_code, rel=1e-6)
    x = d.prepare(d.x("train"))[:16]
    b, nu = x.shape[0], lik.nu
    with torch.no_grad():
        pred = m.decode(m.posterior(x).mean)

    def ours(log_sigma):  # the model's loss with only σ varying: −(1/G) log N(x; pred, σ²) + loss_terms
        with torch.no_grad():
            lik.log_sigma.copy_(log_sigma)
        ll = lik.log_prob(x, pred)
        return float((-ll / G + lik.loss_terms(x, m.scaling)["sigma_prior"]).mean().detach())

    def code(log_sigma):
        s = log_sigma.double().exp()
        recon = 0.5 * ((pred.double() / s - x.double() / s) ** 2).mean()
        return float(recon + ((b + nu + 2) * log_sigma.double().sum() + 0.5 * nu * float(lik.xi)
                              * (1 / s**2).sum()) / b)

    start = lik.log_sigma.detach().clone()
    shifted = start + torch.linspace(-0.4, 0.3, G)
    assert ours(shifted) - ours(start) == pytest.approx(code(shifted) - code(start), rel=1e-5, abs=1e-6)
    closed = 0.5 * ((nu * lik.xi.double() + (x.double() - pred.double()).pow(2).sum(0) / G) / (b + nu + 2)).log()
    with torch.no_grad():
        lik.log_sigma.copy_(closed.float())
    ll = lik.log_prob(x, pred)
    loss = (-ll / G + lik.loss_terms(x, m.scaling)["sigma_prior"]).mean()
    grad, = torch.autograd.grad(loss, lik.log_sigma)
    assert grad.abs().max() < 1e-5  # the closed form of the gaussian_ig variant is its stationary point
    m2 = model(likelihood="gaussian_ig_released", loss_scaling="released_code")
    (logs, _), before = one_step(m2, d), None
    assert "sigma_prior" in logs and not m2.likelihood.updates_after_step
    moved = (m2.likelihood.log_sigma.detach() - x_all.std(0, unbiased=False).log()).abs()
    assert ((moved > 0.5e-2) & (moved < 1.5e-2)).all()  # Adam's first step: about lr in every σ_j


def test_released_variant_draws_theta_uniformly_from_the_seeded_generator():
    a, b = model(seed=3, loss_scaling="released_code"), model(seed=3, loss_scaling="released_code")
    theta = a.ssl.theta
    assert torch.equal(theta, b.ssl.theta) and theta.unique().numel() == K and ((theta > 0) & (theta < 1)).all()
    assert not torch.equal(theta, model(seed=4, loss_scaling="released_code").ssl.theta)
    assert (model(loss_scaling="paper").ssl.theta == 0.5).all()
    from priorlab.models.sparse_vae import SpikeSlabLasso
    with pytest.raises(ValueError, match="theta_init"):
        SpikeSlabLasso(G, K, theta_init="normal")


def test_the_study_gives_a_released_code_model_the_released_sigma():
    from types import SimpleNamespace

    study = SimpleNamespace(latent_dim=K, hidden=[8, 8])
    assert F.setup_for(study).likelihood == "gaussian_ig"
    assert F.setup_for(study, scaling="released_code").likelihood == "gaussian_ig_released"
    assert F.setup_for(study, "multinomial", "released_code").likelihood == "multinomial"


def test_vae_baseline_gets_the_same_sigma_treatment():
    """A vae-kind model on the gaussian_ig likelihood binds ξ and updates σ_j² after every step by the
    rule of its loss scaling, exactly as the sparse VAE does."""
    d = data()
    setup = SetupParams(dataset="t", latent_dim=K, hidden=[8, 8], likelihood="gaussian_ig", obs_std=1.0)
    for scaling in ("paper", "released_code"):
        torch.manual_seed(0)
        vae = build_model(setup, VAEParams(kind="vae", warm_start="scratch", loss_scaling=scaling), (G,))
        with pytest.raises(RuntimeError, match="bind_data"):
            vae.after_step(Batch(torch.zeros(2, G)), vae.terms(torch.zeros(2, G)), 0)
        vae.bind_data(d)
        assert torch.isfinite(vae.likelihood.xi)
        torch.testing.assert_close(vae.likelihood.sigma2, d.x("train").var(0))
        opt = torch.optim.Adam(vae.param_groups(1e-2)[0]["params"], lr=1e-2)
        x = d.prepare(d.x("train"))[:16]
        torch.manual_seed(1)
        terms = vae.terms(x)
        before = vae.likelihood.sigma2.clone()
        torch.manual_seed(1)
        vae.train_step(Batch(x), 0, StepContext(opt))
        ss = (x.double() - vae.decode(terms.z.detach()).double()).pow(2).sum(0)
        nu, xi = vae.likelihood.nu, vae.likelihood.xi.double()
        expected = (nu * xi + ss * 64 / 16) / (nu + 64 + 2) if scaling == "paper" else (nu * xi + ss / G) / (16 + nu + 2)
        assert not torch.equal(vae.likelihood.sigma2, before)
        torch.testing.assert_close(vae.likelihood.sigma2.double(), expected, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("kind", ["vae", "vsc"])
def test_every_kind_of_a_comparison_can_see_row_normalised_input(kind):
    from priorlab.config import VSCParams

    setup = SetupParams(dataset="t", latent_dim=K, hidden=[8, 8], likelihood="multinomial")
    spec = VAEParams(kind="vae", warm_start="scratch", encoder_input="row_normalised") if kind == "vae" else \
        VSCParams(kind="vsc", warm_start="scratch", encoder_input="row_normalised")
    torch.manual_seed(0)
    m = build_model(setup, spec, (G,))
    x = data(counts=True).prepare(data(counts=True).x("train"))[:4]
    torch.testing.assert_close(m.represent(x), m.represent(5 * x))
    m.bind_data(data(counts=True))
    torch.manual_seed(2)
    t1 = m.terms(x)
    torch.manual_seed(2)
    t2 = m.terms(5 * x)
    torch.testing.assert_close(t1.kl, t2.kl)  # the recognition side sees shares only


def test_study_requires_one_encoder_input_per_comparison():
    from priorlab.config import Params, SparseVaeRealParams, SparseVaeStudyParams

    models = {"s": SparseVAEParams(kind="sparse_vae", warm_start="scratch", encoder_input="row_normalised"),
              "v": VAEParams(kind="vae", warm_start="scratch")}
    study = SparseVaeStudyParams(movielens=SparseVaeRealParams(models=["s", "v"]))
    opt = OptimParams(steps=1, batch_size=1, lr=1e-3)
    params = Params(profile="t", device="cpu", datasets={}, setups={}, models=models, pretrain=opt,
                    train=opt, runs={}, sparse_vae_study=study)
    with pytest.raises(ParamsError, match="same encoder input"):
        study.check("sparse_vae_study", params)
    fixed = dataclasses.replace(models["v"], encoder_input="row_normalised")
    study.check("sparse_vae_study", dataclasses.replace(params, models={**models, "v": fixed}))


def test_unneeded_columns_shrink_under_training(tmp_path):
    torch.manual_seed(0)
    z = torch.randn(256, 1)
    x = torch.cat([z * (j + 1) for j in range(G)], 1) + 0.1 * torch.randn(256, G)
    d = Dataset(name="p", arrays={"x_train": x.numpy(), "x_test": x[:8].numpy()}, manifest={"observation_kind": "vector"})
    m = model()
    m.bind_data(d)
    w0 = m.decoder.W.detach().abs().mean().item()
    fit(m, m.training_set(d), OptimParams(steps=300, batch_size=64, lr=1e-2, checkpoint_every=10**6),
        checkpoint=tmp_path / "x.pt", live_dir=None, fingerprint="x")
    col = m.decoder.W.detach().abs().mean(0)
    assert col.min().item() < 0.1 * w0  # at least one column (of K = 4, one factor needed) has shrunk
    assert int(m.active_columns().sum()) < K


def test_row_normalised_encoder_input_and_general_prior():
    d = data(counts=True)
    m = model(likelihood="multinomial", encoder_input="row_normalised")
    x = d.prepare(d.x("train"))[:4]
    q1, q2 = m.posterior(x), m.posterior(3 * x)  # the encoder sees shares: scaling counts changes nothing
    torch.testing.assert_close(q1.mean, q2.mean)
    cov = [[1.0, 0.5, 0, 0], [0.5, 1.0, 0, 0], [0, 0, 1.0, 0], [0, 0, 0, 1.0]]
    g = model(prior_cov=cov)
    g.bind_data(data())
    xg = data().prepare(data().x("train"))[:4]
    t = g.terms(xg)
    q = g.posterior(xg).base_dist
    torch.testing.assert_close(t.kl, gaussian_kl_general(q.loc, 2 * q.scale.log(), torch.tensor(cov)))


@pytest.mark.parametrize("kw, match", [
    ({"lambda0": 1.0, "lambda1": 1.0}, "lambda0 must exceed"),
    ({"lambda1": 0.0}, "lambda1"),
    ({"encoder_input": "log"}, "encoder_input"),
    ({"loss_scaling": "code"}, "loss_scaling"),
    ({"prior_cov": [[1.0, 0.0]]}, "square"),
    ({"prior_cov": [[1.0, 2.0], [2.0, 1.0]]}, "positive definite"),
])
def test_config_errors(kw, match):
    with pytest.raises(ParamsError, match=match):
        SparseVAEParams(kind="sparse_vae", **kw).check("models.s")


def test_prior_cov_must_match_latent_dim():
    with pytest.raises(ValueError, match="latent_dim"):
        model(prior_cov=[[1.0, 0.0], [0.0, 1.0]])


def _stats(mse, dci, f1=None, active=2.0, collapse=0.0, n=10):
    out = {"n": n, "mse": mse, "mse_mean": mse, "dci_d": dci, "dci_d_mean": dci, "active_columns": active,
           "active_columns_mean": active, "collapse_rate": collapse}
    if f1 is not None:
        out.update(f1=f1, f1_mean=f1)
    return out


def test_study_metrics_and_claims():
    z = np.random.RandomState(0).standard_normal((50, 2))
    codes = np.c_[np.zeros(50), -z[:, 1], 2 * z[:, 0]]
    assert list(F.match_columns(codes, z)) == [2, 1]
    s = F.support_scores(np.array([[1, 0], [1, 1]], bool), np.array([[1, 0], [0, 1]], bool))
    assert s["precision"] == pytest.approx(2 / 3) and s["recall"] == 1.0 and s["f1"] == pytest.approx(0.8)
    f = F.bin_factors(z, z, 4)
    assert f.min() == 0 and f.max() == 3 and np.all(np.bincount(f[:, 0]) >= 12)
    def rows(rho, method, mse, dci, f1=0.5, active=2.0, n=10):
        rs = np.random.RandomState(int(rho * 10) + len(method))
        return [{"rho": rho, "seed": i, "method": method, "mse": mse + 0.01 * rs.randn(), "dci_d": dci + 0.01 * rs.randn(),
                 "f1": f1 + 0.01 * rs.randn(), "active_columns": active, "collapsed": False} for i in range(n)]

    rhos = (0.0, 0.2, 0.4, 0.6, 0.8)
    good = [r for rho in rhos for r in rows(rho, "s", 0.1, 0.9, f1=0.9) + rows(rho, "v", 0.5, 0.3)]
    v = {c.key: c.verdict for c in C.decide_claims(good, "s", ["v"])}
    assert set(v.values()) == {"reproduced"}, v
    # the sparse VAE loses on MSE at two ρ: "≥ 4 of 5" can no longer hold
    lose = [r for rho in rhos for r in rows(rho, "s", 0.9 if rho < 0.3 else 0.1, 0.9, f1=0.9, active=3.0)
            + rows(rho, "v", 0.5, 0.3)]
    v = {c.key: c.verdict for c in C.decide_claims(lose, "s", ["v"])}
    assert v["003.mse"] == "not reproduced" and v["003.dci"] == "reproduced" and v["003.active_columns"] == "not reproduced"
    # an outlier data set moves a mean, not the median the claims use
    outlier = [dict(r, mse=50.0) if (r["method"] == "s" and r["seed"] == 0) else r for r in good]
    assert {c.key: c.verdict for c in C.decide_claims(outlier, "s", ["v"])}["003.mse"] == "reproduced"


def test_collapse_and_medians():
    assert F.collapsed({"mse": 3.5, "active_columns": 4}) and F.collapsed({"mse": 0.3, "active_columns": 1})
    assert not F.collapsed({"mse": 0.3, "active_columns": 2}) and not F.collapsed({"mse": 9.0})  # linear: never
    rows = [{"rho": 0.0, "seed": i, "method": "s", "mse": m, "dci_d": 0.5, "active_columns": 2,
             "collapsed": m > 3} for i, m in enumerate([0.2, 0.3, 0.4, 9.0])]
    s = A.summarise(rows)["s"][0.0]
    assert s["n"] == 4 and s["mse"] == pytest.approx(0.35) and s["mse_mean"] == pytest.approx(2.475)
    assert s["collapse_rate"] == 0.25 and s["mse_q25"] <= s["mse"] <= s["mse_q75"]


def test_dci_regression_on_continuous_factors():
    from priorlab.metrics import dci_regression

    rs = np.random.RandomState(0)
    z = rs.standard_normal((400, 2))
    ideal = dci_regression(np.c_[z, rs.standard_normal((400, 3))], z, np.c_[z, rs.standard_normal((400, 3))], z)
    rot = np.c_[z @ np.array([[1.0, 1.0], [1.0, -1.0]]), rs.standard_normal((400, 3))]
    mixed = dci_regression(rot, z, rot, z)
    assert ideal["disentanglement"] > 0.9 and ideal["completeness"] > 0.9 and ideal["mse_test"] < 0.1
    assert mixed["disentanglement"] < 0.5 * ideal["disentanglement"]
    again = dci_regression(rot, z, rot, z)
    assert again["disentanglement"] == mixed["disentanglement"]  # seeded
    with pytest.raises(ValueError, match="2 code dimensions"):
        dci_regression(z[:, :1], z, z[:, :1], z)


@pytest.mark.slow
def test_study_runs_end_to_end_on_tiny_settings(tmp_path, monkeypatch):
    from priorlab.config import Params, SparseVaeStudyParams

    monkeypatch.setattr(E, "OUT", tmp_path / "out")
    monkeypatch.setattr(E.paths, "CHECKPOINTS", tmp_path / "ckpt")
    models = {"s": SparseVAEParams(kind="sparse_vae", warm_start="scratch"),
              "v": VAEParams(kind="vae", warm_start="scratch"),
              "sc": SparseVAEParams(kind="sparse_vae", warm_start="scratch", loss_scaling="released_code"),
              "vc": VAEParams(kind="vae", warm_start="scratch", loss_scaling="released_code")}
    study = SparseVaeStudyParams(models=["s", "v"], variant_models=["sc", "vc"], rhos=[0.0], datasets_per_rho=2,
                                 variant_datasets_per_rho=1, n=120, latent_dim=3, hidden=[8, 8],
                                 train=OptimParams(steps=20, batch_size=30, lr=1e-2, checkpoint_every=10**6))
    params = Params(profile="tiny", device="cpu", datasets={}, setups={}, models=models, pretrain=study.train,
                    train=study.train, runs={}, sparse_vae_study=study)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UserError, match="sparse_vae_fit@0.0 has not run"):
        E.run_sparse_vae_experiments(params)
    with pytest.raises(ParamsError, match="no cell at rho '0.5'"):
        F.run_sparse_vae_fit(params, "0.5")
    with pytest.raises(ParamsError, match="run the param_slices stage first"):  # its models' file (issue 44)
        F.run_sparse_vae_fit(params, "0.0")
    run_param_slices(params)
    F.run_sparse_vae_fit(params, "0.0")  # the cell (sparse_vae_fit@0.0) and the real-data stage (off here)
    R.run_sparse_vae_real(params)
    cell = tmp_path / "models" / "sparse_vae_experiments" / "rho-0.0"
    assert sorted(p.name for p in cell.iterdir()) == ["0-s.pt", "0-sc.pt", "0-v.pt", "0-vc.pt", "1-s.pt", "1-v.pt",
                                                      "rows.json"]
    mdir = tmp_path / "metrics" / "sparse_vae_experiments"
    assert sorted(p.name for p in (mdir / "rho-0.0").iterdir()) == [f"{m}.json" for m in ("FactorAnalysis", "PCA", "s",
                                                                                          "sc", "v", "vc")]
    # the real-data studies are off: one file says so (an empty folder would not survive git, issue 44)
    assert sorted(p.name for p in (mdir / "real").iterdir()) == ["scored.json"]
    assert json.loads((mdir / "real" / "scored.json").read_text()) == {"movielens_methods": 0.0,
                                                                       "single_cell_methods": 0.0}
    out = E.run_sparse_vae_experiments(params)
    assert {r["method"] for r in out["rows"]} == {"s", "v", "sc", "vc", "PCA", "FactorAnalysis"}
    assert sum(r["method"] == "sc" for r in out["rows"]) == 1 and sum(r["method"] == "s" for r in out["rows"]) == 2
    assert len(out["claims"]) == 8 and all(c["verdict"] in VERDICTS for c in out["claims"])
    assert {c["key"].split("/")[1] for c in out["claims"]} == {"as written", "as released"}  # both objectives decide
    assert "released_code_claims" not in out and "criterion_changes" not in out  # both objectives in claims; changes: criteria.HISTORY
    assert (tmp_path / "out" / "summary.json").is_file() and (tmp_path / "out" / "w_heatmap.png").is_file()
    fidelity = (tmp_path / "out" / "fidelity.md").read_text()
    assert "released code" in fidelity and "K → 8 → 8" in fidelity and "sc (sparse_vae, released_code)" in fidelity
    F.run_sparse_vae_fit(params, "0.0")  # same params and seeds, again: same numbers
    again = E.run_sparse_vae_experiments(params)
    assert [r["mse"] for r in again["rows"]] == [r["mse"] for r in out["rows"]]


@pytest.mark.parametrize("kind", ["movielens", "pbmc", "pbmc_quantile"])
def test_real_data_kinds_build_through_the_store(kind):
    from priorlab.config import DATASET_PARAMS
    from priorlab.data.store import build_arrays

    pytest.importorskip("h5py")
    params = DATASET_PARAMS[kind](kind=kind, n_train=300, n_test=100, seed=1)
    try:
        arrays = build_arrays(params)
    except FileNotFoundError:
        pytest.skip(f"{kind} file not installed (scripts/install_datasets.sh)")
    assert arrays["x_train"].shape[0] == 300 and arrays["x_test"].shape[0] == 100
    assert np.array_equal(build_arrays(params)["x_train"], arrays["x_train"])  # seeded
    if kind == "movielens":
        assert arrays["x_train"].shape[1] == 300 and set(np.unique(arrays["x_train"])) <= {0, 1}
    else:
        assert arrays["labels_train"].max() < 10 and arrays["x_train"].shape[1] == 765
    with pytest.raises(DataError, match="n_train"):
        build_arrays(DATASET_PARAMS[kind](kind=kind, n_train=10_000, n_test=1))


def test_synthetic_beta_vae_is_chosen_on_validation_rows_by_mse(tmp_path, monkeypatch):
    """Fig. 3's β-VAE at its best member of table 6's grid, chosen without the test half: each β is fitted
    on the training half less the validation rows, the lowest validation MSE wins (ties: the smaller β),
    and the row is then fitted at that β on the whole training half and says which and why."""
    from priorlab.config import Params, SparseVaeStudyParams
    from priorlab.data.sparse_synthetic import make_sparse_synthetic

    monkeypatch.setattr(F.paths, "CHECKPOINTS", tmp_path / "ckpt")
    models = {"s": SparseVAEParams(kind="sparse_vae", warm_start="scratch"), "v": VAEParams(kind="vae", warm_start="scratch")}
    study = SparseVaeStudyParams(models=["s", "v"], rhos=[0.0], datasets_per_rho=1, variant_datasets_per_rho=0, n=120,
                                 latent_dim=3, hidden=[8, 8], beta_grid={"v": [2.0, 16.0, 4.0]}, validation_fraction=0.25,
                                 train=OptimParams(steps=20, batch_size=30, lr=1e-2, checkpoint_every=10**6))
    params = Params(profile="tiny", device="cpu", datasets={}, setups={}, models=models, pretrain=study.train,
                    train=study.train, runs={}, sparse_vae_study=study)
    d = {**make_sparse_synthetic(study.n, 0.0, study.noise_std, random_state=0), "rho": 0.0}
    spec, sel = F.select_beta("v", models["v"], study, d, 0)
    assert sel["validation_rows"] == 15 and set(sel["validation_mse"]) == {"2", "16", "4"}  # 25 % of 60 rows
    best = min(sel["validation_mse"], key=sel["validation_mse"].get)
    assert sel["beta"] == spec.beta == float(best) and all(v > 0 for v in sel["validation_mse"].values())
    assert F.select_beta("v", models["v"], study, d, 0)[1] == sel  # seeded
    rows = F.rho_rows(params, 0.0)[0]
    v_row = next(r for r in rows if r["method"] == "v")
    assert v_row["selection"] == sel and "selection" not in next(r for r in rows if r["method"] == "s")
    assert "v: β chosen per data set" in E.selection_lines(rows, 0.25)[0] and E.selection_lines(rows[:0], 0.25) == []


def test_choose_beta_breaks_ties_towards_the_smaller_beta():
    x = np.arange(40, dtype=np.float32).reshape(20, 2)
    best, scores, n_val = F.choose_beta([8.0, 2.0, 4.0], x, 0.2, 0, lambda b, rest, val: 1.0 if b > 2 else 1.0)
    assert best == 2.0 and n_val == 4 and list(scores) == ["8", "2", "4"]
    seen = []
    F.choose_beta([1.0], x, 0.2, 3, lambda b, rest, val: seen.append((len(rest), len(val))) or 0.0)
    assert seen == [(16, 4)]


def test_diagnosis_sets_the_released_codes_run_beside_both_arms():
    """The generated diagnosis: per ρ the collapse rate, active columns, F1 and MSE of both arms and of
    the released code's recorded run (default initialisation only), Fisher's test on the collapses, and a
    conclusion that follows the numbers (``open`` when the released code does not settle it)."""
    from priorlab.studies.sparse_vae_experiments import diagnosis as D

    def ours(method, rho, seed, mse, active, f1=None):
        return {"method": method, "rho": rho, "seed": seed, "mse": mse, "active_columns": active,
                "collapsed": mse > 3 or active < 2, **({"f1": f1} if f1 is not None else {})}

    rows = [r for rho in (0.0, 0.8) for s in range(4) for r in (
        ours("s", rho, s, 0.4, 3, 0.6), ours("v", rho, s, 0.5, 4), ours("sc", rho, s, 5.0 if s < 3 else 0.4, 2, 0.53),
        ours("vc", rho, s, 0.3, 3))]
    runs = [{"rho": rho, "seed": s, "model": m, "epochs": 100, "torch_seed": s + off, "mse": mse, "mse_sampled_z": mse,
             "active": act, "collapsed": mse > 3, **({"f1": 0.53} if m == "sparse_vae" else {}), "wall_s": 1.0}
            for rho in (0.0, 0.8) for s in range(4) for off in (0, 100)
            for m, mse, act in (("sparse_vae", 0.45, 2), ("vae", 0.35, 4)) if m == "sparse_vae" or off == 0]
    record = {"code": {"repository": "a/b", "commit": "a30732af"}, "date": "d", "settings": "S", "scoring": "T",
              "runs": runs}
    claims = [{"key": "003.support_f1/as written", "verdict": "not reproduced"},
              {"key": "003.mse/as released", "verdict": "not reproduced"}]
    text = D.diagnosis_markdown(rows, record, claims, ("s", "v"), ("sc", "vc"))
    assert "| released code: sparse vae, 100 epochs | 0.8 | 4 | 0% | 2 | 0.530 | 0.450 |" in text
    assert "3/4 vs 0/4 (Fisher's exact test, two-sided p = 0.14)" in text  # ours vs the code's at ρ = 0
    assert "### 003.support_f1" in text and "### 003.mse" in text and "### 003.active_columns" not in text
    assert "**not reproduced as written**" in text.split("### 003.support_f1")[1].split("###")[0]  # code F1 < 0.8
    assert "**not reproduced as written**" in text.split("### 003.mse")[1]  # the code's sparse VAE: 0.45 > 0.35
    better = dict(record, runs=[dict(r, mse=0.30) if r["model"] == "sparse_vae" else r for r in runs])
    assert "**open**" in D.diagnosis_markdown(rows, better, claims, ("s", "v"), ("sc", "vc")).split("### 003.mse")[1]
    assert D.diagnosed("003.mse/as released") and not D.diagnosed("003.dci/as written")
