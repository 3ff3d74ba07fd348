"""Presence-aware factors / MIG / DCI (``priorlab.metrics.presence``) on Smiley's gated sources."""

from __future__ import annotations

import numpy as np
import pytest

from priorlab.data.smiley import SmileyData, sample_smiley, source_presence
from priorlab.metrics import presence_aware_dci, presence_aware_factors, presence_aware_mig


@pytest.fixture(scope="module")
def smiley():
    _, presence, sources = sample_smiley(3000, 0)
    factors, mask = presence_aware_factors(presence, SmileyData().discretise_sources(sources))
    gated = np.concatenate([presence.astype(float), source_presence(presence) * sources], axis=1)
    return presence, sources, factors, mask, gated


def test_presence_aware_factors_mask_absent_groups(smiley):
    presence, sources, factors, mask, _ = smiley
    assert factors.shape == mask.shape == (3000, 22)
    assert mask[:, :4].all()
    np.testing.assert_array_equal(mask[:, 4:], source_presence(presence))
    with pytest.raises(ValueError, match="presence"):
        presence_aware_factors(presence[:, :3], sources)


def test_presence_aware_scoring_of_ungated_values(smiley):
    """Gated codes s_j = presence · v_j are exact where the group is present; scoring source j only
    there (presence-aware) sees that, while a naive MIG over all points also scores the bins of the
    invisible v_j of absent groups, which no code can predict."""
    _, _, factors, mask, gated = smiley
    aware = presence_aware_mig(gated, factors, mask)["mig"]
    naive = presence_aware_mig(gated, factors, np.ones_like(mask))["mig"]
    assert aware > 0.6 and naive < aware - 0.15, (aware, naive)


def test_presence_aware_dci(smiley):
    _, _, factors, mask, gated = smiley
    codes, f, m = gated[:, [0, 4, 5]], factors[:, [0, 4, 5]], mask[:, [0, 4, 5]]
    out = presence_aware_dci(codes[:1500], f[:1500], m[:1500], codes[1500:], f[1500:], m[1500:])
    assert out["disentanglement"] > 0.8 and out["completeness"] > 0.8 and out["informativeness_test"] > 0.6
    assert presence_aware_dci(codes[:1500], f[:1500], m[:1500], codes[1500:], f[1500:], m[1500:], n_jobs=2) == out
