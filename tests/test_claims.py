"""Claims as statistical objects: each verdict kind on synthetic numbers, the combination rules,
the intervals against exact or simulated answers, and the studies' claims on made-up runs."""

import math

import numpy as np
import pytest
from scipy import stats

from priorlab.studies import fmvae_experiments, intervals, vsc_experiments
from priorlab.studies.claims import (INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED, UNTESTABLE, Criterion,
                                         claims_table, combine_all, combine_at_least, decide, md_table)
from priorlab.studies.criteria import CRITERIA
from priorlab.studies.fmvae_experiments.aggregate import GROUPS as FMVAE_GROUPS, elbo_vs_k_frame
from priorlab.studies.fmvae_experiments.claims import elbo_vs_k_claims, semi_supervised_claims
from priorlab.studies.intervals import (Estimate, accuracy, bootstrap, clopper_pearson, mean_t,
                                            newcombe_difference, paired_difference, paired_ratio, welch_difference)
from priorlab.studies.vsc_experiments.claims import vsc_claims
from priorlab.io import write_json
from priorlab.report import claims_section

CRIT = Criterion("t.x", "p", "c", "a difference", ">", 0.0)


# --------------------------------------------------------------------------- the four verdicts


def test_each_verdict_kind_on_synthetic_numbers():
    clear = paired_difference([1.1, 1.0, 0.9, 1.05], [0.0, 0.1, -0.1, 0.05])
    absent = paired_difference([0.0, 0.1, -0.1, 0.05], [1.1, 1.0, 0.9, 1.05])
    overlap = paired_difference([0.3, -0.2, 0.1, -0.1], [0.0, 0.0, 0.0, 0.0])
    assert CRIT.decide([("", clear)], "m").verdict == REPRODUCED
    assert CRIT.decide([("", absent)], "m").verdict == NOT_REPRODUCED
    assert CRIT.decide([("", overlap)], "m").verdict == INCONCLUSIVE
    assert CRIT.decide([("", clear)], "m", failed="at the noise floor").verdict == UNTESTABLE
    one = CRIT.decide([("", mean_t([5.0]))], "m")  # one run: no interval, decides nothing
    assert one.verdict == INCONCLUSIVE and "no interval" in one.effect
    assert CRIT.decide([], "m").verdict == INCONCLUSIVE


@pytest.mark.parametrize("est, side, t, expected", [
    (Estimate(0.5, 0.2, 0.8, 3, "t"), ">", 0.1, REPRODUCED), (Estimate(0.5, 0.2, 0.8, 3, "t"), ">", 0.2, INCONCLUSIVE),
    (Estimate(0.5, 0.2, 0.8, 3, "t"), ">", 0.8, NOT_REPRODUCED), (Estimate(0.5, 0.2, 0.8, 3, "t"), "<", 0.9, REPRODUCED),
    (Estimate(0.5, 0.2, 0.8, 3, "t"), "<", 0.2, NOT_REPRODUCED), (Estimate(15, 13, 17, 3, "t"), "in", (12, 27), REPRODUCED),
    (Estimate(15, 11, 17, 3, "t"), "in", (12, 27), INCONCLUSIVE), (Estimate(9, 8, 11, 3, "t"), "in", (12, 27), NOT_REPRODUCED),
])
def test_decide(est, side, t, expected):
    assert decide(est, side, t) == expected


def test_combinations():
    assert combine_all([REPRODUCED, REPRODUCED]) == REPRODUCED
    assert combine_all([REPRODUCED, INCONCLUSIVE]) == INCONCLUSIVE
    assert combine_all([INCONCLUSIVE, NOT_REPRODUCED]) == NOT_REPRODUCED
    assert combine_at_least([REPRODUCED] * 4 + [NOT_REPRODUCED], 4) == REPRODUCED
    assert combine_at_least([REPRODUCED] * 3 + [NOT_REPRODUCED] * 2, 4) == NOT_REPRODUCED
    assert combine_at_least([REPRODUCED] * 3 + [INCONCLUSIVE, NOT_REPRODUCED], 4) == INCONCLUSIVE


def test_criteria_are_validated():
    with pytest.raises(ValueError, match="band"):
        Criterion("k", "p", "c", "s", "in", 1.0)
    with pytest.raises(ValueError, match="side"):
        Criterion("k", "p", "c", "s", ">=", 1.0)
    assert "untestable unless" in CRITERIA["004.isa_mig"].rule and "at every part" in CRITERIA["004.isa_mig"].rule


# --------------------------------------------------------------------------- intervals


def test_t_interval_matches_scipy_and_one_value_has_none():
    x = [1.0, 2.0, 4.0, 3.5]
    e = mean_t(x)
    lo, hi = stats.t.interval(0.95, 3, loc=np.mean(x), scale=stats.sem(x))
    assert (e.low, e.high, e.n) == (pytest.approx(lo), pytest.approx(hi), 4)
    assert not mean_t([1.0]).bounded and mean_t([1.0]).value == 1.0
    with pytest.raises(ValueError, match="NaN"):
        mean_t([1.0, float("nan")])
    with pytest.raises(ValueError, match="equal lengths"):
        paired_difference([1.0, 2.0], [1.0])


def test_clopper_pearson_matches_the_exact_binomial_interval():
    for k, n in ((0, 20), (14, 20), (40, 40), (37, 40)):
        ci = stats.binomtest(k, n).proportion_ci(0.95, method="exact")
        e = clopper_pearson(k, n)
        assert (e.low, e.high) == (pytest.approx(ci.low, abs=1e-9), pytest.approx(ci.high, abs=1e-9))
    assert clopper_pearson(40, 40).low > 0.9 > clopper_pearson(20, 20).low  # why the bars need ≥ 40 seeds
    with pytest.raises(ValueError):
        clopper_pearson(3, 2)


def test_newcombe_difference_reproduces_the_published_example():
    """Newcombe (1998), Stat. Med. 17:873, table II, example (a): 56/70 − 48/80, method 10."""
    e = newcombe_difference(56, 70, 48, 80)
    assert e.value == pytest.approx(0.2) and e.low == pytest.approx(0.0524, abs=5e-4)
    assert e.high == pytest.approx(0.3339, abs=5e-4)


def _coverage(draw, truth, reps=2000, seed=0) -> float:
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(reps):
        e = draw(rng)
        hits += e.low <= truth <= e.high
    return hits / reps


@pytest.mark.parametrize("draw, truth", [
    (lambda r: welch_difference(r.normal(1.0, 1.0, 5), r.normal(0.0, 3.0, 8)), 1.0),
    # three seeds scored on one shared test set of 500 points: the test set's error is common to all
    (lambda r: accuracy(0.8 + r.normal(0, 0.02, 3) + r.normal(0, (0.16 / 500) ** 0.5), 500), 0.8),
])
def test_intervals_cover_the_truth_about_95_percent(draw, truth):
    assert 0.92 <= _coverage(draw, truth) <= 0.985


def _paired_accuracies(r, units=3, reps=3, n=400, rho=0.8):
    """Both arms scored on the same n fresh test points: each point has a difficulty shared by the two
    arms (correlation ``rho`` on the probit scale); each unit / replicate shifts its arm's probit by a
    seed effect (sd 0.15).  True accuracies: the means over the point and seed distributions."""
    z = r.multivariate_normal([0.0, 0.0], [[1.0, rho], [rho, 1.0]], n)
    a = (r.normal(1.0 + z[:, 0] + r.normal(0, 0.15, (units, 1)), 1.0) > 0).astype(float)
    c = (r.normal(1.8 + z[:, 1] + r.normal(0, 0.15, (reps, 1)), 1.0) > 0).astype(float)
    return a, c


def _true_ratio():
    # E[Φ((μ + z + s) / 1)] with z ~ N(0, 1), s ~ N(0, 0.15²): Φ(μ / √(1 + 1 + 0.15²))
    from scipy import stats
    return stats.norm.cdf(1.0 / math.sqrt(2.0225)) / stats.norm.cdf(1.8 / math.sqrt(2.0225))


def test_paired_ratio_covers_the_truth_and_pairing_narrows_it():
    """The ratio of two accuracies on shared test points covers its truth about 95 % of the time,
    with the points' and both arms' seed variance; its interval is narrower than one that treats the
    two as independent (the old delta method: the points' covariance dropped)."""
    truth = _true_ratio()
    assert 0.92 <= _coverage(lambda r: paired_ratio(*_paired_accuracies(r)), truth, reps=1000) <= 0.985
    a, c = _paired_accuracies(np.random.default_rng(5))
    paired = paired_ratio(a, c)
    points = abs(paired.value) * math.sqrt(  # the points' part were the arms scored on independent points
        a.mean(0).var(ddof=1) / a.shape[1] / a.mean() ** 2 + c.mean(0).var(ddof=1) / c.shape[1] / c.mean() ** 2)
    assert paired.se_fixed < 0.9 * points and paired.n == 3 and 0 < paired.se_fixed < paired.se


def test_paired_ratio_reduces_to_cochrans_ratio_estimator():
    """No seed spread in either arm (every unit and replicate identical): the variance is the ratio
    estimator's (Cochran 1977, eq. 6.9 without the finite-population term):
    (s_y² + R² s_x² − 2 R s_xy) / (n x̄²)."""
    rng = np.random.default_rng(2)
    y, x = rng.random(50).round(2), rng.random(50).round(2) + 0.5
    e = paired_ratio(np.tile(y, (3, 1)), np.tile(x, (4, 1)))
    r = y.mean() / x.mean()
    cov = np.cov(y, x, ddof=1)
    var = (cov[0, 0] + r**2 * cov[1, 1] - 2 * r * cov[0, 1]) / (50 * x.mean() ** 2)
    assert e.value == pytest.approx(r) and e.se == pytest.approx(math.sqrt(var), rel=1e-12)
    assert e.se_fixed == pytest.approx(e.se)  # all of it from the shared points: more seeds do not shrink it
    from scipy import stats
    assert e.high - e.value == pytest.approx(stats.t.ppf(0.975, 49) * e.se)  # df: the points' alone


def test_paired_ratio_needs_two_of_each_and_the_same_points():
    a = np.ones((3, 10))
    assert not paired_ratio(a, np.ones((1, 10))).bounded and not paired_ratio(a[:1], np.ones((3, 10))).bounded
    with pytest.raises(ValueError, match="different test points"):
        paired_ratio(a, np.ones((3, 9)))


def test_flags_round_trip_and_a_wrong_count_is_an_error():
    from priorlab.errors import DataError
    from priorlab.io import pack_flags, unpack_flags

    flags = np.random.default_rng(0).random(1003) < 0.7
    text = pack_flags(flags)
    assert len(text) == 2 * 126 and (unpack_flags(text, 1003) == flags).all()
    for n in (1010, 990):
        with pytest.raises(DataError, match="cannot hold"):
            unpack_flags(text, n)


def test_bootstrap_keeps_pairs_and_is_seeded():
    u = np.column_stack([np.arange(10.0), np.arange(10.0) + 1.0])  # every pair differs by exactly -1
    e = bootstrap(u, lambda x: float(np.median(x[:, 0] - x[:, 1])), random_state=0)
    assert e.value == e.low == e.high == -1.0
    v = np.random.default_rng(1).normal(size=(20, 1))
    assert bootstrap(v, np.median, 3) == bootstrap(v, np.median, 3)
    assert not bootstrap(v[:1], np.median, 3).bounded


def test_accuracy_with_one_replicate_has_no_interval():
    assert not accuracy([0.9], 1000).bounded
    assert accuracy([0.9, 0.92], 1000).se_fixed == pytest.approx(math.sqrt(0.91 * 0.09 / 1000))
    e = Estimate(0.5, 0.4, 0.6, 3, "t")
    assert e.text() == "0.500 [0.400, 0.600]" and e.to_dict()["low"] == 0.4
    assert Estimate(1.0, -math.inf, math.inf, 1, "t").to_dict()["low"] is None


# --------------------------------------------------------------------------- the studies' claims


def _smiley(vsc, bvae, tc, used60=(18, 19, 20)):
    """Runs per family / d / seed with the given contrasts (lists over seeds)."""
    runs = {}
    for fam, label, model, table in (("VSC", "VSC α=0.01", "v", vsc), ("β-VAE", "β-VAE β=2", "b2", bvae),
                                     ("β-TCVAE", "β-TCVAE β=6", "t", tc)):
        for d, values in table.items():
            for s, c in enumerate(values):
                used = used60[s] if (fam == "VSC" and d == 60) else 18
                runs[f"{model}{d}-{s}"] = {"label": label, "latent_dim": d, "model": model, "seed": s,
                                           "fresh": {"contrast": c, "block_purity": 0.9, "used_latents": used,
                                                     "active_dims": used}}
    runs["b8-60-0"] = {**runs["b260-0"], "label": "β-VAE β=8", "model": "b8",
                       "fresh": {**runs["b260-0"]["fresh"], "contrast": 0.99}}  # not the chosen β: ignored
    return {"runs": runs, "chosen_beta_vae": {"18": "b2", "60": "b2"}}


def _verdicts(claims):
    return {c.key: c.verdict for c in claims}


def test_vsc_claims_follow_the_numbers():
    elbo = {"rows": [{"model": "VSC", "value": a, "elbos": [m - 0.2, m, m + 0.2]}
                     for a, m in ((0.01, -250.0), (0.1, -240.0), (0.5, -235.0))]
            + [{"model": "β-VAE", "value": b, "elbos": [m - 0.2, m, m + 0.2]}
               for b, m in ((1.0, -230.0), (4.0, -245.0), (16.0, -260.0))]}
    smiley = _smiley({18: [0.60, 0.62, 0.61], 60: [0.59, 0.60, 0.61]}, {18: [0.40, 0.41, 0.42], 60: [0.20, 0.21, 0.19]},
                     {18: [0.5, 0.52, 0.51], 60: [0.3, 0.31, 0.29]})
    for s in range(3):
        smiley["runs"][f"v60-{s}"]["spikes"] = {"input_dependent_dims": 10 + s}
    fashion = {"replicates": {f"f{s}": {"spikes": {"input_dependent_dims": 8 + s}, "tshirt_shirt_minus_trouser": 0.3 + s / 100,
                                        "sneaker_boot_minus_trouser_bag": 0.2 + s / 100} for s in range(3)}}
    good = _verdicts(vsc_claims(smiley, elbo, fashion))
    assert len(good) == 10 and set(good.values()) == {REPRODUCED}, good
    dead = {"replicates": {f"f{s}": {"spikes": {"input_dependent_dims": 0}, "tshirt_shirt_minus_trouser": 0.0,
                                     "sneaker_boot_minus_trouser_bag": 0.0} for s in range(3)}}
    v = _verdicts(vsc_claims({}, {}, dead))
    assert v == {"002.spikes_input_dependent": NOT_REPRODUCED, "002.class_spike_patterns": UNTESTABLE}
    bad = _verdicts(vsc_claims(_smiley({18: [0.6, 0.61, 0.62], 60: [0.40, 0.41, 0.42]},
                                       {18: [0.70, 0.71, 0.72], 60: [0.75, 0.76, 0.77]},
                                       {18: [0.5, 0.5, 0.5], 60: [0.5, 0.5, 0.5]}, used60=(40, 41, 42)), {}, {}))
    assert set(bad.values()) == {NOT_REPRODUCED}, bad
    single = _verdicts(vsc_claims(_smiley({18: [0.6], 60: [0.4]}, {18: [0.7], 60: [0.75]}, {}), {}, {}))
    assert set(single.values()) == {INCONCLUSIVE}  # one seed per arm decides nothing


def test_vsc_claims_need_the_runs():
    assert vsc_claims({}, {}, {}) == []


def _elbo_runs(gain: float, seeds: int = 3, shared: bool = False) -> list[dict]:
    rows = []
    for s in range(seeds):
        for i, k in enumerate((1, 4, 16, 64)):
            e = -110 + gain * min(i, 2) + 0.05 * s  # rises over the first two doublings, then flat
            rows.append({"run": f"k{k}-{s}", "group": FMVAE_GROUPS["elbo_vs_k"], "seed": s,
                         "setup": "mnist" if shared or s == 0 else f"mnist_r{s}",
                         "test": {"elbo": e, "log_lik": e - 1, "kl": 1.0, "iw_log_likelihood": e + 1},
                         "model_extras": {"num_components": [k], "kl_z": 10.0 - i - 0.01 * s,
                                          "kl_r": 0.5 * i + 0.01 * s, "components_used": [k]}})
    return rows


def test_fmvae_elbo_claims():
    v = _verdicts(elbo_vs_k_claims(elbo_vs_k_frame(_elbo_runs(1.0))))
    assert v == dict.fromkeys(("001.elbo_rises", "001.elbo_saturates", "001.kl_r_rises", "001.kl_z_falls"), REPRODUCED)
    flat = _verdicts(elbo_vs_k_claims(elbo_vs_k_frame(_elbo_runs(0.0))))
    assert flat["001.elbo_rises"] == NOT_REPRODUCED  # a gain of 0 is below the 0.5-nat minimum effect


def test_seeds_on_one_pretraining_are_one_unit():
    """Three seeds on one pretraining: one unit, no interval, nothing decided (the seeds' own spread
    would have reproduced every claim); on three pretrainings the same numbers decide."""
    shared = elbo_vs_k_claims(elbo_vs_k_frame(_elbo_runs(1.0, shared=True)))
    assert {c.verdict for c in shared} == {INCONCLUSIVE} and {c.n for c in shared} == {"1"}
    assert all("no interval" in c.effect for c in shared)
    own = elbo_vs_k_claims(elbo_vs_k_frame(_elbo_runs(1.0)))
    assert {c.verdict for c in own} == {REPRODUCED} and {c.n for c in own} == {"3"}


def test_semi_supervised_claims_and_the_report_section(tmp_path):
    from priorlab.io import pack_flags

    def flags(acc, seed):  # ``acc`` of 1000 points right, the same hard points missed by every model
        hit = np.ones(1000, bool)
        hit[np.random.default_rng(seed).permutation(1000)[: round((1 - acc) * 1000)]] = False
        return pack_flags(hit)

    ceil = [flags(0.97, 0), flags(0.975, 1), flags(0.965, 2)]

    def entry(acc, plateaued=True):
        return {"supervised_factor": "shape", "labelled_fraction": 0.4, "heldout_accuracy": acc, "ceiling": 0.97,
                "ceiling_plateaued": plateaued, "ceiling_n_test": 1000, "ceiling_replicates": [0.97, 0.975, 0.965],
                "heldout_correct": flags(acc, 0), "ceiling_correct": ceil}
    semi = {"a-0": entry(0.96), "a-1": entry(0.965), "a-2": entry(0.97)}
    claims = semi_supervised_claims(semi, dict.fromkeys(semi, "m"), 1000)
    assert [c.key for c in claims] == ["001.semi_supervised/shape, 40% labels",
                                       "001.semi_supervised_relative/shape, 40% labels"]
    assert [c.verdict for c in claims] == [REPRODUCED, REPRODUCED]
    capped = semi_supervised_claims({k: entry(0.96, False) for k in semi}, dict.fromkeys(semi, "m"), 1000)
    assert capped[1].verdict == UNTESTABLE and "plateau" in capped[1].reason
    write_json(tmp_path / "fmvae_experiments" / "summary.json",
               {"title": fmvae_experiments.TITLE, "paper": "001", "claims": [c.to_dict() for c in capped]})
    text = "\n".join(claims_section(tmp_path))
    assert text.startswith("## Paper claims") and "untestable (the ceiling" in text
    assert "Criteria changed" in text and "(b2b1005)" in text and "fmvae_experiments/README.md" in text
    assert claims_section(tmp_path / "missing") == []


def test_report_discovers_experiment_summaries(tmp_path):
    """Every ``<name>/summary.json`` with a title and claims, by stated paper number, then name."""
    claim = CRIT.decide([("", mean_t([1.0, 2.0]))], "m").to_dict()
    write_json(tmp_path / "vsc_experiments" / "summary.json",
               {"title": vsc_experiments.TITLE, "paper": vsc_experiments.PAPER, "claims": [claim]})
    write_json(tmp_path / "fmvae_experiments" / "summary.json",
               {"title": fmvae_experiments.TITLE, "paper": fmvae_experiments.PAPER, "claims": []})
    write_json(tmp_path / "a_no_paper" / "summary.json", {"title": "Z", "claims": [claim]})
    write_json(tmp_path / "untitled" / "summary.json", {"claims": [claim]})  # not an experiment summary
    write_json(tmp_path / "figures" / "x.json", {"title": "T", "claims": []})
    titles = [line for line in claims_section(tmp_path) if line.startswith("### ")]
    assert titles == [f"### {fmvae_experiments.TITLE}", f"### {vsc_experiments.TITLE}", "### Z"]
    assert "[vsc_experiments/README.md](vsc_experiments/README.md)." in "\n".join(claims_section(tmp_path))


def test_tables_escape_and_mark_not_reproduced():
    c = Criterion("k", "p", "a|b", "s", ">", 0.0).decide([("", mean_t([-2.0, -2.1, -1.9]))], "m").to_dict()
    row = claims_table([c])[2]
    assert "a\\|b" in row and row.endswith("| **not reproduced** |")
    assert md_table(["x"], [[0.12345]])[2] == "| 0.123 |"
    assert intervals.LEVEL == 0.95


def test_the_report_counts_the_diagnosed_not_reproduced_verdicts():
    from priorlab.report import diagnosed_text

    no = CRIT.decide([("", mean_t([-2.0, -2.1, -1.9]))], "m").to_dict()
    assert no["verdict"] == "not reproduced"
    yes = CRIT.decide([("", mean_t([2.0, 2.1, 1.9]))], "m").to_dict()
    text = diagnosed_text([dict(no, diagnosis="d.md"), no, yes])
    assert text == f"Diagnosed: 1 of the 2 *not reproduced* verdicts (each links its diagnosis); without one: {no['key']}."
    assert diagnosed_text([dict(no, diagnosis="d.md"), yes]).endswith("(each links its diagnosis).")
