"""The criteria are kept in one reviewed place: a rule that changes without a history entry fails here."""

from priorlab.studies.claims import VERDICTS
from priorlab.studies.criteria import CRITERIA, HISTORY, LABELS, history


def test_every_criterion_matches_its_latest_history_entry():
    """Changing a criterion's statistic, side, threshold, precondition or combination changes its
    fingerprint: add a Change (date, old rule, old verdict, why, new fingerprint) to HISTORY."""
    stale = {k: c.fingerprint() for k, c in CRITERIA.items() if not history(k) or history(k)[-1].fingerprint != c.fingerprint()}
    assert not stale, f"criteria changed without a history entry (new fingerprints): {stale}"


def test_history_names_known_criteria_and_says_why():
    assert {h.key for h in HISTORY} <= set(CRITERIA)
    for h in HISTORY:
        assert h.why and h.old and h.date and (h.fingerprint == "" or len(h.fingerprint) == 12)
        assert h.label in LABELS, h
    for key in CRITERIA:
        assert len(history(key)[-1].fingerprint) == 12


def test_the_history_holds_the_changes_issue_42_found():
    """The PCA exclusion (a loosening that flipped the PBMC claim), the move to medians, the optional
    stops, and the corrected account of paper 003's median statistic."""
    pbmc = history("003.single_cell_accuracy")
    assert any(h.commit == "8fdb161" and h.label == "looser" and "PCA" in h.old and "no → yes" in h.new_verdict
               for h in pbmc)
    assert any(h.commit == "8fdb161" and h.old.startswith("mean over 2 data sets") for h in history("003.mse"))
    assert not any("the same medians, paired" in h.why for h in HISTORY)
    stops = {h.key for h in HISTORY if h.label == "optional stop"}
    assert {"004.isa_mig", "002.beta_tcvae_degrades", "002.vsc_beats_beta_vae"} <= stops
    dates = [h.date for h in HISTORY]
    assert dates == sorted(dates) or all(  # each criterion's changes are in time order
        [x.date for x in history(k)] == sorted(x.date for x in history(k)) for k in CRITERIA)


def test_the_wording_of_a_claim_does_not_change_its_fingerprint():
    import dataclasses

    c = CRITERIA["001.elbo_rises"]
    assert dataclasses.replace(c, claim="reworded", note="n").fingerprint() == c.fingerprint()
    assert dataclasses.replace(c, threshold=0.0).fingerprint() != c.fingerprint()
    assert len(VERDICTS) == 4


def test_changes_table_chains_a_criterions_changes_oldest_first():
    """A criterion changed twice: the first row's new rule is the second row's old one (with the verdict
    it then gave); only the last row shows the rule and verdict of now."""
    from priorlab.studies import criteria as C

    key = "004.isa_mig"
    changes = C.history(key)
    assert len(changes) >= 2
    claim = {"key": key, "paper": "004", "claim": "c", "criterion": C.criterion(key).rule, "verdict": "inconclusive"}
    header, _, *rows = C.changes_table([claim])
    cells = [r.strip("|").split(" | ") for r in rows]
    assert len(cells) == len(changes)
    for row, ch, after in zip(cells, changes, changes[1:]):
        assert row[2] == ch.old and row[4] == after.old
        assert row[5] == (ch.new_verdict or f"{after.old_verdict} ({after.commit})")
        assert row[6] == ch.label
    assert cells[-1][4] == C.criterion(key).rule and cells[-1][5] == "now inconclusive"
