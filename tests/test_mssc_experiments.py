"""Paper 000 integrated: the sparse-coding model kinds through the trainer (kill -9 resume), their
config validation, the bars / image_patches data kinds through the store, and the study's
recovery and claim logic on tiny settings."""

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
from priorlab.studies.mssc_experiments.report import run_mssc_experiments
from priorlab.studies.mssc_experiments import fit as mf
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
                "mssc_study": {"bars": ["bo"], "models": ["sc", "lin"], "seeds": [0, 1], "iterations": 15}})
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
    for model in ("sc", "lin"):  # the mssc_patches stages (no patches entry here: they record none)
        mf.run_mssc_patches(params, model)
    cell = tmp_path / "models" / "mssc_experiments" / "sc"
    assert sorted(p.name for p in (cell / "bo").iterdir()) == ["0.pt", "1.pt", "rows.json"]
    assert sorted(p.name for p in (cell / "patches").iterdir()) == ["rows.json"]
    assert not list((tmp_path / "models" / "mssc_experiments").glob("*/*.tmp"))
    s = run_mssc_experiments(params, tmp_path / "out")
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
