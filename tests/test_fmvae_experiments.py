"""Paper 001 experiment helpers: the fig. 3 claim checks and the sampling grids."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from priorlab.models.protocol import TrainingSet

from priorlab.config import FactorialMixtureParams, SetupParams
from priorlab.experiments.fmvae_experiments import conditional_grid, elbo_vs_k_claims, factorial_grid, top_components
from priorlab.models import build_model


def frame(elbo, kl_z, kl_r, seeds=2, noise=0.01):
    rng = np.random.RandomState(0)
    rows = []
    for i, k in enumerate([1, 2, 4, 8, 16]):
        for s in range(seeds):
            rows.append({"K": k, "log2K": float(np.log2(k)), "seed": s, "elbo": elbo[i] + noise * rng.randn(),
                         "log_lik": -80.0, "kl_z": kl_z[i] + noise * rng.randn(), "kl_r": kl_r[i] + noise * rng.randn()})
    return pd.DataFrame(rows)


def test_claims_follow_the_numbers():
    good = elbo_vs_k_claims(frame([-103, -102, -101.5, -101.3, -101.25], [20, 19, 18, 17, 16], [0, 0.5, 1, 1.5, 2]))
    assert good["elbo_rises"] and good["elbo_saturates"] and good["kl_r_rises"] and good["kl_z_falls"]
    assert good["best_K"] == 16 and good["elbo_gain_best_vs_K1"] == pytest.approx(1.75, abs=0.05)
    bad = elbo_vs_k_claims(frame([-101, -101.5, -102, -102.5, -103], [16, 17, 18, 19, 20], [2, 1.5, 1, 0.5, 0]))
    assert not (bad["elbo_rises"] or bad["kl_r_rises"] or bad["kl_z_falls"])
    linear = elbo_vs_k_claims(frame([-104, -103, -102, -101, -100], [20, 19, 18, 17, 16], [0, 1, 2, 3, 4]))
    assert linear["elbo_rises"] and not linear["elbo_saturates"]  # still climbing: no saturation
    assert elbo_vs_k_claims(frame([-1] * 5, [1] * 5, [1] * 5).iloc[:4])["status"] == "not enough K values"


def test_grids_iterate_the_chosen_components():
    torch.manual_seed(0)
    spec = FactorialMixtureParams(kind="fmvae", num_factors=2, num_components=[3, 4], prior_init_steps=5)
    model = build_model(SetupParams(dataset="x", latent_dim=4, hidden=[16]), spec, (1, 8, 8))
    x = (torch.rand(60, 1, 8, 8, generator=torch.Generator().manual_seed(1)) > 0.7).float()
    model.set_phase("prior_init")
    model.init_prior(TrainingSet(x, lambda b: b), torch.Generator().manual_seed(2))
    imgs = conditional_grid(model, 0, rows=2, generator=torch.Generator().manual_seed(3))
    assert imgs.shape == (2 * 3, 1, 8, 8) and bool(((imgs >= 0) & (imgs <= 1)).all())
    # within a row only factor 0 changes: the row's images differ, the rows differ too
    assert not torch.allclose(imgs[0], imgs[1]) and not torch.allclose(imgs[0], imgs[3])
    grid, k1, k2 = factorial_grid(model, 2, 10, torch.Generator().manual_seed(4))
    assert grid.shape == (4, 1, 8, 8) and k1 == top_components(model, 0, 2) and len(set(k2)) == 2
    counts = model.prior.pseudo_counts()
    assert counts[0, k1[0]] >= counts[0, k1[1]]
    spec1 = FactorialMixtureParams(kind="fmvae", num_components=[3])
    with pytest.raises(ValueError, match="I = 2"):
        factorial_grid(build_model(SetupParams(dataset="x", latent_dim=4, hidden=[16]), spec1, (1, 8, 8)), 2, 2,
                       torch.Generator())
