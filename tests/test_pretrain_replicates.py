"""Independent pretraining replicates (issue 26): a setup's ``seed`` offsets its pretraining's seed, so
setups that differ only in it pretrain the same nets from independent draws; 0 leaves records as they were."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import SimpleNamespace

import pytest

from priorlab import pipeline
from priorlab.config import ParamsError, load_params

ROOT = Path(__file__).resolve().parents[1]


class _Stop(Exception):
    pass


def _pretrain_seeds(monkeypatch, params, setup: str) -> dict:
    """The seeds ``run_pretrain`` initialises and trains with, and its fingerprint (training faked)."""
    seen: dict = {}
    data = SimpleNamespace(manifest={"sha256": "d"}, obs_shape=(1, 8, 8))
    monkeypatch.setattr(pipeline, "load_setup_data", lambda params, setup: data)

    def new_model(params, setup, spec, obs_shape, seed):
        seen["init"] = seed
        return SimpleNamespace(set_phase=lambda phase: None)

    def fit_phase(params, model, data, opt, phase, run, fp, live_dir):
        seen.update(batches=opt.seed, fingerprint=fp)
        raise _Stop

    monkeypatch.setattr(pipeline, "_new_model", new_model)
    monkeypatch.setattr(pipeline, "_fit_phase", fit_phase)
    with pytest.raises(_Stop):
        pipeline.run_pretrain(params, setup)
    return seen


def test_a_setup_seed_offsets_the_pretraining_seed_and_its_fingerprint(monkeypatch):
    params = load_params(ROOT / "profiles" / "tiny.yaml")
    base = params.setups["smiley"]
    replicate = dataclasses.replace(base, seed=2)
    params = dataclasses.replace(params, setups={**params.setups, "smiley_r2": replicate})
    a, b = _pretrain_seeds(monkeypatch, params, "smiley"), _pretrain_seeds(monkeypatch, params, "smiley_r2")
    assert a["init"] == a["batches"] == params.pretrain.seed
    assert b["init"] == b["batches"] == params.pretrain.seed + 2
    assert a["fingerprint"] != b["fingerprint"]
    assert "seed" not in base.record() and replicate.record()["seed"] == 2  # seed 0: records as before


def test_a_negative_setup_seed_is_refused():
    params = load_params(ROOT / "profiles" / "tiny.yaml")
    with pytest.raises(ParamsError, match="setups.smiley.seed must be >= 0, got -1"):
        dataclasses.replace(params.setups["smiley"], seed=-1).check("setups.smiley")


def test_the_report_names_the_replicates_that_share_a_pretraining():
    from priorlab.report import shared_pretraining

    shared = shared_pretraining(load_params(ROOT / "profiles" / "cpu.yaml"))
    # issue 42: the 5 VSC seeds per size on 3 spike pre-trainings (seeds 0, 3 on r0; 1, 4 on r1; 2 on r2)
    assert "vsc_experiments/smiley: vsc_smiley on smiley18_vsc (2 seeds)" in shared
    assert "vsc_experiments/smiley: vsc_smiley on smiley60_vsc_r1 (2 seeds)" in shared
    assert not any("_r2" in s for s in shared)
    assert not any("beta_vae" in s or "fmnist" in s for s in shared)  # 002's other arms: a replicate each
    assert not any(s.startswith("fmvae_experiments") for s in shared)  # paper 001: a pretraining per seed
    paper = shared_pretraining(load_params(ROOT / "profiles" / "paper.yaml"))
    assert not any(s.startswith(("vsc_experiments", "fmvae_experiments")) for s in paper)
