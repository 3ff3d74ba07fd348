"""The criteria are kept in one reviewed place: a rule that changes without a history entry fails here."""

from priorlab.experiments.claims import VERDICTS
from priorlab.experiments.criteria import CRITERIA, HISTORY, history


def test_every_criterion_matches_its_latest_history_entry():
    """Changing a criterion's statistic, side, threshold, precondition or combination changes its
    fingerprint: add a Change (date, old rule, old verdict, why, new fingerprint) to HISTORY."""
    stale = {k: c.fingerprint() for k, c in CRITERIA.items() if not history(k) or history(k)[-1].fingerprint != c.fingerprint()}
    assert not stale, f"criteria changed without a history entry (new fingerprints): {stale}"


def test_history_names_known_criteria_and_says_why():
    assert {h.key for h in HISTORY} <= set(CRITERIA)
    for h in HISTORY:
        assert h.why and h.old and h.date and len(h.fingerprint) == 12


def test_the_wording_of_a_claim_does_not_change_its_fingerprint():
    import dataclasses

    c = CRITERIA["001.elbo_rises"]
    assert dataclasses.replace(c, claim="reworded", note="n").fingerprint() == c.fingerprint()
    assert dataclasses.replace(c, threshold=0.0).fingerprint() != c.fingerprint()
    assert len(VERDICTS) == 4
