"""Paper 004's dSprites study: the grid, the claim criterion, A.5's representative, MIG without shape,
the study's params checks and one tiny end-to-end run of the stage."""

from __future__ import annotations

import copy

import numpy as np
import pandas as pd
import pytest
import yaml

from priorlab.config import ParamsError, parse_params
from priorlab.errors import UserError
from priorlab.studies.isa_experiments.aggregate import results_table, study_frame
from priorlab.studies.isa_experiments.claims import CLAIM_SCORE, mig_claim, representative, representatives
from priorlab.studies.isa_experiments.fit import SCORES, label, study_runs
from priorlab.studies.isa_experiments.report import run_isa_experiments
from priorlab.metric_registry import METRICS, SampledFactors
from priorlab.metrics import mig

LP = {"kind": "lp_nested", "p0": 2.1, "subspaces": [[2.2, 2], [2.2, 2]], "lr": 0.0005}


def raw_params(steps: int = 30) -> dict:
    raw = yaml.safe_load(open("profiles/tiny.yaml"))
    raw["setups"]["dsp_isa"] = {"dataset": "dsprites", "latent_dim": 4, "hidden": [32], "pretraining": False}
    raw["models"].update({
        "bvae": {"kind": "vae", "warm_start": "scratch"}, "isa": {"kind": "vae", "warm_start": "scratch", "prior": LP},
        "tc": {"kind": "beta_tcvae", "warm_start": "scratch", "prior": LP},
        "fvae": {"kind": "factor_vae", "warm_start": "scratch", "discriminator_hidden": [16]}})
    raw["isa_study"] = {"setup": "dsp_isa", "models": ["bvae", "isa", "tc", "fvae"], "betas": [1, 2], "gammas": [3],
                        "seeds": [0], "train": {"steps": steps, "batch_size": 32, "lr": 0.001},
                        "evaluate": {"n_eval": 100, "iw_samples": 2, "metric_num_train": 200, "metric_num_test": 100,
                                     "metrics": ["mig", "mig_no_shape"]},
                        "mig_chen": {"n_points": 300, "n_samples": 200, "permutations": 2}}
    return raw


def test_grid_sets_beta_tc_weight_or_gamma_by_kind():
    runs = study_runs(parse_params(raw_params()))
    assert [r.name for r in runs] == ["bvae-1-0", "bvae-2-0", "isa-1-0", "isa-2-0", "tc-1-0", "tc-2-0", "fvae-3-0"]
    by = {r.name: r.spec for r in runs}
    assert by["isa-2-0"].beta == 2.0 and by["isa-2-0"].prior.kind == "lp_nested"
    assert by["tc-2-0"].tc_weight == 2.0 and by["tc-2-0"].beta == 1.0  # (ISA-)β-TCVAE: β weights the TC term
    assert by["fvae-3-0"].gamma == 3.0 and by["fvae-3-0"].beta == 1.0
    assert [label(by[n]) for n in ("bvae-1-0", "isa-1-0", "tc-1-0", "fvae-3-0")] == [
        "β-VAE", "ISA-VAE", "ISA-β-TCVAE", "FactorVAE"]


def test_study_params_are_checked():
    for change, match in (({"setup": "nope"}, "isa_study.setup"), ({"models": ["vae", "ppca"]}, "its kind"),
                          ({"betas": []}, "betas"), ({"seeds": [-1]}, "seeds")):
        raw = raw_params()
        raw["isa_study"].update(change)
        with pytest.raises(ParamsError, match=match):
            parse_params(raw)
    raw = raw_params()
    raw["isa_study"]["evaluate"]["metrics"] = ["mig", "migg"]
    with pytest.raises(ParamsError, match="metrics"):
        parse_params(raw)


def test_a_strength_grid_is_given_exactly_when_a_model_trains_on_it():
    """A grid no study model reads must be empty (the settings table shows what runs, not a stale name);
    one a model reads must not be."""
    raw = raw_params()
    raw["isa_study"].update({"models": ["bvae", "isa"], "gammas": [3]})  # no FactorVAE: its γ grid is read by none
    with pytest.raises(ParamsError, match=r"isa_study.gammas is read by no models entry .*factor_vae.*set it to \[\]"):
        parse_params(raw)
    raw["isa_study"]["gammas"] = []
    assert parse_params(raw).isa_study.gammas == []
    raw = raw_params()
    raw["isa_study"].update({"models": ["fvae"], "betas": [1]})  # FactorVAE alone: no β grid
    with pytest.raises(ParamsError, match="isa_study.betas is read by no models entry"):
        parse_params(raw)
    raw["isa_study"]["betas"] = []
    parse_params(raw)
    raw["isa_study"]["gammas"] = []
    with pytest.raises(ParamsError, match="isa_study.gammas must not be empty"):
        parse_params(raw)


def frame(isa: dict, bvae: dict, seeds: int = 3, floor: float = 0.005) -> pd.DataFrame:
    rows = []
    for lab, migs in (("ISA-VAE", isa), ("β-VAE", bvae)):
        for b, m in migs.items():
            rows += [{"label": lab, "strength": b, "seed": s, CLAIM_SCORE: m + 0.001 * s,
                      "chen_floor": floor + 0.001 * s} for s in range(seeds)]
    return pd.DataFrame(rows)


def test_claim_criterion():
    R, N, I, U = "reproduced", "not reproduced", "inconclusive", "untestable"
    assert mig_claim(frame({1.0: 0.20, 2.0: 0.41}, {1.0: 0.14, 2.0: 0.28})).verdict == R
    assert mig_claim(frame({1.0: 0.20, 2.0: 0.285}, {1.0: 0.14, 2.0: 0.28})).verdict == N  # a tie at β = 2
    assert mig_claim(frame({1.0: 0.10, 2.0: 0.41}, {1.0: 0.14, 2.0: 0.28})).verdict == N
    assert mig_claim(frame({1.0: 0.20, 2.0: 0.41}, {1.0: 0.14, 2.0: 0.28}, seeds=1)).verdict == I  # one seed
    # small scores are decided when the measured floor is lower still ...
    low = mig_claim(frame({1.0: 0.05, 2.0: 0.06}, {1.0: 0.01, 2.0: 0.02}, floor=0.002))
    assert low.verdict == R and "noise floor 0.004" in low.measured
    # ... and untestable when, at some β, both medians sit at or below it (the largest floor there)
    near_zero = mig_claim(frame({1.0: 0.03, 2.0: 0.06}, {1.0: 0.01, 2.0: 0.02}, floor=0.03))
    assert near_zero.verdict == U and "β=1" in near_zero.reason and "β=2" not in near_zero.reason
    missing = mig_claim(frame({1.0: 0.3}, {1.0: 0.1}))  # no β = 2 runs
    assert missing.verdict == I and "β = 2" in missing.measured


def test_representatives_sit_beside_the_median_per_claim_beta():
    f = frame({1.0: 0.20, 2.0: 0.41}, {1.0: 0.14, 2.0: 0.28}, seeds=3)
    f["kind"] = "vae"
    f = pd.concat([f, f.iloc[:3].assign(label="FactorVAE", kind="factor_vae")], ignore_index=True)  # γ = 1: not a β
    f["run"] = [f"r{i}" for i in range(len(f))]
    f["recon_log_lik"] = -30.0 - np.arange(len(f)) % 3
    reps = representatives(f)
    assert len(reps) == 4 and set(reps["model"]) == {"ISA-VAE", "β-VAE"}
    row = reps[(reps["model"] == "ISA-VAE") & (reps["β / γ"] == 2.0)].iloc[0]
    assert row[f"{CLAIM_SCORE} (median)"] == pytest.approx(0.411)
    assert row[f"{CLAIM_SCORE} (representative)"] in (pytest.approx(0.411), pytest.approx(0.412))


def test_representative_is_the_upper_half_run_nearest_its_mean():
    f = pd.DataFrame({"run": list("abcdef"), "mig": [0.0, 0.05, 0.4, 0.5, 0.6, 0.1],
                      "recon_log_lik": [-30, -31, -40, -41, -42, -29]})
    assert representative(f)["run"] == "d"  # upper half: c, d, e; d sits at their mean


def test_mig_without_shape_is_mig_over_the_other_factors():
    rs = np.random.RandomState(0)
    factors = np.stack([rs.randint(0, 3, 2000), rs.randint(0, 6, 2000), rs.randint(0, 5, 2000)], 1)
    codes = factors[:, [1, 0, 2]] + 0.3 * rs.randn(2000, 3)
    codes[:, 1] = rs.randn(2000)  # the shape factor (column 0) is not coded

    class Data:
        factor_names = ("shape", "scale", "posX")

    s = SampledFactors(Data(), None, parse_params(raw_params()).evaluate, rs, factors, codes, factors, codes)
    out = METRICS["mig_no_shape"].compute(s)["mig_no_shape"]
    assert out == pytest.approx(mig(codes, factors[:, 1:]))
    assert out > METRICS["mig"].compute(s)["mig"] + 0.2  # dropping the uncoded shape raises MIG
    Data.factor_names = ("a", "b", "c")
    with pytest.raises(ValueError, match="shape"):
        METRICS["mig_no_shape"].compute(s)


@pytest.mark.slow
def test_cells_train_and_score_and_the_study_aggregates_them(tmp_path, monkeypatch):
    from priorlab.studies.isa_experiments import fit as isa_fit
    from priorlab.pipeline import run_data

    raw = raw_params()
    raw["isa_study"]["models"] = ["bvae", "isa", "fvae"]
    monkeypatch.chdir(tmp_path)
    params = parse_params(copy.deepcopy(raw))
    run_data(params, "dsprites")
    with pytest.raises(UserError, match="isa_fit@bvae-0 has not run"):
        run_isa_experiments(params)
    with pytest.raises(ParamsError, match="no cell 'bvae-7'"):
        isa_fit.run_isa_fit(params, "bvae", "7")
    for model in ("bvae", "isa", "fvae"):
        isa_fit.run_isa_fit(params, model, "0")
    cell = tmp_path / "models" / "isa_experiments" / "bvae-0"
    assert sorted(p.name for p in cell.iterdir()) == ["1", "2", "rows.json"] and (cell / "2" / "model.pt").is_file()
    mdir = tmp_path / "metrics" / "isa_experiments" / "bvae-0"
    assert sorted(p.name for p in mdir.iterdir()) == ["beta-1.json", "beta-2.json"]  # a file per strength
    metrics = yaml.safe_load((mdir / "beta-1.json").read_text())
    assert set(metrics) >= {"mig", "mig_no_shape", "chen_mig_no_shape", "chen_floor"}
    summary = run_isa_experiments(params)
    assert summary["paper"] == "004" and summary["title"] and len(summary["claims"]) == 1
    assert summary["device"] == "cpu"
    assert [r["run"] for r in summary["runs"]] == ["bvae-1-0", "bvae-2-0", "isa-1-0", "isa-2-0", "fvae-3-0"]
    for r in summary["runs"]:
        assert 0.0 <= r["mig"] <= 1.0 and 0.0 <= r["mig_no_shape"] <= 1.0 and r["recon_log_lik"] < 0
        assert -0.1 < r["chen_mig_no_shape"] <= 1.0 and -0.1 < r["chen_floor"] < 1.0
        assert (r["exponents"] is not None) == r["run"].startswith("isa")
    exps = summary["runs"][2]["exponents"]
    assert exps["p0"] != pytest.approx(2.1, abs=1e-7) and all(p > 1 for p in exps["p_sub"])  # learned, kept > 1
    out = tmp_path / "reports" / "isa_experiments"
    readme = (out / "README.md").read_text()
    assert "noise floor" in readme and "representative run" in readme and "chen_mig_no_shape" in readme
    for f in ("README.md", "results.csv", "summary.json", "mig_vs_beta.png", "chen_mig_no_shape_vs_beta.png", "exponents.png",
              "mig_vs_reconstruction.png", "latents_bvae.png", "latents_isa.png", "latents_fvae.png"):
        assert (out / f).is_file(), f
    # same params and seeds, a fresh process state: the same numbers (clear the resumable checkpoints)
    import shutil

    shutil.rmtree(tmp_path / ".checkpoints", ignore_errors=True)
    isa_fit.run_isa_fit(parse_params(copy.deepcopy(raw)), "isa", "0")
    again = run_isa_experiments(parse_params(copy.deepcopy(raw)))
    assert [r["mig"] for r in again["runs"]] == [r["mig"] for r in summary["runs"]]


def test_results_csv_is_the_same_for_a_fresh_and_a_read_back_row():
    import json

    row = {"run": "isa_vae-1-0", "model": "isa_vae", "label": "ISA-VAE", "kind": "vae", "strength": 1.0, "seed": 0,
           "train_s": 3.0, "eval_s": 1.0, "exponents": {"p0": 2.1}, "model_params": {}, "metrics": {},
           "responses": [], **{k: 0.1 * i for i, k in enumerate(SCORES)}}
    cached = json.loads(json.dumps(row, sort_keys=True))  # what the cell's rows.json gives back (write_json sorts)
    assert list(cached) != list(row)
    fresh_csv = results_table(study_frame([row])).to_csv(index=False)
    assert results_table(study_frame([cached])).to_csv(index=False) == fresh_csv
    assert fresh_csv.splitlines()[0] == "run,model,label,kind,strength,seed," + ",".join(SCORES)
