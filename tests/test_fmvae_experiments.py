"""Paper 001 experiment helpers: the fig. 3 claim checks and the sampling grids."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from priorlab.models.protocol import TrainingSet

from priorlab.config import FactorialMixtureParams, SetupParams
from priorlab.studies.fmvae_experiments.claims import elbo_vs_k_claims
from priorlab.studies.fmvae_experiments.scores import conditional_grid, factorial_grid, top_components
from priorlab.models import build_model


def frame(elbo, kl_z, kl_r, seeds=2, noise=0.01):
    rng = np.random.RandomState(0)
    rows = []
    for i, k in enumerate([1, 2, 4, 8, 16]):
        for s in range(seeds):
            rows.append({"K": k, "log2K": float(np.log2(k)), "seed": s, "elbo": elbo[i] + noise * rng.randn(),
                         "log_lik": -80.0, "kl_z": kl_z[i] + noise * rng.randn(), "kl_r": kl_r[i] + noise * rng.randn()})
    return pd.DataFrame(rows)


def _verdicts(f):
    return {c.key.split(".")[1]: c.verdict for c in elbo_vs_k_claims(f)}


def test_claims_follow_the_numbers():
    good = _verdicts(frame([-103, -102, -101.5, -101.3, -101.25], [20, 19, 18, 17, 16], [0, 0.5, 1, 1.5, 2], seeds=3))
    assert set(good.values()) == {"reproduced"}, good
    bad = _verdicts(frame([-101, -101.5, -102, -102.5, -103], [16, 17, 18, 19, 20], [2, 1.5, 1, 0.5, 0], seeds=3))
    assert bad["elbo_rises"] == bad["kl_r_rises"] == bad["kl_z_falls"] == "not reproduced"
    linear = _verdicts(frame([-104, -103.8, -103.4, -102.6, -101], [20, 19, 18, 17, 16], [0, 1, 2, 3, 4], seeds=3))
    assert linear["elbo_rises"] == "reproduced" and linear["elbo_saturates"] == "not reproduced"  # still climbing
    two = _verdicts(frame([-103, -102, -101.5, -101.3, -101.25], [20, 19, 18, 17, 16], [0, 0.5, 1, 1.5, 2], seeds=1))
    assert set(two.values()) == {"inconclusive"}  # one seed: no interval
    assert elbo_vs_k_claims(frame([-1] * 5, [1] * 5, [1] * 5).iloc[:4]) == []


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


def test_the_semi_supervised_diagnosis_pairs_the_arm_by_pretraining():
    """issue 43: the arm's run is paired with the claim's run on the same pretraining; the conclusion
    follows the paired gain and the arm's level against the goal."""
    from priorlab.studies.fmvae_experiments.diagnosis import diagnosis_markdown

    def entry(unit, acc):
        return {"supervised_factor": "shape", "labelled_fraction": 0.4, "heldout_accuracy": acc, "unit": unit,
                "confusion": [[90, 10, 0], [40, 60, 0], [0, 0, 100]]}

    semi = {f"s{u}": entry(f"d{u}", 0.75 + 0.001 * u) for u in range(3)}
    claims = [{"key": "001.semi_supervised/shape", "verdict": "not reproduced"}]
    settings = {name: {"train_steps": 1500, "prior_init_steps": 2000} for name in semi}

    def arm(shift):
        out = {f"l{u}": entry(f"d{u}", 0.75 + 0.001 * u + shift + 0.002 * u) for u in range(3)}
        settings.update({name: {"train_steps": 4500, "prior_init_steps": 2000} for name in out})
        return out

    text = diagnosis_markdown(semi, {}, settings, claims, arm(0.05))
    assert "4,500 steps instead of 1,500" in text and "minus the claim's run on the same pretraining +0.052" in text
    assert "**Not reproduced at this scale**: longer training raises the accuracy" in text
    assert "40% of label 1 → cluster 0" in text
    assert "**Open**: the gain from longer training is not distinguishable from 0" in diagnosis_markdown(
        semi, {}, settings, claims, arm(-0.05))
    assert "reaches the goal" in diagnosis_markdown(semi, {}, settings, claims, arm(0.25))
    assert "no arm ran: **open**" in diagnosis_markdown(semi, {}, settings, claims)
