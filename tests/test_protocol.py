"""The declared model protocol: optimiser groups declared by models and priors, a prior chosen by
config under the `vae` kind, β ≥ 0, and a model whose training step is an EM iteration (PPCA)."""

from __future__ import annotations

import pytest
import torch

from priorlab.config import LpNestedPriorParams, OptimParams, ParamsError, PPCAParams, SetupParams, VAEParams
from priorlab.models import build_model
from priorlab.models.ppca import PPCA
from priorlab.models.protocol import Batch, ElboModel, Generative, Model, StepContext
from priorlab.train import fit
from tests.helpers import as_training_set, gen, tiny_data

SETUP = SetupParams(dataset="x", latent_dim=4, hidden=[16])
LAYOUT = {"p0": 2.1, "subspaces": [[2.2, 2], [1.8, 2]]}


def isa_vae(lr: float) -> Model:
    torch.manual_seed(0)
    prior = LpNestedPriorParams(p0=LAYOUT["p0"], subspaces=LAYOUT["subspaces"], lr=lr)
    return build_model(SETUP, VAEParams(kind="vae", beta=1.0, prior=prior), (1, 8, 8))


def test_a_configured_prior_trains_in_its_own_group_at_its_own_lr(tmp_path):
    """One Adam step moves each parameter by about its group's lr (|m / sqrt(v)| = 1 at step 1): the
    exponents by the prior's 2e-4, the nets by the phase's 1e-2."""
    model = isa_vae(lr=2e-4)
    groups = model.param_groups(1e-2)
    assert [(g["name"], g["lr"]) for g in groups] == [("nets", 1e-2), ("prior", 2e-4)]
    prior_params = set(map(id, model.prior.parameters()))
    assert {id(p) for p in groups[1]["params"]} == prior_params and len(prior_params) == 2
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    fit(model, as_training_set(tiny_data(64)), OptimParams(steps=1, batch_size=64, lr=1e-2),
        checkpoint=tmp_path / "c.pt", live_dir=None, fingerprint="f")
    for name, p in model.named_parameters():
        step = (p.detach() - before[name]).abs()
        moved = step[step > 0]
        assert len(moved), name
        expected = 2e-4 if name.startswith("prior.") else 1e-2
        assert torch.allclose(moved, torch.full_like(moved, expected), rtol=0.02), (name, moved.max())


def test_the_default_prior_is_standard_normal_and_beta_zero_is_allowed():
    model = build_model(SETUP, VAEParams(kind="vae", beta=0.0), (1, 8, 8))
    assert isinstance(model, (Model, ElboModel, Generative)) and model.beta == 0.0
    assert [g["name"] for g in model.param_groups(1e-3)] == ["nets"]
    with pytest.raises(ParamsError, match="beta must be >= 0"):
        VAEParams(kind="vae", beta=-1.0).check("m")
    with pytest.raises(ParamsError, match="lp_nested: the subspaces hold 4 latents, the setup has 5"):
        build_model(SetupParams(dataset="x", latent_dim=5, hidden=[16]),
                    VAEParams(kind="vae", prior=LpNestedPriorParams(subspaces=LAYOUT["subspaces"])), (1, 8, 8))


def test_isa_vae_kl_is_the_monte_carlo_estimate_at_the_sampled_z():
    model = isa_vae(lr=0.0)
    x = tiny_data(8)
    torch.manual_seed(1)
    terms = model.terms(x)
    expected = terms.q.log_prob(terms.z) - model.prior().log_prob(terms.z)
    torch.testing.assert_close(terms.kl, expected)


def test_kinds_with_their_own_prior_reject_a_prior_key():
    from priorlab.config import VSCParams

    with pytest.raises(ParamsError, match="has its own prior"):
        VSCParams(kind="vsc", prior=LpNestedPriorParams()).check("models.v")


def low_rank_data(n=3000, d=7, k=2, noise=0.1, seed=0):
    g = gen(seed)
    w = torch.randn(d, k, generator=g)
    return torch.randn(n, k, generator=g) @ w.T + noise * torch.randn(n, d, generator=g) + 3.0


def test_ppca_online_em_finds_the_principal_subspace_and_the_noise_level():
    y = low_rank_data()
    torch.manual_seed(0)
    model = build_model(SetupParams(dataset="x", latent_dim=2), PPCAParams(kind="ppca"), (7,))
    assert isinstance(model, PPCA) and model.param_groups(1e-3) == []
    g = gen(1)
    for t in range(1, 301):
        model.train_step(Batch(y[torch.randint(len(y), (128,), generator=g)]), t, StepContext(None))
    evals, evecs = torch.linalg.eigh(torch.cov(y.T).double())
    top = evecs[:, -2:]
    w = model.W
    assert torch.linalg.norm(top @ top.T @ w) / torch.linalg.norm(w) > 0.9999
    assert model.sigma2.item() == pytest.approx(evals[:-2].mean().item(), rel=0.15)  # ML σ²: mean discarded eigenvalue
    assert torch.allclose(model.mu, y.double().mean(0), atol=0.05)
    # exact marginal likelihood of the fitted model beats a broader one
    ll = model.log_likelihood(y).mean()
    model.sigma2.mul_(4)
    assert model.log_likelihood(y).mean() < ll


def test_ppca_is_fitted_through_the_trainer_and_resumes_bit_identically(tmp_path):
    y = low_rank_data(600)
    opt = OptimParams(steps=30, batch_size=50, lr=1.0, checkpoint_every=10, seed=4)

    def run(path, kill_after=None):
        torch.manual_seed(0)
        model = build_model(SetupParams(dataset="x", latent_dim=2), PPCAParams(kind="ppca"), (7,))
        if kill_after is not None:
            original = model.train_step

            def step(batch, i, ctx):
                if i > kill_after:
                    raise KeyboardInterrupt
                return original(batch, i, ctx)

            model.train_step = step
        return model, fit(model, as_training_set(y), opt, checkpoint=path, live_dir=None, fingerprint="f")

    ref, _ = run(tmp_path / "a.pt")
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path / "b.pt", kill_after=25)
    resumed, res = run(tmp_path / "b.pt")
    assert res.resumed_from == 20
    assert all(torch.equal(a, b) for a, b in zip(ref.state_dict().values(), resumed.state_dict().values()))
