"""The cross-prior benchmark (issue 45): its params, its scores, and on the tiny profile's serial run its
tables, its reuse of paper 004's models (read, not retrained: the same model the benchmark would train)
and a prior added by one entry."""

from __future__ import annotations

import copy
import dataclasses
import json
import re
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from priorlab.config import ParamsError, parse_params
from priorlab.studies.benchmark.scores import zero_share
from tests.tiny_pipeline import dvc, param_texts, read_params, restore_params, sh, write_params

ROOT = Path(__file__).resolve().parents[1]


def tiny_raw() -> dict:
    return yaml.safe_load((ROOT / "profiles" / "tiny.yaml").read_text())


@pytest.mark.parametrize("change, message", [
    (lambda b: b["priors"].update(bad={"model": "mssc_bars"}), "fitted by EM"),
    (lambda b: b["priors"]["vsc"].update(strength=2.0), "strength"),
    (lambda b: b.update(seeds=[0]), "at least 2 seeds"),
    (lambda b: b.update(setups=["dsprites", "nowhere"]), "benchmark.setups[1]"),
    (lambda b: b["train"].update(batch_size=5000), "training points"),
    (lambda b: b["synthetic"].update(rhos=[0.4, 1.0]), "benchmark.synthetic.rhos[1] must be in (-1, 1)"),
    (lambda b: b["synthetic"].update(datasets_per_rho=1), "benchmark.synthetic.datasets_per_rho: 1; at least 2"),
    (lambda b: b["priors"]["vae"].update(setup_models={"nowhere": "isa_beta_vae"}), "benchmark.priors.vae.setup_models"),
    (lambda b: b["priors"]["vae"].update(setup_models={"smiley": "vsc_smiley"}), "one row, one prior"),
])
def test_bad_benchmark_params_are_refused_in_one_message(change, message):
    raw = copy.deepcopy(tiny_raw())
    change(raw["benchmark"])
    with pytest.raises(ParamsError, match=re.escape(message)):
        parse_params(raw)


def test_a_row_trains_its_setup_model_where_one_is_named_and_its_model_elsewhere():
    """``setup_models``: the ISA-VAE's layout must tile each setup's latents, so its row names another
    entry of the same kind and prior kind per setup (and ``synthetic`` for paper 003's table)."""
    from priorlab.studies.benchmark.fit import prior_spec

    raw = copy.deepcopy(tiny_raw())
    raw["models"]["isa_vae_wide"] = {**raw["models"]["isa_beta_vae"], "beta": 3.0, "train_steps": 7}
    raw["benchmark"]["priors"]["vae"]["setup_models"] = {"smiley": "isa_vae_wide", "synthetic": "isa_vae_wide"}
    params = parse_params(raw)
    assert prior_spec(params, "vae", "smiley").beta == 1.0  # strength 1 is the row's, whatever the entry says
    assert prior_spec(params, "vae", "smiley").train_steps == 7 != prior_spec(params, "vae", "dsprites").train_steps
    assert prior_spec(params, "vae", "smiley") == dataclasses.replace(
        params.model("isa_vae_wide"), warm_start="scratch", beta=1.0)
    assert prior_spec(params, "vae", "dsprites") == dataclasses.replace(
        params.model("isa_beta_vae"), warm_start="scratch", beta=1.0)
    entry = params.benchmark.priors["vae"]
    assert [entry.model_for(s) for s in ("dsprites", "smiley", "synthetic")] == ["isa_beta_vae", "isa_vae_wide",
                                                                                 "isa_vae_wide"]


def test_zero_share_counts_near_zero_coordinates_per_observation():
    codes = np.array([[0.0, 0.05, 1.0, -2.0], [0.2, -0.1, 0.0, 3.0]])
    assert zero_share(codes, 0.1) == pytest.approx(4 / 8)  # |z| <= 0.1: 0, 0.05 of row 1; -0.1, 0 of row 2
    assert zero_share(codes, 0.0) == pytest.approx(2 / 8)
    with pytest.raises(ValueError, match="threshold"):
        zero_share(codes, -1.0)
    with pytest.raises(ValueError, match=r"\[N, D\]"):
        zero_share(np.zeros(3), 0.1)


def test_a_prior_whose_elbo_exceeds_its_iw_bound_is_left_out_of_the_likelihood_comparison():
    from types import SimpleNamespace

    from priorlab.studies.benchmark.report import summary_sentences
    from priorlab.studies.intervals import mean_t

    est = {("d", "vae", "elbo"): mean_t([-52.0, -51.5, -53.0]), ("d", "vae", "iw_ll"): mean_t([-47.6, -47.7, -48.5]),
           ("d", "fm", "elbo"): mean_t([-50.0, -50.5, -51.0]), ("d", "fm", "iw_ll"): mean_t([-44.0, -44.5, -44.6]),
           ("d", "vsc", "elbo"): mean_t([-30.2, -31.0, -30.5]), ("d", "vsc", "iw_ll"): mean_t([-9e7, -3e7, -2e7])}
    params = SimpleNamespace(benchmark=SimpleNamespace(label=str, sparsity_threshold=0.1))
    text = "\n".join(summary_sentences(params, est, "d"))
    assert "- vsc: the test ELBO lies above" in text
    assert "test ELBO: **fm** has the highest mean" in text and "log p(x) (IW): **fm**" in text
    assert "vsc is not separated" not in text and "**vsc**" not in text


def test_a_synthetic_row_read_from_paper_003_is_the_row_the_benchmark_would_fit(tmp_path, monkeypatch):
    """Paper 003's study fits a VAE of the benchmark's VAE settings on the same synthetic data sets: the
    benchmark's plan reads its rows (origin: the sparse_vae_fit cell), and fitting the prior the
    benchmark's way gives the same numbers; a prior the study does not fit is trained, and one whose
    model cannot be built on these nets is a not-run row with the reason."""
    from priorlab import paths
    from priorlab.io import write_json
    from priorlab.studies.benchmark import synthetic
    from priorlab.studies.sparse_vae_experiments.fit import cell_dir, rho_rows

    raw = copy.deepcopy(tiny_raw())
    raw["sparse_vae_study"].update(models=["isa_beta_vae"], rhos=[0.4], datasets_per_rho=2, variant_datasets_per_rho=0)
    raw["benchmark"]["priors"] = {"vae": {"model": "isa_beta_vae", "strength": 1},
                                  "beta_vae": {"model": "isa_beta_vae", "strength": 3},
                                  "isa_vae": {"model": "isa_vae"}}
    raw["benchmark"]["synthetic"] = {"rhos": [0.4], "datasets_per_rho": 2}
    raw["sparse_vae_study"]["latent_dim"] = 3  # the ISA layout's 10 latents do not fit: its row is not run
    params = parse_params(raw)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(paths, "CHECKPOINTS", tmp_path / "checkpoints")
    rows, _, _ = rho_rows(params, 0.4)
    write_json(cell_dir(0.4) / "rows.json", {"rows": rows})

    plan = synthetic.plan_record(params, "vae")
    assert sorted(plan["reuse"]) == ["0.4/0", "0.4/1"]
    assert {r["origin"] for r in plan["reuse"].values()} == {"sparse_vae_fit@0.4"}
    assert synthetic.plan_record(params, "beta_vae")["reuse"] == {}  # another beta: fitted by the benchmark
    read = synthetic.cell_rows(params, "vae")
    monkeypatch.setattr(synthetic, "reused_rows", lambda params, prior: {})
    fitted = synthetic.cell_rows(params, "vae")
    assert [r["origin"] for r in fitted] == ["trained", "trained"]
    for a, b in zip(read, fitted):
        assert {k: a[k] for k in synthetic.SCORES if k in a} == {k: b[k] for k in synthetic.SCORES if k in b}
    assert set(read[0]) >= {"mse", "dci_d", "active_columns", "collapsed"}
    [skipped] = synthetic.cell_rows(params, "isa_vae")
    assert skipped["origin"] == "not_run" and "latents" in skipped["reason"]

    est = synthetic.estimates(read + [skipped])
    assert est[(0.4, "vae", "mse")].n == 2 and est[(0.4, "vae", "collapsed")].method == "Clopper–Pearson"
    assert not any(p == "isa_vae" for _, p, _ in est)


def test_a_cell_whose_measured_training_is_above_the_cap_is_a_not_run_row_with_its_cost(tmp_path, monkeypatch):
    """``benchmark.max_train_s``: a cell's trained seeds × steps × the measured s/step above the cap is not
    run, and its plan and row say what it would cost; a cell under it, an unmeasured one and any cell without
    a cap keep the plan they had (so a new measurement reruns only the cells it moves across the cap)."""
    from priorlab.io import write_json
    from priorlab.studies.benchmark import fit, speed

    raw = copy.deepcopy(tiny_raw())
    raw["benchmark"]["priors"] = {"vae": {"model": "isa_beta_vae", "strength": 1}, "vsc": {"model": "vsc_smiley"}}
    steps, seeds = raw["benchmark"]["train"]["steps"], len(raw["benchmark"]["seeds"])
    batch = raw["benchmark"]["train"]["batch_size"]
    monkeypatch.chdir(tmp_path)
    for name in ("dsprites", "smiley"):
        write_json(Path("data") / name / "manifest.json", {"name": name})
    write_json(Path("folder") / "tiny.json", {"machine": "m", "tables": {"smiley": {"batch_size": batch, "priors": {
        "vae": {"s_per_step": 0.01}, "vsc": {"s_per_step": 2.0, "ratio_to_vae": 200.0}}}}})
    monkeypatch.setattr(fit, "read_speed", lambda params: speed.read_speed(params, Path("folder")))
    uncapped = parse_params(raw)
    raw["benchmark"]["max_train_s"] = seeds * steps * 1.0  # between the VAE's cost and VSC's
    capped = parse_params(raw)
    plan = fit.plan_record(capped, "smiley", "vsc")
    assert plan["not_run"] == (f"measured 2.00 s a training step at batch {capped.benchmark.train.batch_size} (200× the "
                               f"VAE's) on m: {seeds} seeds × {steps} steps ≈ {seeds * steps * 2 / 60:.3g} cpu-min, above "
                               f"benchmark.max_train_s ({seeds * steps / 60:.3g} min a cell)")
    assert {k: v for k, v in plan.items() if k != "not_run"} == fit.plan_record(uncapped, "smiley", "vsc")
    assert fit.plan_record(capped, "smiley", "vae") == fit.plan_record(uncapped, "smiley", "vae")  # under the cap
    assert "not_run" not in fit.plan_record(capped, "dsprites", "vsc")  # not measured there: it runs
    from types import SimpleNamespace

    from priorlab import phases
    monkeypatch.setattr(phases, "load_setup_data", lambda params, setup: SimpleNamespace(obs_shape=(1, 8, 8)))
    [row] = fit.cell_rows(capped, "smiley", "vsc", tmp_path / "out", torch.device("cpu"), capped=plan["not_run"])
    assert row["origin"] == "not_run" and row["reason"] == plan["not_run"] and row["seed"] is None
    assert not (tmp_path / "out").exists()  # nothing trained
    raw["benchmark"]["train"]["batch_size"] += 1  # not the batch the file timed: no price, one clear message
    with pytest.raises(ParamsError, match=rf"timed smiley's steps at batch {batch}; the benchmark trains at batch {batch + 1}"):
        fit.plan_record(parse_params(raw), "smiley", "vsc")
    raw["benchmark"]["max_train_s"] = 0
    with pytest.raises(ParamsError, match="max_train_s: 0.0 is not positive"):
        parse_params(raw)


# --------------------------------------------------------------------------- on the tiny profile's serial run


@pytest.fixture
def project(tiny_serial) -> Path:
    return tiny_serial.path


@pytest.mark.slow
def test_tables_have_a_row_per_prior_and_the_data_sets_scores(project):
    params = read_params(project)["benchmark"]
    text = (project / "reports" / "benchmark" / "README.md").read_text()
    labels = [p["label"] for p in params["priors"].values()]
    for setup in params["setups"]:
        section = text.split(f"## {setup}\n")[1].split("\n## ")[0]
        table = [line for line in section.splitlines() if line.startswith("| ")]
        header, body = table[0], table[1:]
        assert [row.split(" | ")[0].lstrip("| ") for row in body] == labels
        assert all(row.split(" | ")[1] == str(len(params["seeds"])) for row in body)  # n: every seed
        for title in ("test ELBO", "log p(x) (IW)", "active dims", "MIG", "zeros per input"):
            assert title in header, (setup, header)
        assert ("corr. contrast" in header) == (setup == "smiley")  # paper 002's sources: Smiley only
        assert re.search(r"\*\*.+\*\* has the highest mean", section)  # the generated summary
        assert (project / "reports" / "benchmark" / f"dots_{setup}.png").is_file()
        shown = {p.stem: json.loads(p.read_text()) for p in (project / "metrics" / "benchmark" / setup).glob("*.json")}
        assert set(shown) == set(params["priors"]) and all("elbo" in v and "sparsity" in v for v in shown.values())
    assert (project / "reports" / "benchmark" / "trade_off.png").is_file()
    synthetic = text.split("## Paper 003's synthetic data")[1].split("\n## ")[0]
    for rho in params["synthetic"]["rhos"]:
        section = synthetic.split(f"### ρ = {rho:g}\n")[1].split("\n### ")[0]
        body = [line for line in section.splitlines() if line.startswith("| ")][1:]
        assert [row.split(" | ")[0].lstrip("| ") for row in body] == labels
        assert all(row.split(" | ")[1] == str(params["synthetic"]["datasets_per_rho"]) or "not run" in row
                   for row in body)
        assert "held-out MSE" in section and re.search(r"\*\*.+\*\* is best", section)
    assert (project / "metrics" / "benchmark" / f"synthetic_rho{params['synthetic']['rhos'][0]:g}").is_dir()
    # no cell chose anything on data: every row's strength is its params entry's, none carries a selection
    for path in [*(project / "models" / "benchmark").glob("*/*/rows.json"),
                 *(project / "models" / "benchmark_synthetic").glob("*/rows.json")]:
        for row in json.loads(path.read_text())["rows"]:
            assert "selection" not in row and "validation_mse" not in row, path
            if "strength" in row:
                assert row["strength"] == params["priors"][row["prior"]].get("strength"), path


@pytest.mark.slow
def test_a_reused_model_is_read_and_is_the_model_the_benchmark_would_train(project, monkeypatch, tmp_path):
    """The VAE row on dSprites at seed 0 is paper 004's isa_fit@isa_beta_vae-0 model at beta 1 (the same
    training): its row names that stage, and training it the benchmark's way gives the same weights."""
    from priorlab import paths
    from priorlab.cli import thread_limits
    from priorlab.config import load_params
    from priorlab.io import load_torch
    from priorlab.phases import load_setup_data
    from priorlab.studies.benchmark.fit import prior_spec, reused_model, train

    rows = json.loads((project / "models" / "benchmark" / "dsprites" / "vae" / "rows.json").read_text())["rows"]
    assert [r["origin"] for r in rows] == ["isa_fit@isa_beta_vae-0", "trained"]  # isa_study.seeds: [0]
    monkeypatch.chdir(project)
    monkeypatch.setattr(paths, "CHECKPOINTS", tmp_path)
    params = load_params()
    spec = prior_spec(params, "vae", "dsprites")
    stage, path = reused_model(params, "dsprites", spec, 0)
    assert stage == "isa_fit@isa_beta_vae-0"
    data = load_setup_data(params, "dsprites")
    with thread_limits(params.threads):  # as the stages ran (conv nets' results depend on the thread count)
        ours = train(params, "vae", "dsprites", spec, 0, data, torch.device("cpu")).state_dict()
    theirs = load_torch(path)["state_dict"]
    assert ours.keys() == theirs.keys()
    assert all(torch.equal(ours[k], theirs[k]) for k in ours)
    assert reused_model(params, "smiley", spec, 0) is None  # not paper 004's setup


@pytest.mark.slow
def test_a_prior_added_by_one_entry_trains_only_its_cells_and_gets_its_row(project):
    original = param_texts(project)
    try:
        params = read_params(project)
        params["benchmark"]["priors"]["beta_vae"] = {"model": "beta_vae", "label": "β-VAE"}  # one entry
        write_params(project, params)
        status = set(json.loads(dvc(project, "status", "--json").stdout))
        cells = {f"benchmark_fit@{setup}-beta_vae" for setup in params["benchmark"]["setups"]} | {
            "benchmark_synthetic@beta_vae"}
        assert status == cells | {"benchmark_plan", "benchmark"}, status  # no isa_fit, no other cell, no claim
        proc = sh(project, sys.executable, "-m", "stagerun.repro", "-j", "2", "benchmark")
        ran = set(re.findall(r"running (\S+):", proc.stdout))
        assert ran == cells | {"benchmark_plan", "benchmark"}, ran  # the plan's other files are byte-identical
        text = (project / "reports" / "benchmark" / "README.md").read_text()
        assert all(section.count("\n| β-VAE | 2 |") == 1 for section in text.split("\n## ")[2:4])
    finally:
        restore_params(original)
        for setup in read_params(project)["benchmark"]["setups"]:
            shutil.rmtree(project / "models" / "benchmark" / setup / "beta_vae", ignore_errors=True)
        sh(project, "git", "checkout", "-q", "--", ".")
        sh(project, "git", "clean", "-fdq", "--", "metrics", "reports")  # the new row's metrics files (in git)
        dvc(project, "checkout", "-q")
    assert "up to date" in dvc(project, "status").stdout
