"""Issue 42: evidence that decides. Units that are really independent (seeds on one pretraining are one
unit), paired data analysed as paired, the lean and the n that would decide an inconclusive claim, and
fingerprints that cover the code and constants a claim reads."""

import dataclasses
import math
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

import priorlab
from priorlab.studies.claims import (AGAINST, FOR, INCONCLUSIVE, N_MAX, NOT_REPRODUCED, REPRODUCED, UNITS, Criterion,
                                     Plan, lean, n_to_decide, source_digest, verdict_cell)
from priorlab.studies.criteria import CRITERIA
from priorlab.studies.intervals import (Estimate, accuracy, mean_t, newcombe_paired_difference, unit_means,
                                        welch_difference)
from priorlab.studies.mssc_experiments.claims import paired_table, recovery_claims

# --------------------------------------------------------------------------- paired proportions


@pytest.mark.parametrize("table, expected", [
    ((20, 12, 2, 16), (0.0562, 0.3292)),    # Newcombe (1998b), method 10 (cited by ratesci's tests)
    ((59, 6, 16, 80), (-0.1186, -0.0046)),  # Cavo et al., printed in contingencytables' tests
    ((1, 0, 0, 1), (-0.5734, 0.5734)),      # contingencytables' tests
    ((8, 3, 1, 2), (-0.1574, 0.4136)),      # Tang (2010), cited by ratesci's tests
    ((36, 12, 2, 0), (0.0569, 0.3404)),     # Newcombe (1998b) table III (an empty margin: φ = 0)
])
def test_newcombe_paired_difference_against_published_examples(table, expected):
    e = newcombe_paired_difference(*table)
    assert e.value == pytest.approx((table[1] - table[2]) / sum(table))
    assert (round(e.low, 4), round(e.high, 4)) == expected
    assert e.n == sum(table) and e.method == "Newcombe paired"


def test_pairing_narrows_the_bars_comparison_when_the_models_agree_by_seed():
    """Both models recover on the same 26 seeds, the max rule on 6 more: paired, the difference is
    positive; the unpaired interval of the same counts (32 vs 26 of 40) cannot tell."""
    from priorlab.studies.intervals import newcombe_difference

    paired = newcombe_paired_difference(26, 6, 0, 8)
    unpaired = newcombe_difference(32, 40, 26, 40)
    assert paired.value == unpaired.value
    assert paired.low > 0 > unpaired.low


def test_the_bars_claim_pairs_the_two_models_by_seed():
    kinds = {"mx": "mssc", "lin": "linear_ssc"}
    rows = [{"bars": "b", "variant": "occlusion", "model": m, "seed": s, "n_recovered": 8, "sigma2": 0.5, "pi": 0.2,
             "recovered": rec} for s in range(40)
            for m, rec in (("mx", s < 32), ("lin", s < 26))]
    assert paired_table(rows, "b", kinds) == (26, 6, 0, 8)
    vs = next(c for c in recovery_claims(rows, kinds) if c.key.startswith("000.bars_vs_linear"))
    assert vs.method == "Newcombe paired" and vs.verdict == REPRODUCED and "max rule only 6" in vs.measured


# --------------------------------------------------------------------------- units


def test_unit_means_average_the_seeds_of_a_unit_first():
    assert unit_means([1.0, 3.0, 10.0, 4.0], ["a", "a", "b", "c"]).tolist() == [2.0, 10.0, 4.0]
    with pytest.raises(ValueError, match="unit labels"):
        unit_means([1.0, 2.0], ["a"])


def test_pooling_seeds_of_shared_pretrainings_narrows_the_interval_wrongly():
    """A two-level design: 3 pretrainings (sd 1) with 4 seeds each (sd 0.1). The t interval over the 12
    seeds treats them as independent and misses the true mean far more often than 5 %; over the 3
    pretraining means it keeps its 95 %."""
    rng = np.random.default_rng(0)
    pooled = nested = 0
    sims = 2000
    for _ in range(sims):
        pre = rng.normal(0.0, 1.0, 3)
        values = (pre[:, None] + rng.normal(0.0, 0.1, (3, 4))).ravel()
        units = np.repeat(["r0", "r1", "r2"], 4)
        a, b = mean_t(values), mean_t(unit_means(values, units))
        pooled += a.low <= 0.0 <= a.high
        nested += b.low <= 0.0 <= b.high
    assert pooled / sims < 0.75
    assert abs(nested / sims - 0.95) < 0.02


def test_a_vsc_arm_on_one_pretraining_has_one_unit():
    from priorlab.studies.vsc_experiments.claims import vsc_claims

    def runs(kind, d, values, units):
        return {f"{kind}{d}-{i}": {"label": f"{kind} x", "latent_dim": d, "model": kind, "seed": i, "unit": u,
                                  "fresh": {"contrast": v, "used_latents": 15, "active_dims": 15, "block_purity": 1.0}}
                for i, (v, u) in enumerate(zip(values, units))}
    shared = {**runs("VSC", 18, [0.6, 0.61, 0.62], ["p"] * 3), **runs("VSC", 60, [0.6, 0.6, 0.61], ["q"] * 3),
              **runs("β-VAE", 18, [0.3, 0.31, 0.32], ["a", "b", "c"]),
              **runs("β-VAE", 60, [0.3, 0.31, 0.3], ["d", "e", "f"])}
    chosen = {"18": "β-VAE", "60": "β-VAE"}
    claims = {c.key: c for c in vsc_claims({"runs": shared, "chosen_beta_vae": chosen}, {}, {})}
    beats = claims["002.vsc_beats_beta_vae"]
    assert beats.verdict == INCONCLUSIVE and beats.n == "1" and "no interval" in beats.effect


# --------------------------------------------------------------------------- lean and the n to decide


def _brute_n(est: Estimate, dist: float, t_based: bool = True) -> int:
    for n in range(est.n + 1, 100_000):
        crit = stats.t.ppf(0.975, n - 1) if t_based else stats.norm.ppf(0.975)
        if crit * est.se * math.sqrt(est.n / n) < dist:
            return n
    raise AssertionError


def test_n_to_decide_is_where_the_half_width_falls_below_the_distance():
    est = mean_t([0.1, 0.5, -0.2, 0.4])  # mean 0.2, inconclusive against 0
    n = n_to_decide(est, ">", 0.0)
    assert n == _brute_n(est, 0.2)
    half = lambda m: stats.t.ppf(0.975, m - 1) * est.se * math.sqrt(est.n / m)  # noqa: E731
    assert half(n) < 0.2 <= half(n - 1)
    assert n_to_decide(est, "in", (-1.0, 0.3)) == _brute_n(est, 0.1)  # the nearest band edge
    assert n_to_decide(Estimate(1.0, -math.inf, math.inf, 1, "t"), ">", 0.0) is None  # no spread from one unit
    assert n_to_decide(Estimate(0.0, -1.0, 1.0, 3, "t", 0.5), ">", 0.0) == N_MAX + 1  # on the threshold
    boot = Estimate(0.3, -0.1, 0.7, 10, "bootstrap", 0.2)
    assert n_to_decide(boot, ">", 0.0) == _brute_n(boot, 0.3, t_based=False)


def test_the_part_of_an_interval_more_units_do_not_shrink_stays_in_the_n_to_decide():
    """Replicates scored on one shared test set: the binomial part of the accuracy's standard error
    (``se_fixed``) stays at any n, so the n to decide is larger than with every part shrinking, and a
    margin inside the fixed part alone is not decided by any n (the verdict says more test points)."""
    est = accuracy([0.90, 0.93, 0.91], 1000)
    assert est.se_fixed == pytest.approx(math.sqrt(est.value * (1 - est.value) / 1000))
    shrinking = dataclasses.replace(est, se_fixed=0.0)
    assert N_MAX > n_to_decide(est, ">", 0.895) > 2 * n_to_decide(shrinking, ">", 0.895)
    n = n_to_decide(est, ">", 0.895)
    half = lambda m: stats.t.ppf(0.975, m - 1) * math.sqrt(  # noqa: E731  (the t critical value at m units)
        est.se_fixed**2 + (est.se**2 - est.se_fixed**2) * 3 / m)
    assert half(n) < est.value - 0.895 <= half(n - 1)
    assert n_to_decide(est, ">", est.value - 1.5 * est.se_fixed) == N_MAX + 1  # inside the fixed part
    claim = Criterion("t.acc", "p", "c", "s", ">", est.value - 1.5 * est.se_fixed).decide([("", est)], "m").to_dict()
    assert claim["verdict"] == INCONCLUSIVE and "more test points would" in verdict_cell(claim)


def test_lean_and_the_claims_n_to_decide():
    crit = Criterion("t.k", "p", "c", "s", ">", 0.0, combine="all",
                     plan=Plan("seed", (("cpu", 3),)))
    up, down = mean_t([0.1, 0.5, -0.2, 0.4]), mean_t([-0.1, -0.5, 0.2, -0.4])
    assert lean(0.2, ">", 0.0) == FOR and lean(-0.2, ">", 0.0) == AGAINST and lean(5, "in", (1, 4)) == AGAINST
    both_up = crit.decide([("a", up), ("b", up)], "m")
    assert both_up.verdict == INCONCLUSIVE and both_up.lean == FOR
    assert both_up.n_to_decide == n_to_decide(up, ">", 0.0)
    mixed = crit.decide([("a", up), ("b", down)], "m")  # one part leaning to fail decides "all" once it fails
    assert mixed.lean == AGAINST and mixed.n_to_decide == n_to_decide(down, ">", 0.0)
    clear = crit.decide([("a", mean_t([1.0, 1.1, 0.9])), ("b", up)], "m")
    assert clear.lean == FOR and clear.n_to_decide == n_to_decide(up, ">", 0.0)  # a decided part needs 0
    done = crit.decide([("a", mean_t([1.0, 1.1, 0.9]))], "m")
    assert done.verdict == REPRODUCED and done.lean == "" and done.n_to_decide is None
    cell = verdict_cell(both_up.to_dict(), "+5 units: ≈ 3 cpu-min")
    assert f"leans {FOR}" in cell and f"n ≈ {both_up.n_to_decide} per arm" in cell and "cpu-min" in cell
    assert verdict_cell(crit.decide([("a", mean_t([-1.0, -1.1, -0.9]))], "m").to_dict()) == f"**{NOT_REPRODUCED}**"
    failing = dict(crit.decide([("a", mean_t([-1.0, -1.1, -0.9]))], "m").to_dict(), diagnosis="study/diagnosis.md")
    assert verdict_cell(failing) == f"**{NOT_REPRODUCED}** ([diagnosis](study/diagnosis.md))"


def test_every_criterion_has_a_plan_for_each_profile():
    for key, c in CRITERIA.items():
        assert c.plan is not None and c.plan.unit in UNITS, key
        assert {p for p, _ in c.plan.n} == {"tiny", "cpu", "paper"}, key
        assert c.reads and c.evidence, key
        for ref in c.reads:
            source_digest(ref)  # every name it reads exists


@pytest.mark.parametrize("profile", ["cpu", "paper"])
def test_each_profile_runs_every_plan(profile):
    """The profile holds the planned units per arm of each claim (for the run-based claims: the fewest
    pretrainings of an arm), so no n is raised or lowered outside the plan."""
    from priorlab.config import load_params
    from priorlab.studies.runs import pretraining_unit

    root = Path(__file__).resolve().parents[1]
    params = load_params(root / "profiles" / f"{profile}.yaml")
    units = {}
    for run, spec in params.runs.items():
        units.setdefault((spec.group, spec.model, params.setup(spec.setup).latent_dim), set()).add(
            pretraining_unit(params, run))
    smallest = {}
    for (group, _, _), u in units.items():
        smallest[group] = min(smallest.get(group, 10**9), len(u))

    def planned(key):
        return CRITERIA[key].plan.n_for(profile)

    assert smallest["fmvae_experiments/elbo_vs_k"] == planned("001.elbo_rises")
    assert smallest["fmvae_experiments/semi_supervised"] == planned("001.semi_supervised")
    assert smallest["vsc_experiments/smiley"] == planned("002.vsc_beats_beta_vae")
    assert smallest["vsc_experiments/elbo"] == planned("002.vsc_elbo_alpha")
    assert len(params.isa_study.seeds) == planned("004.isa_mig")
    assert len(params.mssc_study.seeds) == planned("000.bars_recovery")
    assert params.sparse_vae_study.datasets_per_rho == planned("003.mse")
    assert params.sparse_vae_study.movielens.splits == planned("003.movielens_nll")
    assert params.sparse_vae_study.single_cell.splits == planned("003.single_cell_accuracy")


# --------------------------------------------------------------------------- fingerprints over code


def test_source_digest_ignores_docstrings_and_comments_but_not_code(tmp_path, monkeypatch):
    ref = "priorlab.studies.fmvae_experiments.claims:SATURATION"
    assert source_digest(ref) == source_digest(ref)
    with pytest.raises(KeyError):
        source_digest("priorlab.studies.fmvae_experiments.claims:NO_SUCH_NAME")


def _copy_package(tmp_path: Path) -> Path:
    src = Path(priorlab.__file__).resolve().parent
    dst = tmp_path / "src" / "priorlab"
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__"))
    return dst


def _stale_in(root: Path) -> str:
    code = ("from priorlab.studies.criteria import CRITERIA, history\n"
            "print(sorted(k for k, c in CRITERIA.items() if history(k)[-1].fingerprint != c.fingerprint()))")
    out = subprocess.run([sys.executable, "-c", code], env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
                         capture_output=True, text=True, check=True)
    return out.stdout.strip()


def test_a_changed_constant_of_a_claim_needs_a_history_entry(tmp_path):
    """Edit SATURATION (read by 001.elbo_saturates) in a copy of the package: that criterion's fingerprint
    no longer matches its latest history entry, so tests/test_criteria.py would fail; a docstring edit
    of the same module changes nothing."""
    pkg = _copy_package(tmp_path)
    claims = pkg / "studies" / "fmvae_experiments" / "claims.py"
    text = claims.read_text()
    assert "SATURATION = 0.25" in text
    claims.write_text(text.replace('"""The fig. 3 claims', '"""Reworded: the fig. 3 claims'))
    assert _stale_in(pkg.parent) == "[]"
    claims.write_text(text.replace("SATURATION = 0.25", "SATURATION = 0.3"))
    assert _stale_in(pkg.parent) == "['001.elbo_saturates']"
    claims.write_text(text.replace('outside=("PCA",)', 'outside=()'))  # not this module: nothing
    sv = pkg / "studies" / "sparse_vae_experiments" / "claims.py"
    sv.write_text(sv.read_text().replace('outside=("PCA",)', 'outside=()'))
    stale = _stale_in(pkg.parent)  # every real-data claim reads decide_real_claims, where the exclusion is
    assert "'003.single_cell_accuracy'" in stale and "001." not in stale and "003.mse" not in stale


# --------------------------------------------------------------------------- held-out folds


def test_heldout_folds_are_disjoint_and_cover_the_rows():
    from priorlab.data.base import heldout_rows

    tests = [heldout_rows(103, 0.2, 0, fold=k)[1] for k in range(5)]
    assert sorted(np.concatenate(tests).tolist()) == list(range(103))  # disjoint, and together every row
    train, test = heldout_rows(103, 0.2, 0, fold=2)
    assert len(test) in (20, 21) and not set(train) & set(test) and len(train) + len(test) == 103
    tr, te = heldout_rows(103, 0.2, 0)  # without a fold: the old random split, one permutation's head
    assert len(te) == 21 and not set(tr) & set(te)
    with pytest.raises(ValueError, match="fold 5 of 5"):
        heldout_rows(103, 0.2, 0, fold=5)


def test_more_folds_than_the_test_fraction_allows_is_a_params_error():
    from priorlab.config import ParamsError, load_params
    import dataclasses

    root = Path(__file__).resolve().parents[1]
    params = load_params(root / "profiles" / "cpu.yaml")
    study = dataclasses.replace(params.sparse_vae_study.movielens, splits=6)
    with pytest.raises(ParamsError, match="at most round"):
        study.check("sparse_vae_study.movielens", params)


def test_missing_units_are_priced_from_the_measured_walls(tmp_path):
    from priorlab.io import write_json
    from priorlab.report import missing_units_cost, stage_walls

    write_json(tmp_path / "t.json", {
        "latest": "a", "supplement": "b",
        "a": {"stages": {"train@m-x-0": {"wall_s": 60.0}, "train@m-x-1": {"wall_s": 60.0}, "other": {"wall_s": 1e4}}},
        "b": {"wall_ratio_to_latest": 2.0, "stages": {"train@m-x-0": {"wall_s": 999.0}, "train@m-x-2": {"wall_s": 120.0}}}})
    walls = stage_walls(tmp_path / "t.json")
    assert walls == {"train@m-x-0": 60.0, "train@m-x-1": 60.0, "other": 1e4, "train@m-x-2": 60.0}
    claim = {"key": "k/s", "criterion_key": "k", "n_to_decide": 7, "evidence": ["train@m-x-*"],
             "planned_n": {"paper": 5}, "parts": [{"n": 3}, {"n": 3}]}
    assert missing_units_cost(claim, walls, {"k": 10.0}) == "+4 units: ≈ 4 cpu-min, ≈ 8.0 GPU-h"
    assert missing_units_cost({**claim, "n_to_decide": 4}, walls, {}) == "+1 units: ≈ 1 cpu-min"
    cheap = {"train@m-x-0": 6.0, "train@m-x-1": 6.0, "train@m-x-2": 6.0}
    assert missing_units_cost({**claim, "n_to_decide": 4}, cheap, {}) == "+1 units: ≈ 0.1 cpu-min"  # never "≈ 0"
    assert missing_units_cost({**claim, "n_to_decide": 103}, walls, {}) == "+100 units: ≈ 100 cpu-min"
    assert missing_units_cost({**claim, "n_to_decide": None}, walls, {}) == ""
    assert stage_walls(tmp_path / "missing.json") == {}


# --------------------------------------------------------------------------- published worked examples

SLEEP_1 = [0.7, -1.6, -0.2, -1.2, -0.1, 3.4, 3.7, 0.8, 0.0, 2.0]  # Student's sleep data (R datasets::sleep)
SLEEP_2 = [1.9, 0.8, 1.1, 0.1, -0.1, 4.4, 5.5, 1.6, 4.6, 3.4]


@pytest.mark.parametrize("k, n, expected", [(81, 263, (0.2553, 0.3662)), (15, 148, (0.0624, 0.1605)),
                                            (0, 20, (0.0, 0.1611)), (1, 29, (0.0061, 0.1718))])
def test_wilson_against_newcombe_1998a_table_1(k, n, expected):
    from priorlab.studies.intervals import wilson

    assert tuple(round(x, 4) for x in wilson(k, n)) == expected


@pytest.mark.parametrize("k, n, expected", [(81, 263, (0.2527, 0.3676)), (15, 148, (0.0578, 0.1617)),
                                            (0, 20, (0.0, 0.1684)), (1, 29, (0.0009, 0.1776))])
def test_clopper_pearson_against_newcombe_1998a_table_1(k, n, expected):
    from priorlab.studies.intervals import clopper_pearson

    e = clopper_pearson(k, n)
    assert (round(e.low, 4), round(e.high, 4)) == expected


def test_clopper_pearson_against_rs_binom_test_example():
    from priorlab.studies.intervals import clopper_pearson

    e = clopper_pearson(682, 925)  # R's ?binom.test example, saved output: 0.7076683 0.7654066
    assert e.low == pytest.approx(0.7076683, abs=5e-8) and e.high == pytest.approx(0.7654066, abs=5e-8)


@pytest.mark.parametrize("k1, n1, k2, n2, expected", [(56, 70, 48, 80, (0.0524, 0.3339)),
                                                      (9, 10, 3, 10, (0.1705, 0.8090)),
                                                      (5, 56, 0, 29, (-0.0381, 0.1926))])
def test_newcombe_independent_against_newcombe_1998b_table_2(k1, n1, k2, n2, expected):
    from priorlab.studies.intervals import newcombe_difference

    e = newcombe_difference(k1, n1, k2, n2)
    assert (round(e.low, 4), round(e.high, 4)) == expected


def test_welch_against_rs_t_test_examples():
    """R's saved ?t.test output: the sleep groups as independent samples (df 17.776) and 1:10 vs 7:20."""
    e = welch_difference(SLEEP_1, SLEEP_2)
    assert (e.low, e.high) == pytest.approx((-3.3654832, 0.2054832), abs=5e-8)
    e = welch_difference(list(range(1, 11)), list(range(7, 21)))
    assert (e.low, e.high) == pytest.approx((-11.052802, -4.947198), abs=5e-7)


def test_paired_and_one_sample_t_against_rs_sleep_examples():
    from priorlab.studies.intervals import paired_difference

    e = paired_difference(SLEEP_1, SLEEP_2)  # R: t.test(..., paired = TRUE): -1.58, df 9
    assert e.value == pytest.approx(-1.58) and (e.low, e.high) == pytest.approx((-2.4598858, -0.7001142), abs=5e-8)
    e = mean_t(SLEEP_1 + SLEEP_2)  # one sample of all 20, df 19
    assert (e.low, e.high) == pytest.approx((0.5955845, 2.4844155), abs=5e-8)


def test_a_count_whose_unit_means_coincide_keeps_the_seeds_spread():
    """issue 42: used latents 17, 13 | 16, 14 | 15 on three pretrainings have unit means 15, 15, 15, and a
    t interval over them of width 0. The nested mean floors the unit means' variance at the seeds' share,
    s_w² · mean(1/m) = 5 · 2/3, on k − 1 = 2 df; where the units differ more, it is the t over unit means."""
    from scipy import stats

    from priorlab.studies.intervals import nested_mean

    units = ["a", "a", "b", "b", "c"]
    est = nested_mean([17, 13, 16, 14, 15], units)
    assert mean_t(unit_means([17, 13, 16, 14, 15], units)).high == 15.0  # the degenerate interval
    h = stats.t.ppf(0.975, 2) * np.sqrt(5 * (2 / 3) / 3)
    assert est.value == 15.0 and est.low == pytest.approx(15 - h) and est.high == pytest.approx(15 + h)
    assert est.n == 3 and "floored" in est.method
    spread = nested_mean([10, 11, 20, 21, 30], units)  # between-unit spread dominates: plain t over unit means
    plain = mean_t(unit_means([10, 11, 20, 21, 30], units))
    assert (spread.low, spread.high) == (plain.low, plain.high)
    assert nested_mean([1.0, 2.0, 3.0], ["a", "b", "c"]).high == mean_t([1.0, 2.0, 3.0]).high  # one seed each
    with pytest.raises(ValueError, match="unit labels"):
        nested_mean([1.0, 2.0], ["a"])
    rng = np.random.default_rng(1)  # no pretraining effect: the floored interval keeps at least its 95 %
    covered = 0
    for _ in range(2000):
        e = nested_mean(rng.normal(0.0, 1.0, 6), ["a", "a", "b", "b", "c", "c"])
        covered += e.low <= 0.0 <= e.high
    assert covered / 2000 >= 0.95
