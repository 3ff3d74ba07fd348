"""The GPU benchmark (priorlab.gpu_bench, benchmarks/gpu_bench.py): what the GPU-hours estimate counts,
and a --tiny dry run on the CPU in a process where dvc and dvclive cannot be imported (as on the GPU
machine), writing every section."""

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import gpu_bench
from priorlab.config import load_params
from tests.helpers import run_without_dvc

ROOT = Path(__file__).resolve().parents[1]


def test_paper_work_counts_every_run_and_pretraining_once():
    params = gpu_bench.load_profile()
    work = gpu_bench.paper_work(params)
    assert sum(w["runs"] for w in work.values()) == len(params.runs) == sum(w["evaluations"] for w in work.values())
    steps = sum((params.model(r.model).train_steps or params.train.steps) for r in params.runs.values())
    used = {r.setup for r in params.runs.values() if params.setup(r.setup).pretraining}
    pre = sum(params.model(params.setup(s).pretrain_model).pretrain_steps or params.pretrain.steps for s in used)
    assert sum(w["steps"] for w in work.values()) == steps + pre == steps + sum(w["pretrain_steps"] for w in work.values())
    # beta does not change a step's cost: the beta-VAE runs of one setup share a key with its VAE
    key = gpu_bench.cost_key
    assert key(params, "smiley18", params.model("smiley_beta_vae_b4"), "train") == \
        key(params, "smiley18", params.model("smiley_beta_vae_b50"), "train")
    assert key(params, "mnist", params.model("fmvae_k4"), "train") != key(params, "mnist", params.model("fmvae_k8"), "train")
    assert key(params, "smiley18_vsc", params.model("vsc_smiley"), "train") != \
        key(params, "smiley18_vsc", params.model("vsc_pretrain_smiley"), "pretrain")


@pytest.mark.slow
def test_tiny_dry_run_without_dvc_or_dvclive(tmp_path):
    # a 1 s budget: (e) measures one key of its own, reuses (a)'s and borrows the rest (every path, less time)
    proc = run_without_dvc("benchmarks.gpu_bench", ["--out", str(tmp_path), "--tiny", "--device", "cpu", "--budget-s", "1"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads((tmp_path / "gpu_bench.json").read_text())
    assert set(out["step"]) == set(gpu_bench.STEP_CASES)
    # timed, sign not asserted: a tiny step's time is a difference of two short runs (noise can make it < 0)
    assert all(math.isfinite(r["trainer_ms"]) and math.isfinite(r["plain_ms"]) for r in out["step"].values()), out["step"]
    assert out["cuda_resume"]["ok"] is True
    assert out["stage_work"]["cpu"]["evaluate_model_s"] > 0 and out["stage_work"]["device"]["prior_init_s"] > 0
    hours = out["gpu_hours"]
    paper = load_params(ROOT / "profiles" / "paper.yaml")
    assert hours["runs"] == len(paper.runs) and hours["total_gpu_hours"] > 0  # every run of the paper profile
    assert all("ms_per_step" in w for w in hours["work"])
    assert {w["how"] for w in hours["work"]} == {"measured", "step table (a)", "borrowed (time budget)"}
    assert sum(w["how"] == "measured" for w in hours["work"]) == 1


@pytest.mark.slow
def test_compile_section_times_fit_with_the_trainers_compile_option():
    """--compile with --adam fused (the prepared GPU check): (a) with ``OptimParams.compile`` and
    ``adam_impl`` set, one case, one round on the CPU."""
    import torch

    validate = torch.distributions.Distribution._validate_args
    cases = {"beta_tcvae_mlp3000_smiley": gpu_bench.STEP_CASES["beta_tcvae_mlp3000_smiley"]}
    rows = gpu_bench.step_table(torch.device("cpu"), tiny=True, rounds=1, cases=cases, compile="default",
                                 adam_impl="fused")
    row = rows["beta_tcvae_mlp3000_smiley"]
    assert row["compile"] == "default" and row["adam_impl"] == "fused" and row["graphs_compiled"] >= 1
    # both timed, not their sign: one round of a tiny step is a difference of two short runs, which a loaded CPU
    # can make negative (a fresh-clone CI run saw -1.46 ms), noise rather than a broken path
    assert math.isfinite(row["trainer_ms"]) and math.isfinite(row["plain_ms"]), row
    assert torch.distributions.Distribution._validate_args is validate  # fit gives the default back


def test_op_counts_of_a_step_show_the_models_extra_work():
    """--ops: the VAE's step is the plain loop plus a handful of ops (the logged terms aside, which a
    non-log step does not compute); VSC's prior adds well over half again."""
    rows = gpu_bench.ops_table(cases={c: gpu_bench.STEP_CASES[c] for c in ("vae_mlp3000_smiley", "vsc_mlp3000_smiley_u20")})
    vae, vsc = rows["vae_mlp3000_smiley"], rows["vsc_mlp3000_smiley_u20"]
    # each against its own plain loop: the VSC's setup decodes paper 002's Gaussian (mean and log variance),
    # the VAE's (the baselines' Smiley setup) Bernoulli logits, so the two plain loops differ by the likelihood
    assert vae["plain_ops"] > 0 and vsc["plain_ops"] > 0
    assert vae["plain_ops"] <= vae["ops"] <= 1.15 * vae["plain_ops"]
    assert vsc["ops"] > 1.5 * vsc["plain_ops"]
    for row in (vae, vsc):  # fused Adam: one kernel per parameter group instead of ~10 foreach ops each
        assert row["fused_adam"] <= row["ops"] - 20


@pytest.mark.slow
def test_throughput_dry_run_writes_both_sections(tmp_path):
    """benchmarks.gpu_throughput --tiny on the CPU: the ISA models' step rates and the core's minutes,
    and k concurrent worker processes (a file barrier, one JSON line each) summed."""
    proc = subprocess.run([sys.executable, "-m", "benchmarks.gpu_throughput", "--out", str(tmp_path), "--tiny",
                           "--device", "cpu", "--workers", "1,2", "--window-s", "1"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads((tmp_path / "gpu_throughput.json").read_text())
    isa = out["isa"]["eager"]
    assert {"beta_vae", "isa_vae"} <= set(isa) and isa["core_train_minutes"] > 0
    assert all(isa[m]["ms_per_step"] > 0 and isa[m]["steps"] == 7100 for m in ("beta_vae", "isa_vae"))
    assert [len(out["workers"][k]["per_worker_samples_per_s"]) for k in ("1", "2")] == [1, 2]
    assert out["workers"]["2"]["aggregate_samples_per_s"] > 0


def test_throughput_refuses_an_unknown_section(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "benchmarks.gpu_throughput", "--out", str(tmp_path), "--tiny",
                           "--device", "cpu", "--sections", "isa,bogus"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 2 and "unknown section 'bogus'" in proc.stderr
    assert not (tmp_path / "gpu_throughput.json").exists()


def test_reestimate_prices_the_profiles_steps_with_a_records_ms_per_step(tmp_path):
    """GPU-hours without a GPU: a record's ms/step (rows by setup, model, phase) times the steps the
    params give now, per paper group; the same params give back the record's own total."""
    import json

    import yaml

    from benchmarks.gpu_bench import CLAIM_GROUPS, main, paper_work, reestimate
    from priorlab.config import parse_params

    params = parse_params(yaml.safe_load(open("profiles/tiny.yaml")))
    work = paper_work(params)
    rows = [{**w, "ms_per_step": 2.0 + i} for i, w in enumerate(work.values())]
    record = {"gpu_hours": {"work": rows}, "environment": {"device": "cuda"}}
    expected = sum(w["steps"] * w["ms_per_step"] / 3.6e6 for w in rows)
    out = reestimate(record, params)
    assert out["train_and_pretrain_gpu_hours"] == pytest.approx(expected, abs=0.02)
    assert out["cost_keys"] == {"measured": len(rows), "other_batch": 0, "borrowed": 0, "unmeasured": [],
                                "record_rows_on_changed_nets": []}
    assert set(out["by_paper_gpu_hours"]) == {r.group.split("/")[0] for r in params.runs.values()}
    assert set(out["by_group_gpu_hours"]) == {r.group for r in params.runs.values()}
    assert sum(out["by_group_gpu_hours"].values()) == pytest.approx(out["train_and_pretrain_gpu_hours"], abs=0.05)
    for claim, hours in out["by_claim_gpu_hours"].items():  # a claim costs the groups its runs are in
        assert hours == pytest.approx(sum(out["by_group_gpu_hours"].get(g, 0) for g in CLAIM_GROUPS[claim]), abs=0.02)
    record["gpu_hours"]["work"] = rows[1:]  # a key the record lacks borrows one of its kind, or stays unmeasured
    partial = reestimate(record, params)["cost_keys"]
    assert partial["measured"] == len(rows) - 1 and partial["borrowed"] + len(partial["unmeasured"]) == 1
    (tmp_path / "rec.json").write_text(json.dumps({**record, "gpu_hours": {"work": rows}}))
    assert main(["--reestimate", str(tmp_path / "rec.json"), "--out", str(tmp_path)]) == 0
    assert json.loads((tmp_path / "gpu_hours.json").read_text())["train_and_pretrain_gpu_hours"] > 0


def test_claims_map_to_the_run_groups_of_the_paper_profile():
    """Every claim of papers 001 and 002 (decided on pipeline runs) names groups the paper profile has."""
    from benchmarks.gpu_bench import CLAIM_GROUPS, load_profile
    from priorlab.studies.criteria import CRITERIA

    groups = {r.group for r in load_profile().runs.values()}
    assert {k for k in CRITERIA if k.startswith(("001.", "002."))} == set(CLAIM_GROUPS)
    assert all(set(g) <= groups for g in CLAIM_GROUPS.values())


def test_isa_hours_scale_the_measured_gpu_seconds_per_model_step():
    from benchmarks.gpu_bench import ISA_RECORD_MODELS_PER_CELL, ISA_RECORD_STEPS, isa_gpu_hours, isa_seconds_per_model_step
    from benchmarks.gpu_bench import load_profile

    outcomes = [{"wall_s": {"data@dsprites": 50.0, "isa_fit@a-0": 300.0, "isa_fit@b-0": 280.0}},
                {"wall_s": {"isa_fit@a-1": 330.0, "isa_fit@b-1": 310.0, "isa_experiments": 11.0}}]
    rate = isa_seconds_per_model_step(outcomes)  # each run holds the GPU for its longest cell
    assert rate == pytest.approx((300.0 + 330.0) / (4 * ISA_RECORD_MODELS_PER_CELL * ISA_RECORD_STEPS))
    params = load_profile()
    study = params.isa_study
    out = isa_gpu_hours(params, rate)
    per_model = study.train.steps * rate / 3600
    claim_models = sum(params.models[m].kind == "vae" for m in study.models) * len(study.betas) * len(study.seeds)
    assert out["004.isa_mig"] == pytest.approx(claim_models * per_model, abs=0.01)
    assert out["isa_study"] > out["004.isa_mig"]


def test_reestimate_keys_by_batch_and_drops_rows_measured_on_other_nets():
    """A cost key holds the phase's batch: a step timed at another batch is used but counted apart (a lower
    bound at a larger batch); an older record's row (no key) whose setup's nets have changed is not used."""
    import yaml

    from benchmarks.gpu_bench import paper_work, reestimate
    from priorlab.config import parse_params

    params = parse_params(yaml.safe_load(open("profiles/tiny.yaml")))
    work = paper_work(params)
    assert all(w["key"] == k and json.loads(k)[3] == w["batch"] for k, w in work.items())
    rows = [{k: v for k, v in w.items() if k != "key"} | {"ms_per_step": 1.0} for w in work.values()]  # an older record
    record = {"gpu_hours": {"work": [{**r, "batch": r["batch"] + 1} for r in rows]}}
    out = reestimate(record, params)["cost_keys"]
    assert out["measured"] == 0 and out["other_batch"] == len(rows)
    setup = rows[0]["setup"]
    then = {setup: {**{f: getattr(params.setup(setup), f) for f in ("encoder", "decoder")}, "hidden": [7]}}
    out = reestimate({"gpu_hours": {"work": rows}}, params, then)["cost_keys"]
    assert out["record_rows_on_changed_nets"] and all(r.startswith(f"{setup}/") for r in out["record_rows_on_changed_nets"])
    assert out["measured"] == len(rows) - sum(r["setup"] == setup for r in rows)
    same = {setup: {"hidden": list(params.setup(setup).hidden)}}
    assert reestimate({"gpu_hours": {"work": rows}}, params, same)["cost_keys"]["measured"] == len(rows)


def test_benchmark_gpu_hours_price_the_cells_it_trains():
    """Issue 45: the paper profile's benchmark priced from a record's ms/step: a cell's trained seeds ×
    steps × its key's ms (the seeds it reads from paper 004's isa_fit cells and the priors its nets refuse
    cost nothing); a kind the record lacks is unmeasured, and extrapolated apart with the CPU ratios."""
    from benchmarks.gpu_bench import benchmark_gpu_hours, cost_key, load_profile
    from priorlab.studies.benchmark.fit import prior_spec

    params = load_profile()
    bench = params.benchmark
    vae_key = cost_key(params, "smiley18", prior_spec(params, "vae", "smiley18"), "train", batch=bench.train.batch_size)
    record = {"gpu_hours": {"work": [{"key": vae_key, "ms_per_step": 10.0}]}}
    speed = {"profile": "cpu", "tables": {"smiley18": {"priors": {"vsc": {"ratio_to_vae": 2.0}}}}}
    out = benchmark_gpu_hours(record, params, cpu_speed=speed)
    cells = {(c["setup"], c["prior"]): c for c in out["cells"]}
    vae = cells[("smiley18", "vae")]
    assert vae["how"] == "measured" and vae["trained_seeds"] == len(bench.seeds)
    assert vae["gpu_hours"] == pytest.approx(len(bench.seeds) * bench.train.steps * 10.0 / 3.6e6, abs=1e-3)
    assert cells[("dsprites_isa", "vae")]["trained_seeds"] == 0  # isa_fit's five seeds, read
    assert "one-layer trunk" in cells[("smiley18", "sparse_vae")]["not_run"]  # its nets refuse it: free
    assert "not_run" not in cells[("dsprites_isa", "sparse_vae")]  # a feature per pixel: priced, not refused
    vsc = cells[("smiley18", "vsc")]
    assert vsc["how"] == "borrowed" or vsc["gpu_hours"] is None  # no VSC key: borrowed from its kind or none
    if vsc["gpu_hours"] is None:
        assert vsc["extrapolated_gpu_hours"] == pytest.approx(vae["gpu_hours"] * 2.0, abs=2e-3)
    assert out["image_cells_gpu_hours"] == pytest.approx(sum(c.get("gpu_hours") or 0 for c in out["cells"]), abs=0.01)
    assert out["synthetic_fits_not_priced"]["fits"]["beta_vae"] == len(bench.synthetic.rhos) * bench.synthetic.datasets_per_rho
