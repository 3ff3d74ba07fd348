"""FactorVAE (Kim & Mnih 2018): permutation, density-ratio TC, gradient isolation, exact resume."""

from __future__ import annotations

import math

import pytest
import torch

from priorlab.config import FactorVAEParams, OptimParams, ParamsError, SetupParams
from priorlab.models import build_model
from priorlab.models.elbo import objective
from priorlab.models.factor_vae import Discriminator, permute_dims
from priorlab.models.protocol import Batch, StepContext
from priorlab.train.trainer import fit
from tests.helpers import as_training_set, tiny_data

SETUP = SetupParams(dataset="x", latent_dim=3, hidden=[16])
OBS = (1, 8, 8)


def factor_vae(seed: int = 0, **kw):
    torch.manual_seed(seed)
    return build_model(SETUP, FactorVAEParams(kind="factor_vae", discriminator_hidden=[32, 32], **kw), OBS)


def adam(model, lr=1e-3):
    return torch.optim.Adam(model.param_groups(lr), lr=lr)


def test_permutation_keeps_each_marginal_and_breaks_the_dependence():
    g = torch.Generator().manual_seed(0)
    z = torch.randn(4000, 1, generator=g).repeat(1, 3) + 0.1 * torch.randn(4000, 3, generator=g)
    zp = permute_dims(z, g)
    for j in range(3):  # each column is a permutation of the original column
        assert torch.equal(torch.sort(zp[:, j]).values, torch.sort(z[:, j]).values)
    assert torch.corrcoef(z.T)[0, 1] > 0.95
    assert abs(torch.corrcoef(zp.T)[0, 1]) < 0.06  # 4000 samples: sd of r ≈ 0.016


def _trained_tc(rho: float, steps: int = 600, seed: int = 0) -> float:
    """Mean logit difference of a discriminator trained as FactorVAE's on 2-D Gaussians with correlation rho."""
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    chol = torch.linalg.cholesky(torch.tensor([[1.0, rho], [rho, 1.0]]))
    d = Discriminator(2, [64, 64])
    opt = torch.optim.Adam(d.parameters(), lr=2e-3, betas=(0.5, 0.9))
    for _ in range(steps):
        z = torch.randn(512, 2, generator=g) @ chol.T
        loss = d.loss(z, permute_dims(z, g))
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        return d.tc_estimate(torch.randn(20000, 2, generator=g) @ chol.T).mean().item()


@pytest.mark.slow
def test_density_ratio_tc_matches_the_gaussian_closed_form():
    # TC of a bivariate Gaussian with correlation rho: -½ log(1 - rho²)
    for rho, tol in ((0.0, 0.05), (0.8, 0.1)):
        assert _trained_tc(rho) == pytest.approx(-0.5 * math.log(1 - rho**2), abs=tol)


def test_each_loss_updates_only_its_own_parameters():
    """The step's gradients are those of the VAE loss alone (VAE params) and of the discriminator loss
    on detached codes alone (discriminator); the VAE loss's TC term depends on the discriminator's
    weights in value but holds them fixed (no gradient reaches them from it), so the sum of the two
    losses (``step_loss``, for vectorised replicates) has the same gradients."""
    x = tiny_data(32, OBS)
    m = factor_vae(gamma=5.0)
    opt = adam(m)
    torch.manual_seed(3)
    state = torch.get_rng_state()
    m.train_step(Batch(x), 1, StepContext(opt))
    step_grads = [p.grad.clone() for p in m.vae_parameters()]
    d_grads = [p.grad.clone() for p in m.discriminator.parameters()]
    # recompute from the same initial weights and noise
    m2 = factor_vae(gamma=5.0)
    torch.set_rng_state(state)
    terms = m2.terms(x)
    loss = objective(terms, m2.beta)
    ref = torch.autograd.grad(loss, m2.vae_parameters(), allow_unused=True, retain_graph=True)
    coupling = torch.autograd.grad(loss, list(m2.discriminator.parameters()), allow_unused=True, retain_graph=True)
    assert all(g is None for g in coupling)
    assert terms.extra["tc_penalty"].abs().sum() > 0  # yet the term is there, from the discriminator's output
    z = terms.z.detach()
    d_ref = torch.autograd.grad(m2.discriminator.loss(z, permute_dims(z)), list(m2.discriminator.parameters()))
    for a, b in zip(step_grads, ref):
        assert b is not None and torch.allclose(a, b)
    for a, b in zip(d_grads, d_ref):
        assert torch.allclose(a, b)
    m3 = factor_vae(gamma=5.0)  # step_loss: the sum, one backward, the same gradients
    torch.set_rng_state(state)
    total, logs, _ = m3.step_loss(Batch(x), StepContext(None))
    total.backward()
    assert float(logs["discriminator_loss"]) > 0
    for a, b in zip([*step_grads, *d_grads], [*(p.grad for p in m3.vae_parameters()),
                                              *(p.grad for p in m3.discriminator.parameters())]):
        assert torch.equal(a, b)


def test_param_groups_carry_their_own_lr_and_betas():
    m = factor_vae(discriminator_lr=3e-4, discriminator_betas=[0.5, 0.9], vae_betas=[0.9, 0.999])
    groups = {g["name"]: g for g in m.param_groups(1e-3)}
    assert groups["nets"]["lr"] == 1e-3 and groups["nets"]["betas"] == (0.9, 0.999)
    assert groups["discriminator"]["lr"] == 3e-4 and groups["discriminator"]["betas"] == (0.5, 0.9)
    ids = [id(p) for g in groups.values() for p in g["params"]]
    assert len(ids) == len(set(ids)) == len(list(m.parameters()))


def test_killed_run_resumes_bit_identically(tmp_path):
    x = tiny_data(64, OBS)
    opt = OptimParams(steps=30, batch_size=16, lr=1e-3, checkpoint_every=10, seed=0)
    ref = factor_vae(gamma=10.0)
    fit(ref, as_training_set(x), opt, checkpoint=tmp_path / "a.pt", live_dir=None, fingerprint="fp")

    crashed = factor_vae(gamma=10.0)
    original = crashed.train_step

    def crash_at_25(batch, step, ctx):
        if step == 25:
            raise KeyboardInterrupt
        return original(batch, step, ctx)

    crashed.train_step = crash_at_25
    with pytest.raises(KeyboardInterrupt):
        fit(crashed, as_training_set(x), opt, checkpoint=tmp_path / "b.pt", live_dir=None, fingerprint="fp")
    torch.manual_seed(123)  # the resumed run must not depend on the process's RNG state
    resumed = factor_vae(seed=7, gamma=10.0)
    res = fit(resumed, as_training_set(x), opt, checkpoint=tmp_path / "b.pt", live_dir=None, fingerprint="fp")
    assert res.resumed_from == 20
    for k, v in ref.state_dict().items():
        assert torch.equal(v, resumed.state_dict()[k]), k


def test_params_checked():
    with pytest.raises(ParamsError, match="gamma"):
        FactorVAEParams(kind="factor_vae", gamma=-1.0).check("models.f")
    with pytest.raises(ParamsError, match="discriminator_betas"):
        FactorVAEParams(kind="factor_vae", discriminator_betas=[0.5]).check("models.f")
