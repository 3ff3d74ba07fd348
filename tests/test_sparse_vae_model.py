"""The sparse VAE model kind (paper 003): fit + exact resume, SSL and σ-MAP wiring after each step,
the B.2 prior option, config errors, and the synthetic study's metric / claim logic."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from priorlab.config import OptimParams, ParamsError, SetupParams, SparseVAEParams
from priorlab.data.store import Dataset
from priorlab.errors import DataError
from priorlab.experiments import sparse_vae_experiments as E
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
    setup = SetupParams(dataset="t", latent_dim=K, hidden=[8], likelihood=likelihood, obs_std=1.0)
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


def test_sigma_map_update_is_the_closed_form_on_the_batch():
    m, d = model(), data()
    captured = {}
    original = m.after_step

    def spy(batch, terms, step):
        captured["z"] = terms.z.detach().clone()
        original(batch, terms, step)

    m.after_step = spy
    _, x = one_step(m, d)
    lik = m.likelihood
    resid = x.double() - m.decode_mean(captured["z"]).double()
    n, b = 64.0, x.shape[0]
    expected = (lik.nu * float(lik.xi) + (n / b) * resid.pow(2).sum(0)) / (lik.nu + n + 2)
    torch.testing.assert_close(lik.sigma2.double(), expected, rtol=1e-5, atol=1e-7)


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
    ({"prior_cov": [[1.0, 0.0]]}, "square"),
    ({"prior_cov": [[1.0, 2.0], [2.0, 1.0]]}, "positive definite"),
])
def test_config_errors(kw, match):
    with pytest.raises(ParamsError, match=match):
        SparseVAEParams(kind="sparse_vae", **kw).check("models.s")


def test_prior_cov_must_match_latent_dim():
    with pytest.raises(ValueError, match="latent_dim"):
        model(prior_cov=[[1.0, 0.0], [0.0, 1.0]])


def test_study_metrics_and_claims():
    z = np.random.RandomState(0).standard_normal((50, 2))
    codes = np.c_[np.zeros(50), -z[:, 1], 2 * z[:, 0]]
    assert list(E.match_columns(codes, z)) == [2, 1]
    s = E.support_scores(np.array([[1, 0], [1, 1]], bool), np.array([[1, 0], [0, 1]], bool))
    assert s["precision"] == pytest.approx(2 / 3) and s["recall"] == 1.0 and s["f1"] == pytest.approx(0.8)
    f = E.bin_factors(z, z, 4)
    assert f.min() == 0 and f.max() == 3 and np.all(np.bincount(f[:, 0]) >= 12)
    good = {"mse": 0.1, "dci_d": 0.9, "f1": 0.9, "active_columns": 2.0}
    bad = {"mse": 0.5, "dci_d": 0.3}
    summary = {"s": {0.0: good, 0.8: good}, "v": {0.0: bad, 0.8: {"mse": 0.05, "dci_d": 0.3}}}
    claims = E.decide_claims(summary, "s", ["v"], 5)
    assert [c.reproduced for c in claims] == [True, True, True]  # 1 of 2 ρ may be lost
    summary["s"][0.0] = {**good, "mse": 0.6, "active_columns": 3.0}
    claims = E.decide_claims(summary, "s", ["v"], 5)
    assert [c.reproduced for c in claims] == [False, True, False]


@pytest.mark.slow
def test_study_runs_end_to_end_on_tiny_settings(tmp_path, monkeypatch):
    from priorlab.config import ModelParams, Params, SparseVaeStudyParams

    monkeypatch.setattr(E, "OUT", tmp_path / "out")
    monkeypatch.setattr(E.paths, "CHECKPOINTS", tmp_path / "ckpt")
    models = {"s": SparseVAEParams(kind="sparse_vae", warm_start="scratch"),
              "v": ModelParams(kind="vae", warm_start="scratch")}
    study = SparseVaeStudyParams(models=["s", "v"], rhos=[0.0], datasets_per_rho=1, n=120, latent_dim=3, hidden=[8],
                                 dci_bins=3, dci_backend="hist",
                                 train=OptimParams(steps=20, batch_size=30, lr=1e-2, checkpoint_every=10**6))
    params = Params(profile="tiny", device="cpu", datasets={}, setups={}, models=models, pretrain=study.train,
                    train=study.train, runs={}, sparse_vae_study=study)
    out = E.run_sparse_vae_experiments(params)
    assert {r["method"] for r in out["rows"]} == {"s", "v", "PCA", "FactorAnalysis"}
    assert len(out["claims"]) == 3 and all(c["reproduced"] in (True, False) for c in out["claims"])
    assert (tmp_path / "out" / "summary.json").is_file() and (tmp_path / "out" / "w_heatmap.png").is_file()
    again = E.run_sparse_vae_experiments(params)  # same params and seeds: same numbers
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
