"""Paper 002 experiment scores: block purity, correlation summaries, spike statistics (the presence-aware
MIG / DCI they use are tested in ``test_metrics_presence.py``)."""

from __future__ import annotations

import numpy as np
import pytest

from priorlab.data.smiley import sample_smiley
from priorlab.studies.vsc_experiments.scores import block_purity, smiley_scores, source_signals, spike_statistics


@pytest.fixture(scope="module")
def smiley():
    _, presence, sources = sample_smiley(3000, 0)
    return presence, sources


def test_a_disentangled_code_scores_high_and_a_mixed_one_low(smiley):
    presence, sources = smiley
    rs = np.random.RandomState(0)
    good = np.concatenate([source_signals(presence, sources), presence.astype(float),
                           np.zeros((3000, 8))], axis=1) + 0.01 * rs.randn(3000, 30)
    mixed = good @ np.linalg.qr(rs.randn(30, 30))[0]  # a random rotation spreads every source
    s_good = smiley_scores(good, presence, sources, wanted=("mig",))
    s_mixed = smiley_scores(mixed, presence, sources, wanted=("mig",))
    assert s_good["contrast"] > 0.8 and s_good["block_purity"] > 0.95
    assert s_good["used_latents"] == 18 and s_good["active_dims"] == 22
    assert s_good["mig"] > 0.5
    assert s_mixed["contrast"] < s_good["contrast"] - 0.4 and s_mixed["block_purity"] < 0.8
    assert s_mixed["mig"] < s_good["mig"] - 0.3
    assert np.isnan(s_good["dci"]["disentanglement"])  # not requested
    # a switched-off latent (a VSC spike at 1e-10) is a zero column, however well its tiny values correlate
    off = np.concatenate([good, 1e-10 * source_signals(presence, sources)[:, :1]], axis=1)
    s_off = smiley_scores(off, presence, sources, wanted=())
    assert s_off["used_latents"] == 18 and not s_off["corr"][:, -1].any()


def test_spike_statistics():
    gamma = np.zeros((4, 5))
    gamma[:, 0] = 1.0  # always active
    gamma[:2, 1] = 1.0  # active for half of the inputs
    gamma[:, 2] = 0.5  # undecided
    s = spike_statistics(gamma)
    assert s["always_active_dims"] == 1 and s["input_dependent_dims"] == 1
    assert s["active_per_input"] == pytest.approx(1.5) and s["undecided_fraction"] == pytest.approx(0.2)


def test_block_purity():
    corr = np.zeros((18, 3))
    corr[0, 0], corr[1, 0] = 0.9, 0.5  # both bow-tie sources: all mass in the bow-tie block
    corr[0, 1], corr[5, 1] = 0.6, 0.2  # bow tie 0.6, hat 0.2
    assert block_purity(corr, np.array([0, 0, -1])) == pytest.approx((1.0 + 0.75) / 2)
    assert block_purity(corr, np.array([0, 5, -1])) == pytest.approx((1.0 + 0.25) / 2)
    assert block_purity(corr, np.array([-1, -1, -1])) == 0.0


def test_run_helpers_select_groups_and_encode_in_batches():
    """The shared run helpers (``priorlab.studies.runs``) the experiment modules load runs with."""
    from pathlib import Path

    import torch

    from priorlab.config import load_params
    from priorlab.studies.runs import group_runs, in_batches

    params = load_params(Path(__file__).resolve().parents[1] / "profiles" / "cpu.yaml")
    smiley = group_runs(params, "vsc_experiments/smiley")
    assert smiley and all(params.run(r).group == "vsc_experiments/smiley" for r in smiley)
    both = group_runs(params, "vsc_experiments/smiley", "vsc_experiments/elbo")
    assert both == [r for r in params.runs if r in both] and set(smiley) < set(both)
    calls = []
    out = in_batches(lambda b: calls.append(len(b)) or 2 * b, torch.arange(7.0)[:, None], batch=3)
    assert calls == [3, 3, 1] and out.dtype == np.float64 and out[:, 0].tolist() == [2.0 * i for i in range(7)]


def test_the_reference_tool_refuses_a_missing_file_with_one_line(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    proc = subprocess.run([sys.executable, "-m", "benchmarks.vsc_reference", "--mat", str(tmp_path / "none.mat"),
                           "--out", str(tmp_path / "out")], cwd=root, capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [f"error: --mat: no such file: {tmp_path / 'none.mat'}"]
    assert not (tmp_path / "out").exists()


def test_beta_is_chosen_on_its_own_validation_smileys_not_the_test_split():
    """Issue 26: the β-VAE β is selected on fresh smileys drawn with their own seed."""
    from pathlib import Path

    from priorlab.config import load_params
    from priorlab.data.registry import build_smiley
    from priorlab.studies.vsc_experiments.aggregate import VALIDATION_SIZE, validation_smileys

    params = load_params(Path(__file__).resolve().parents[1] / "profiles" / "tiny.yaml")
    run = "smiley_vsc-vsc_smiley-0"
    images, presence, sources = validation_smileys(params, run)
    assert images.shape == (VALIDATION_SIZE, 32, 32) and images.dtype == np.uint8 and presence.shape[1] == 4
    again = validation_smileys(params, run)
    assert np.array_equal(images, again[0]) and np.array_equal(sources, again[2])  # seeded
    spec = params.dataset_of(params.run(run).setup)
    stored = build_smiley(spec, np.random.RandomState(spec.seed))  # the data stage's draw
    assert not any(np.allclose(sources[0], s) for s in stored["sources"])  # not a training or test smiley


def test_presence_metrics_default_to_those_of_metrics_and_are_checked():
    from priorlab.config import EvaluateParams, ParamsError

    assert EvaluateParams(metrics=["mig", "sap", "dci"]).presence_aware() == ["mig", "dci"]
    assert EvaluateParams(metrics=["mig", "dci"], presence_metrics=["mig"]).presence_aware() == ["mig"]
    assert EvaluateParams(presence_metrics=[]).presence_aware() == []
    with pytest.raises(ParamsError, match="presence_metrics\\[0\\]"):
        EvaluateParams(presence_metrics=["sap"]).check("evaluate")


def test_the_smiley_diagnosis_pairs_the_arm_by_pretraining_and_concludes_from_its_intervals():
    """issue 43: the arm's VSC is paired with the claim's VSC on the same pre-training and seed, compared
    with the chosen β-VAE over pre-trainings, and the conclusion follows those intervals."""
    from priorlab.studies.vsc_experiments.diagnosis import diagnosis_markdown

    def run(label, model, d, unit, seed, contrast, always=None):
        r = {"label": label, "model": model, "latent_dim": d, "unit": unit, "seed": seed,
             "fresh": {"contrast": contrast, "used_latents": 5}}
        return r | ({"spikes": {"always_active_dims": always, "input_dependent_dims": 3}} if always is not None else {})

    runs = {f"v{d}{u}": run("VSC α=0.003", "vsc", d, f"p{d}{u}", u, 0.20 + 0.01 * u, 6) for d in (18, 60) for u in range(3)}
    runs |= {f"b{d}{u}": run("β-VAE β=8", "b8", d, f"q{d}{u}", u, 0.30 + 0.01 * u) for d in (18, 60) for u in range(3)}
    runs |= {f"x{d}{u}": run("β-VAE β=2", "b2", d, f"q{d}{u}", u, 0.90) for d in (18, 60) for u in range(3)}
    chosen = {"18": "b8", "60": "b8"}  # β = 2 is not the chosen β: never compared
    claim = [{"key": "002.vsc_beats_beta_vae", "verdict": "not reproduced", "measured": "m"}]
    fam = {"pretrain_steps": 1000, "train_steps": 500, "batch_size": 64, "hidden": [512], "likelihood": "bernoulli",
           "warmup_ramp_steps": 100}
    settings = {"vsc": fam, "beta_vae": fam, "arm_train_steps": 1500}

    def arm(shift):
        return {f"l{d}{u}": run("VSC α=0.003", "vsc_long", d, f"p{d}{u}", u, 0.20 + 0.01 * u + shift + 0.002 * u, 2)
                for d in (18, 60) for u in range(3)}

    text = diagnosis_markdown(runs, chosen, arm(0.3), claim, settings)
    assert "minus the claim's VSC on the same pre-training and seed +0.302" in text  # paired: the unit's own run
    assert "**Not reproduced at this scale**" in text and "1,500 steps instead of 500" in text
    assert "Open**: longer joint training raises" in diagnosis_markdown(runs, chosen, arm(0.05), claim, settings)
    assert "does not raise VSC's contrast" in diagnosis_markdown(runs, chosen, arm(-0.05), claim, settings)
    assert "the arm has no runs" in diagnosis_markdown(runs, chosen, {}, claim, settings)
    assert diagnosis_markdown(runs, chosen, {}, [dict(claim[0], verdict="reproduced")], settings) == ""
