"""Paper 000 integrated: the sparse-coding model kinds through the trainer (kill -9 resume), their
config validation, the bars / image_patches data kinds through the store, and the study's
recovery and claim logic on tiny settings."""

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
import textwrap

import numpy as np
import pytest
import torch
import yaml

from priorlab.config import (BarsParams, ImagePatchesParams, OptimParams, ParamsError, SetupParams,
                             SparseCodingModelParams, parse_params)
from priorlab.data.store import build_arrays, load_dataset, write_dataset
from priorlab.errors import UserError
from priorlab.studies.mssc_experiments.aggregate import recovery_table
from priorlab.studies.mssc_experiments.claims import recovery_claims
from priorlab.studies.mssc_experiments.report import mssc_diagnosis, run_mssc_experiments
from priorlab.studies.mssc_experiments import fit as mf
from priorlab.studies.param_slices import run_param_slices
from priorlab.io import load_torch
from priorlab.models import build_model
from priorlab.models.protocol import Batch, Generative, Model, StepContext
from priorlab.train.trainer import KILL_ENV

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BARS = BarsParams(kind="bars", n_train=60, n_test=20, R=3, seed=1)
SPEC = SparseCodingModelParams(kind="mssc", burn_in=2, samples_per_chain=2, anneal_iters=3, nonnegative=True)


def _model(spec=SPEC, seed=0):
    torch.manual_seed(seed)
    return build_model(SetupParams(dataset="b", latent_dim=6), spec, (9,))


def test_adapter_implements_the_protocol_and_runs_em():
    data = mf.in_memory("b", build_arrays(BARS))
    m = _model()
    assert isinstance(m, Model) and isinstance(m, Generative) and m.param_groups(1e-3) == []
    m.bind_data(data)
    W0 = m.W.clone()
    m.bind_data(data)  # a second phase does not re-initialise
    assert torch.equal(m.W, W0)
    x = data.prepare(data.x("train"))
    logs = [m.train_step(Batch(x), t, StepContext(None)) for t in range(8)]
    assert logs[0]["temperature"] == 4.0 and logs[-1]["temperature"] == 1.0
    assert logs[-1]["log_joint"] > logs[0]["log_joint"] and "seconds" not in logs[-1]
    assert (m.W >= 0).all() and not torch.equal(m.W, W0)
    z = m.represent(x)
    assert z.shape == (60, 6) and torch.equal(z, m.represent(x))  # seeded: deterministic
    assert m.decode_mean(z).shape == (60, 9) and m.reconstruct(x).shape == (60, 9)
    extras = m.evaluation_extras(data, data.prepare(data.x("test")), 8)
    assert np.isfinite(extras["test_log_joint"]) and 0 < extras["pi"] < 1 and extras["sigma2"] > 0


OPT = OptimParams(steps=8, batch_size=40, lr=1.0, checkpoint_every=3, log_every=1, seed=2)
SCRIPT = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {root!r})
    from tests.test_mssc_experiments import _fit
    _fit({ckpt!r})
    """
)


def _fit(ckpt):
    from priorlab.train import fit

    data = mf.in_memory("b", build_arrays(BARS))
    m = _model()
    m.bind_data(data)
    fit(m, m.training_set(data), OPT, checkpoint=ckpt, live_dir=None, fingerprint="fp")
    return m.state_dict()


@pytest.mark.slow
def test_fit_resumes_after_kill_bit_identically(tmp_path):
    """Minibatches of 40 of 60 rows; a process killed (-9) at step 7 leaves the step-6 checkpoint;
    resuming from it gives the state of an uninterrupted run, bit for bit."""
    reference = _fit(tmp_path / "ref.pt")
    ckpt = tmp_path / "k.pt"
    env = {**os.environ, "PYTHONPATH": os.path.join(ROOT, "src"), KILL_ENV: "7"}
    killed = subprocess.run([sys.executable, "-c", SCRIPT.format(root=ROOT, ckpt=str(ckpt))], env=env,
                            capture_output=True)
    assert killed.returncode == -9 and load_torch(ckpt)["step"] == 6
    resumed = _fit(ckpt)
    assert reference.keys() == resumed.keys() and not ckpt.exists()
    assert all(torch.equal(reference[k], resumed[k]) for k in reference)


@pytest.mark.parametrize("change, message", [
    ({"nonnegative": True, "kind": "linear_ssc"}, "nonnegative"),
    ({"warm_start": "pretrain"}, "warm_start must be scratch"),
    ({"anneal_start": 0.5}, "anneal_start"),
    ({"n_chains": 0}, "n_chains"),
    ({"prior": {"kind": "normal"}}, None),
])
def test_model_config_errors(change, message):
    raw = _raw({"models": {"sc": {"kind": "mssc", **change}}})
    if message is None:  # own prior: any prior key is refused
        with pytest.raises(ParamsError, match="own prior|prior"):
            parse_params(raw)
        return
    with pytest.raises(ParamsError, match=message):
        parse_params(raw)


@pytest.mark.parametrize("section, change, message", [
    ("datasets", {"b": {"kind": "bars", "n_train": 10, "n_test": 5, "R": 1}}, "R must be >= 2"),
    ("datasets", {"b": {"kind": "bars", "n_train": 10, "n_test": 5, "variant": "sum"}}, "variant"),
    ("datasets", {"b": {"kind": "bars", "n_train": 10, "n_test": 5, "bar_prob": 2.0}}, "bar_prob"),
    ("datasets", {"b": {"kind": "image_patches", "n_train": 10, "n_test": 5, "dog_sigmas": [3, 1]}}, "dog_sigmas"),
    ("mssc_study", {"bars": ["b"], "models": ["nope"]}, "mssc_study.models"),
    ("mssc_study", {"bars": ["b"], "models": ["sc"], "threshold": 0.0}, "threshold"),
    ("mssc_study", {"bars": ["b"], "models": ["sc"], "patches": "b"}, "patches"),
])
def test_data_and_study_config_errors(section, change, message):
    base = {"datasets": {"b": {"kind": "bars", "n_train": 10, "n_test": 5}}, "models": {"sc": {"kind": "mssc"}}}
    if section == "datasets":
        base["datasets"] = change
    else:
        base["mssc_study"] = change
    with pytest.raises(ParamsError, match=message):
        parse_params(_raw(base))


def _raw(extra: dict) -> dict:
    """The tiny profile with ``extra`` merged into its sections."""
    raw = yaml.safe_load(open(os.path.join(ROOT, "profiles", "tiny.yaml")))
    for key, value in extra.items():
        raw[key] = {**raw.get(key, {}), **value} if isinstance(value, dict) and key != "mssc_study" else value
    return raw


@pytest.mark.parametrize("params", [BARS, ImagePatchesParams(kind="image_patches", n_train=30, n_test=10,
                                                              patch_size=4, seed=3)])
def test_data_kinds_round_trip_through_the_store(tmp_path, params):
    arrays = build_arrays(params)
    write_dataset(tmp_path / "d", params, arrays)
    data = load_dataset(tmp_path / "d")
    assert data.observation_kind == "vector"
    for k, v in arrays.items():
        assert np.array_equal(data.arrays[k], v)
    assert np.array_equal(build_arrays(params)["x_train"], arrays["x_train"])  # seeded
    if params.kind == "bars":
        assert data.obs_shape == (9,) and arrays["sources_train"].shape == (60, 6)
        # occlusion: every pixel equals the max of its present bars' intensities, plus the noise
        from priorlab.data.bars import bar_matrix

        clean = (arrays["sources_train"][:, None, :] * bar_matrix(3)[None]).max(-1)
        assert np.abs(arrays["x_train"] - clean).max() < 5 * params.noise_std
    else:
        assert data.obs_shape == (32,) and (arrays["x_train"] >= 0).all()
        on, off = arrays["x_train"][:, :16], arrays["x_train"][:, 16:]
        assert not ((on > 0) & (off > 0)).any()  # ON and OFF are the two signs of one DoG value


def test_recovery_table_and_claim_logic():
    def row(model, variant, ok, seed):
        return {"model": model, "bars": f"b_{variant}", "variant": variant, "recovered": ok,
                "n_recovered": 10 if ok else 8, "seed": seed, "sigma2": 0.0025, "pi": 0.2}

    kinds = {"m": "mssc", "l": "linear_ssc"}
    rows = [row("m", "occlusion", s != 0, s) for s in range(10)] + [row("l", "occlusion", s < 5, s) for s in range(10)]
    table = recovery_table(rows)
    assert table[("m", "b_occlusion")]["rate"] == 0.9 and table[("l", "b_occlusion")]["mean_bars"] == 9.0
    assert table[("m", "b_occlusion")]["sigma2"] == 0.0025
    v = {c.key.split("/")[0]: c.verdict for c in recovery_claims(rows, kinds)}
    assert v == {"000.bars_recovery": "inconclusive", "000.bars_vs_linear": "inconclusive"}  # 9 / 10: too few seeds
    rows = [row("m", "occlusion", True, s) for s in range(40)] + [row("l", "occlusion", s < 10, s) for s in range(40)]
    v = {c.key.split("/")[0]: c.verdict for c in recovery_claims(rows, kinds)}
    assert v == {"000.bars_recovery": "reproduced", "000.bars_vs_linear": "reproduced"}  # 40 / 40 vs 10 / 40
    rows = [row("m", "occlusion", s < 20, s) for s in range(40)] + [row("l", "occlusion", s < 20, s) for s in range(40)]
    v = {c.key.split("/")[0]: c.verdict for c in recovery_claims(rows, kinds)}
    assert v == {"000.bars_recovery": "not reproduced", "000.bars_vs_linear": "inconclusive"}
    assert [c.key for c in recovery_claims(rows[:40], kinds)] == ["000.bars_recovery/b_occlusion"]  # no linear
    noisy = [dict(r, bars="b_noisy") for r in rows]  # a second occluding-bars entry: its own pair of claims
    assert len(recovery_claims(rows + noisy, kinds)) == 4
    assert mf.sparsity_by_count(np.array([0, 1, 1, 2]), np.array([0.0, 1.0, 2.0, 2.0])) == {"0": 0.0, "1": 1.5, "2": 2.0}


@pytest.mark.slow
def test_study_on_tiny_settings_recovers_bars_and_writes_the_report(tmp_path, monkeypatch):
    raw = _raw({"datasets": {"bo": {"kind": "bars", "n_train": 150, "n_test": 10, "R": 3}},
                "models": {"sc": {"kind": "mssc", "n_candidates": 4, "burn_in": 3, "samples_per_chain": 2,
                                  "anneal_iters": 8, "nonnegative": True},
                           "lin": {"kind": "linear_ssc", "n_candidates": 4, "burn_in": 3, "samples_per_chain": 2,
                                   "anneal_iters": 8}},
                "mssc_study": {"bars": ["bo"], "models": ["sc", "lin"], "seeds": [0, 1], "iterations": 15,
                               "ablations": {"t": {"model": "sc", "bars": "bo", "varies": ["sc", "bo"], "start": "truth",
                                                   "iterations": 2},
                                             "r": {"model": "sc", "bars": "bo", "varies": ["sc", "bo"], "seeds": [1],
                                                   "model_seed_offset": 7, "iterations": 15}}}})
    params = parse_params(raw)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UserError, match="mssc_fit@sc-bo has not run"):
        run_mssc_experiments(params, tmp_path / "out")
    with pytest.raises(ParamsError, match="no cell nope-bo"):
        mf.run_mssc_fit(params, "nope", "bo")
    with pytest.raises(ParamsError, match="no cell sc-b2"):
        mf.run_mssc_fit(params, "sc", "b2")
    for model in ("sc", "lin"):  # the mssc_fit stages
        mf.run_mssc_fit(params, model, "bo")
    with pytest.raises(UserError, match="mssc_patches@sc has not run"):
        run_mssc_experiments(params, tmp_path / "out")
    run_param_slices(params)  # what the mssc_patches stages read of datasets (issue 44)
    for model in ("sc", "lin"):  # the mssc_patches stages (no patches entry here: they record none)
        mf.run_mssc_patches(params, model)
    cell = tmp_path / "models" / "mssc_experiments" / "sc"
    assert sorted(p.name for p in (cell / "bo").iterdir()) == ["0.pt", "1.pt", "rows.json"]
    assert sorted(p.name for p in (cell / "patches").iterdir()) == ["rows.json"]
    assert not list((tmp_path / "models" / "mssc_experiments").glob("*/*.tmp"))
    s = run_mssc_experiments(params, tmp_path / "out")  # the claims wait for no diagnosis arm
    link = "../diagnosis/mssc_experiments.md"
    assert all(c.get("diagnosis") == link for c in s["claims"] if c["key"].startswith("000.bars_recovery"))
    assert f"([diagnosis]({link}))" in (tmp_path / "out" / "README.md").read_text()
    with pytest.raises(UserError, match="mssc_ablation@t has not run"):  # 2 seeds: not reproduced, so diagnosed
        mssc_diagnosis(params, s)
    with pytest.raises(ParamsError, match="no entry 'x'"):
        mf.run_mssc_ablation(params, "x")
    for arm in ("t", "r"):  # the mssc_ablation stages
        mf.run_mssc_ablation(params, arm)
    arms = {a: json.loads((tmp_path / "models" / "diagnosis" / "mssc_experiments" / a / "rows.json").read_text())["rows"]
            for a in ("t", "r")}
    assert [r["seed"] for r in arms["t"]] == [0, 1] and [r["seed"] for r in arms["r"]] == [1]  # its own seeds
    assert arms["t"][0]["start"] == "truth" and all(r["recovered"] for r in arms["t"])
    assert "Started at the truth" in mssc_diagnosis(params, s)
    assert s["paper"] == "000" and len(s["runs"]) == 4 and len(s["claims"]) == 2
    assert [(r["model"], r["seed"]) for r in s["runs"]] == [("sc", 0), ("sc", 1), ("lin", 0), ("lin", 1)]
    assert all(r["n_recovered"] >= 5 for r in s["runs"] if r["model"] == "sc")  # R = 3: 6 bars
    assert (tmp_path / "out" / "bars_w.png").is_file() and (tmp_path / "out" / "sparsity.png").is_file()
    assert "Bars recovery" in (tmp_path / "out" / "README.md").read_text()
    # a cell run again (a fresh stage process would be the same): the same rows
    mf.run_mssc_fit(params, "sc", "bo")
    assert run_mssc_experiments(params, tmp_path / "again")["runs"] == s["runs"]


def test_the_iterations_curve_tool_runs_the_cells_code(tmp_path):
    from benchmarks.mssc_iterations import main

    out = tmp_path / "curve.json"
    root = Path(__file__).resolve().parents[1]
    assert main(["--params", str(root / "profiles" / "tiny.yaml"), "--noise", "0.05", "--iterations", "2",
                 "--anneal", "0.5", "--seeds", "2", "--out", str(out)]) == 0
    (row,) = __import__("json").loads(out.read_text())["rows"]
    assert row["seeds"] == 2 and row["anneal_iters"] == 1 and 0 <= row["recovered"] <= 2 and len(row["ci95"]) == 2


# --------------------------------------------------------------------------- the diagnosis (issue 43)


def test_failure_modes_name_missing_merged_and_duplicated_bars():
    from priorlab.data.bars import bar_matrix
    from priorlab.studies.mssc_experiments.diagnosis import failure_modes

    W = bar_matrix(5)
    assert failure_modes(W, 5, 0.9) == {"missing": 0, "merged": 0, "duplicate": 0, "other": 0}
    bad = W.copy()
    bad[:, 1] = np.maximum(W[:, 1], W[:, 2])  # one column holds rows 1 and 2
    bad[:, 2] = W[:, 0]  # another repeats row 0
    assert failure_modes(bad, 5, 0.9) == {"missing": 2, "merged": 1, "duplicate": 1, "other": 0}
    bad[:, 2] = np.random.RandomState(0).uniform(size=25)  # noise instead of the repeat
    assert failure_modes(bad, 5, 0.9) == {"missing": 2, "merged": 1, "duplicate": 0, "other": 1}


def test_em_started_at_the_generating_parameters():
    """``generating_theta`` is what the bars entry draws with; EM started there (``start_at``, not
    overwritten by ``bind_data``) keeps every bar; the ablation config refuses what it cannot run."""
    dp = BarsParams(kind="bars", n_train=150, n_test=10, R=3, seed=1, noise_std=0.05)
    theta = mf.generating_theta(dp)
    from priorlab.data.bars import bar_matrix

    assert np.array_equal(theta.W.numpy(), bar_matrix(3))
    assert float(theta.sigma2) == pytest.approx(0.0025) and float(theta.pi) == pytest.approx(1 / 3)
    assert float(theta.mu_pr) == 1.0 and float(theta.var_pr) == pytest.approx(0.0625)
    fixed = mf.generating_theta(BarsParams(kind="bars", n_train=10, n_test=5, R=3, intensity="fixed", noise_std=0.0,
                                           bar_prob=0.25))
    assert float(fixed.var_pr) == 1e-6 and float(fixed.sigma2) == 1e-6 and float(fixed.pi) == 0.25
    raw = _raw({"datasets": {"bo": dataclasses.asdict(dp)},
                "models": {"sc": {"kind": "mssc", "n_candidates": 4, "burn_in": 3, "samples_per_chain": 2,
                                  "anneal_iters": 0, "nonnegative": True}},
                "mssc_study": {"bars": ["bo"], "models": ["sc"], "seeds": [0], "iterations": 4,
                               "ablations": {"t": {"model": "sc", "bars": "bo", "varies": ["sc", "bo"],
                                                   "start": "truth", "iterations": 3}}}})
    params = parse_params(raw)
    row, model = mf.bars_run(params, "bo", "sc", 0, iterations=3, start="truth")
    assert row["recovered"] and row["min_correlation"] > 0.95
    assert bool(model.initialised)
    for bad, message in [({"varies": ["sc", "nope"]}, "must name a study cell"),
                         ({"model": "nope"}, "ablations.t.model"),
                         ({"model_seed_offset": -1}, "model_seed_offset")]:
        broken = {**raw, "mssc_study": {**raw["mssc_study"], "ablations": {"t": {**raw["mssc_study"]["ablations"]["t"],
                                                                                  **bad}}}}
        with pytest.raises(ParamsError, match=message):
            parse_params(broken)


def _diag_rows(recovered: list[bool], log_joint: list[float], **extra) -> list[dict]:
    from priorlab.data.bars import bar_matrix

    W = bar_matrix(3)
    broken = W.copy()
    broken[:, 1] = np.maximum(W[:, 1], W[:, 2])
    broken[:, 2] = W[:, 0]
    return [{"bars": "bo", "kind": "mssc", "model": "sc", "seed": s, "recovered": ok, "n_recovered": 6 if ok else 4,
             "log_joint": lj, "sigma2": 0.003 if ok else 0.02, "W": (W if ok else broken).tolist(), **extra}
            for s, (ok, lj) in enumerate(zip(recovered, log_joint))]


def test_the_diagnosis_concludes_from_the_numbers():
    """Local optima only when the truth start beats every failing random start on its seed; the restart
    arm keeps per seed the start with the higher log joint; 'at this scale' only when an arm's interval
    clears 90 %."""
    from priorlab.studies.mssc_experiments.diagnosis import diagnosis_markdown

    n = 40
    ok = [s % 5 != 0 for s in range(n)]  # 8 failing seeds
    own = _diag_rows(ok, [10.0 if o else 5.0 for o in ok])
    settings = {"models": {"sc": dataclasses.asdict(SPEC) | {"n_chains": 2}},
                "bars": {"bo": dataclasses.asdict(BarsParams(kind="bars", n_train=150, n_test=10, R=3))},
                "iterations": 40}
    claim = [{"key": "000.bars_recovery/bo", "verdict": "not reproduced", "measured": "max rule 32 of 40 seeds"}]
    spec = {"model": "sc", "bars": "bo", "varies": ["sc", "bo"], "iterations": 10, "model_seed_offset": 0}
    truth = {"spec": {**spec, "start": "truth"}, "rows": _diag_rows([True] * n, [12.0] * n)}
    restart = {"spec": {**spec, "start": "random", "model_seed_offset": 1000},
               "rows": _diag_rows([not o for o in ok], [11.0 if not o else 4.0 for o in ok])}
    text = diagnosis_markdown(own, {"truth": truth, "restart": restart}, settings, claim, 0.9)
    assert "| 0 | 4 / 6 | 2 | 1 | 1 | 0 |" in text  # seed 0: two bars missing, one column merges, one repeats
    assert "higher on 8 of 8" in text and "local optima of EM" in text
    assert "recovers it in 40 / 40 = 100%" in text and "**Not reproduced at this scale**" in text
    worse = {**truth, "rows": _diag_rows([True] * n, [4.0] * n)}
    assert "**Open**: the generating parameters are not a better fixed point" in diagnosis_markdown(
        own, {"truth": worse}, settings, claim, 0.9)
    half = {**restart, "rows": _diag_rows([not o and s % 2 == 0 for s, o in enumerate(ok)],
                                          [11.0 if not o and s % 2 == 0 else 4.0 for s, o in enumerate(ok)])}
    assert "**Not reproduced at this scale**: arm `restart` raises the rate to 90 %" not in diagnosis_markdown(
        own, {"truth": truth, "restart": half}, settings, claim, 0.9)  # 36 / 40: not above 90 %
    assert "raises the rate, but not above 90 %" in diagnosis_markdown(
        own, {"truth": truth, "restart": half}, settings, claim, 0.9)
    most = {**restart, "rows": [dict(r, recovered=r["recovered"] or s != 0, log_joint=11.0 if s else 4.0)
                                for s, r in enumerate(restart["rows"])]}  # 39 / 40: above 90 %, interval not
    text = diagnosis_markdown(own, {"truth": truth, "restart": most}, settings, claim, 0.9)
    assert "raises the rate to 98%, above 90 %, but its interval does not clear 90 % at n = 40" in text
    from priorlab.studies.intervals import clopper_pearson
    from priorlab.studies.mssc_experiments.diagnosis import seeds_to_clear

    n = seeds_to_clear(0.95)
    assert clopper_pearson(round(0.95 * n), n).low > 0.9 >= clopper_pearson(round(0.95 * (n - 1)), n - 1).low
    assert seeds_to_clear(0.9) == "> 5000"
    assert "no truth-start arm ran" in diagnosis_markdown(own, {}, settings, claim, 0.9)
    assert "## `bo`" not in diagnosis_markdown(own, {}, settings, [dict(claim[0], verdict="reproduced")], 0.9)
