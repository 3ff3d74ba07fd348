"""Paper 002 experiment scores: presence-aware factors / MIG / DCI, block purity, correlation summaries."""

from __future__ import annotations

import numpy as np
import pytest

from priorlab.data.smiley import SmileyData, sample_smiley, source_presence
from priorlab.experiments.sparse_coding import (
    block_purity,
    presence_aware_dci,
    presence_aware_factors,
    presence_aware_mig,
    smiley_scores,
    spike_statistics,
    source_signals,
)


@pytest.fixture(scope="module")
def smiley():
    _, presence, sources = sample_smiley(3000, 0)
    return presence, sources


def test_presence_aware_factors_mask_absent_groups(smiley):
    presence, sources = smiley
    factors, mask = presence_aware_factors(presence, SmileyData().discretise_sources(sources))
    assert factors.shape == mask.shape == (3000, 22)
    assert mask[:, :4].all()
    np.testing.assert_array_equal(mask[:, 4:], source_presence(presence))
    with pytest.raises(ValueError, match="presence"):
        presence_aware_factors(presence[:, :3], sources)


def test_a_disentangled_code_scores_high_and_a_mixed_one_low(smiley):
    presence, sources = smiley
    rs = np.random.RandomState(0)
    good = np.concatenate([source_signals(presence, sources), presence.astype(float),
                           np.zeros((3000, 8))], axis=1) + 0.01 * rs.randn(3000, 30)
    mixed = good @ np.linalg.qr(rs.randn(30, 30))[0]  # a random rotation spreads every source
    s_good = smiley_scores(good, presence, sources, wanted=("mig",))
    s_mixed = smiley_scores(mixed, presence, sources, wanted=("mig",))
    assert s_good["contrast"] > 0.8 and s_good["block_purity"] > 0.95
    assert s_good["used_latents"] == 18 and s_good["active_dims"] == 22
    assert s_good["mig"] > 0.5
    assert s_mixed["contrast"] < s_good["contrast"] - 0.4 and s_mixed["block_purity"] < 0.8
    assert s_mixed["mig"] < s_good["mig"] - 0.3
    assert np.isnan(s_good["dci"]["disentanglement"])  # not requested
    # a switched-off latent (a VSC spike at 1e-10) is a zero column, however well its tiny values correlate
    off = np.concatenate([good, 1e-10 * source_signals(presence, sources)[:, :1]], axis=1)
    s_off = smiley_scores(off, presence, sources, wanted=())
    assert s_off["used_latents"] == 18 and not s_off["corr"][:, -1].any()


def test_presence_aware_scoring_of_ungated_values(smiley):
    """Gated codes s_j = presence · v_j are exact where the group is present; scoring source j only
    there (presence-aware) sees that, while a naive MIG over all points also scores the bins of the
    invisible v_j of absent groups, which no code can predict."""
    presence, sources = smiley
    factors, mask = presence_aware_factors(presence, SmileyData().discretise_sources(sources))
    gated = np.concatenate([presence.astype(float), source_signals(presence, sources)], axis=1)
    aware = presence_aware_mig(gated, factors, mask)["mig"]
    naive = presence_aware_mig(gated, factors, np.ones_like(mask))["mig"]
    assert aware > 0.6 and naive < aware - 0.15, (aware, naive)


def test_spike_statistics():
    gamma = np.zeros((4, 5))
    gamma[:, 0] = 1.0  # always active
    gamma[:2, 1] = 1.0  # active for half of the inputs
    gamma[:, 2] = 0.5  # undecided
    s = spike_statistics(gamma)
    assert s["always_active_dims"] == 1 and s["input_dependent_dims"] == 1
    assert s["active_per_input"] == pytest.approx(1.5) and s["undecided_fraction"] == pytest.approx(0.2)


def test_presence_aware_dci_and_block_purity(smiley):
    presence, sources = smiley
    factors, mask = presence_aware_factors(presence, SmileyData().discretise_sources(sources))
    codes = np.concatenate([presence.astype(float), source_signals(presence, sources)], axis=1)[:, [0, 4, 5]]
    f, m = factors[:, [0, 4, 5]], mask[:, [0, 4, 5]]
    out = presence_aware_dci(codes[:1500], f[:1500], m[:1500], codes[1500:], f[1500:], m[1500:])
    assert out["disentanglement"] > 0.8 and out["completeness"] > 0.8 and out["informativeness_test"] > 0.6
    assert presence_aware_dci(codes[:1500], f[:1500], m[:1500], codes[1500:], f[1500:], m[1500:], n_jobs=2) == out
    corr = np.zeros((18, 3))
    corr[0, 0], corr[1, 0] = 0.9, 0.5  # both bow-tie sources: all mass in the bow-tie block
    corr[0, 1], corr[5, 1] = 0.6, 0.2  # bow tie 0.6, hat 0.2
    assert block_purity(corr, np.array([0, 0, -1])) == pytest.approx((1.0 + 0.75) / 2)
    assert block_purity(corr, np.array([0, 5, -1])) == pytest.approx((1.0 + 0.25) / 2)
    assert block_purity(corr, np.array([-1, -1, -1])) == 0.0
