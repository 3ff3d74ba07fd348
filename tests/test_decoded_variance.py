"""Paper 002's likelihood (App. A.1 / D.1): a Gaussian whose mean and log variance the decoder outputs,
per feature.  Its density against torch's Normal, the split of the decoder's output, the variance floor
on a constant feature, and a VSC built on it (decoder width, a few finite training steps)."""

from __future__ import annotations

import math

import pytest
import torch
from torch.distributions import Normal

from priorlab.config import SetupParams
from priorlab.config.models import VSCParams
from priorlab.likelihoods import LIKELIHOODS, DecodedVarianceGaussian, LikelihoodSpec
from priorlab.models import build_model


@pytest.mark.parametrize("link", ["identity", "sigmoid"])
@pytest.mark.parametrize("shape", [(5,), (2, 3, 4)])
def test_log_prob_is_the_gaussian_density_of_the_decoded_mean_and_variance(link, shape):
    g = torch.Generator().manual_seed(0)
    lik = DecodedVarianceGaussian(link, variance_floor=1e-3)
    out = torch.randn((7, 2 * shape[0], *shape[1:]), generator=g, dtype=torch.float64)
    x = torch.randn((7, *shape), generator=g, dtype=torch.float64)
    mean, log_var = out[:, : shape[0]], out[:, shape[0]:]  # the first half of dim 1: the mean
    mean = torch.sigmoid(mean) if link == "sigmoid" else mean
    want = Normal(mean, (log_var.exp() + 1e-3).sqrt()).log_prob(x).flatten(1).sum(1)
    assert torch.allclose(lik.log_prob(x, out), want, rtol=1e-12, atol=1e-12)
    assert torch.allclose(lik.distribution(out).log_prob(x), want, rtol=1e-12, atol=1e-12)
    assert torch.equal(lik.mean(out), mean) and lik.mean(out).shape == (7, *shape)


def test_the_floor_bounds_the_density_of_a_constant_feature():
    """A background pixel that is 0 in every image: the decoder can drive log σ² to -∞; the floor keeps
    the log density at most -log(2π·floor)/2 per feature (the released code's 1e-6: 6.02 nats)."""
    lik = DecodedVarianceGaussian("identity")
    out = torch.tensor([[0.0, -1e4]], requires_grad=True)  # mean 0, log σ² = -10,000
    ll = lik.log_prob(torch.zeros(1, 1), out)
    assert torch.isfinite(ll).all() and ll.item() == pytest.approx(-0.5 * math.log(2 * math.pi * 1e-6), rel=1e-5)
    ll.sum().backward()
    assert torch.isfinite(out.grad).all()
    with pytest.raises(ValueError, match="variance_floor"):
        DecodedVarianceGaussian(variance_floor=0.0)
    with pytest.raises(ValueError, match="mean_link"):
        DecodedVarianceGaussian("exp")


def test_registered_for_setups_and_a_vsc_on_it_decodes_two_maps_and_trains():
    """A setup names it; the built VSC's decoder emits the two maps; Adam steps on its loss stay finite and
    lower it on a fixed batch of binary images (the paper's Smiley pixels)."""
    assert isinstance(LIKELIHOODS["gaussian_decoded_variance"](LikelihoodSpec((4,))), DecodedVarianceGaussian)
    assert LIKELIHOODS["gaussian_decoded_variance_released"](LikelihoodSpec((4,))).mean_link == "sigmoid"
    setup = SetupParams(dataset="d", latent_dim=3, hidden=[16], likelihood="gaussian_decoded_variance")
    torch.manual_seed(0)
    model = build_model(setup, VSCParams(kind="vsc", n_pseudo_inputs=2), (1, 6, 6))
    assert model.decode(torch.zeros(4, 3)).shape == (4, 2, 6, 6)  # mean and log variance maps
    x = (torch.rand(32, 1, 6, 6) > 0.5).float()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(30):
        loss, logs = model.loss(x)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        assert math.isfinite(loss.item()) and all(math.isfinite(v) for v in logs.values())
    assert losses[-1] < losses[0]
