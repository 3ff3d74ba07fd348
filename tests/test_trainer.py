"""The shared training loop: determinism, kill -9 resume, NaN handling, KL annealing."""

import os
import subprocess
import sys
import textwrap

import pytest
import torch

from priorlab.config import OptimParams
from priorlab.io import load_torch
from priorlab.train import TrainingDiverged, fit, kl_weight
from priorlab.train.trainer import ADAM_IMPLS, KILL_ENV, BatchSampler, adam
from tests.helpers import as_training_set, crash_at, tiny_data, tiny_model

OPT = OptimParams(steps=40, batch_size=32, lr=1e-2, checkpoint_every=10, log_every=5, seed=3)


def _train(tmp_path, name, opt=OPT):
    model = tiny_model()
    fit(model, as_training_set(tiny_data()), opt, checkpoint=tmp_path / f"{name}.pt", live_dir=tmp_path / name, fingerprint="fp")
    return model.state_dict()


def test_same_seed_gives_identical_weights(tmp_path):
    a, b = _train(tmp_path, "a"), _train(tmp_path, "b")
    assert all(torch.equal(a[k], b[k]) for k in a)
    c = _train(tmp_path, "c", OptimParams(**{**OPT.__dict__, "seed": 4}))
    assert not all(torch.equal(a[k], c[k]) for k in a)


def test_training_lowers_the_loss(tmp_path):
    model, x = tiny_model(), tiny_data()
    before = model.loss(x)[1]["elbo"]
    fit(model, as_training_set(x), OptimParams(steps=150, batch_size=32, lr=1e-2, seed=0), checkpoint=tmp_path / "c.pt",
        live_dir=None, fingerprint="fp")
    torch.manual_seed(0)
    assert model.loss(x)[1]["elbo"] > before + 5.0


SCRIPT = textwrap.dedent(
    """
    import sys, torch
    sys.path.insert(0, {root!r})
    torch.set_num_threads({threads})  # the reference's thread count: float sums depend on it
    from priorlab.config import OptimParams
    from priorlab.train import fit
    from tests.helpers import as_training_set, tiny_data, tiny_model
    model = tiny_model()
    opt = OptimParams(steps=40, batch_size=32, lr=1e-2, checkpoint_every=10, log_every=5, seed=3)
    fit(model, as_training_set(tiny_data()), opt, checkpoint={ckpt!r}, live_dir={live!r}, fingerprint="fp")
    torch.save(model.state_dict(), {out!r})
    """
)


def test_killed_run_resumes_to_the_same_weights(tmp_path):
    reference = _train(tmp_path, "ref")
    ckpt, live, out = tmp_path / "k.pt", tmp_path / "live", tmp_path / "final.pt"
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    script = SCRIPT.format(root=root, ckpt=str(ckpt), live=str(live), out=str(out), threads=torch.get_num_threads())
    env = {**os.environ, KILL_ENV: "25", "PYTHONPATH": os.path.join(root, "src")}
    killed = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True)
    assert killed.returncode == -9  # SIGKILL
    assert load_torch(ckpt)["step"] == 20 and not out.exists()
    env.pop(KILL_ENV)
    subprocess.run([sys.executable, "-c", script], env=env, check=True, capture_output=True)
    resumed = torch.load(out)
    assert all(torch.equal(reference[k], resumed[k]) for k in reference)
    assert not ckpt.exists()  # removed on completion
    steps = [int(line.split("\t")[0]) for line in (live / "plots/metrics/train/loss.tsv").read_text().splitlines()[1:]]
    assert steps == list(range(5, 41, 5))  # no duplicated rows from the killed attempt


def test_nan_loss_stops_and_keeps_last_checkpoint(tmp_path):
    model = tiny_model()
    calls = {"n": 0}
    original = model.terms

    def poisoned(x, labels=None):
        calls["n"] += 1
        terms = original(x, labels)
        if calls["n"] >= 15:
            terms.log_lik = terms.log_lik * float("nan")
        return terms

    model.terms = poisoned
    with pytest.raises(TrainingDiverged, match="at step 15"):
        fit(model, as_training_set(tiny_data()), OPT, checkpoint=tmp_path / "n.pt", live_dir=None, fingerprint="fp")
    assert load_torch(tmp_path / "n.pt")["step"] == 10


def _poison_from(model, call: int):
    """Make the model's terms NaN from its ``call``-th forward pass on (one per training step)."""
    calls = {"n": 0}
    original = model.terms

    def poisoned(x, labels=None):
        calls["n"] += 1
        terms = original(x, labels)
        if calls["n"] >= call:
            terms.log_lik = terms.log_lik * float("nan")
        return terms

    model.terms = poisoned


def test_nan_between_log_steps_is_named_at_the_next_log_step(tmp_path):
    # the loss is not read every step: step 12's NaN is found at log step 15, and named
    model = tiny_model()
    _poison_from(model, 12)
    with pytest.raises(TrainingDiverged, match=r"loss is nan at step 12; last good checkpoint kept at"):
        fit(model, as_training_set(tiny_data()), OPT, checkpoint=tmp_path / "n.pt", live_dir=tmp_path / "live",
            fingerprint="fp")
    assert load_torch(tmp_path / "n.pt")["step"] == 10
    steps = [int(line.split("\t")[0]) for line in (tmp_path / "live/plots/metrics/train/loss.tsv").read_text().splitlines()[1:]]
    assert steps == [5, 10]  # nothing logged from the bad steps


def test_no_checkpoint_is_written_after_a_nan(tmp_path):
    # log steps far apart: the record is read before the checkpoint of step 20 and stops the run there
    model = tiny_model()
    _poison_from(model, 17)
    opt = OptimParams(**{**OPT.__dict__, "log_every": 1000})
    with pytest.raises(TrainingDiverged, match="at step 17"):
        fit(model, as_training_set(tiny_data()), opt, checkpoint=tmp_path / "n.pt", live_dir=None, fingerprint="fp")
    assert load_torch(tmp_path / "n.pt")["step"] == 10


def test_non_finite_number_from_a_step_stops_at_once(tmp_path):
    # a step that returns numbers (an EM model reads them anyway) is checked on the spot
    model = tiny_model()
    original = model.train_step

    def train_step(batch, step, ctx):
        logs = original(batch, step, ctx)
        return {**logs, "loss": float("inf")} if step == 7 else logs

    model.train_step = train_step
    with pytest.raises(TrainingDiverged, match="loss is inf at step 7; last good checkpoint none"):
        fit(model, as_training_set(tiny_data()), OPT, checkpoint=tmp_path / "n.pt", live_dir=None, fingerprint="fp")


def test_final_logs_are_numbers_equal_to_the_last_step(tmp_path):
    model = tiny_model()
    res = fit(model, as_training_set(tiny_data()), OPT, checkpoint=tmp_path / "f.pt", live_dir=tmp_path / "live",
              fingerprint="fp")
    assert set(res.final_logs) == {"loss", "elbo", "log_lik", "kl"}
    assert all(type(v) is float for v in res.final_logs.values())
    last = (tmp_path / "live/plots/metrics/train/loss.tsv").read_text().splitlines()[-1].split("\t")
    assert int(last[0]) == 40 and float(last[1]) == res.final_logs["loss"]


CUDA_SCRIPT = SCRIPT.replace("live_dir={live!r}, fingerprint=\"fp\")",
                             "live_dir={live!r}, fingerprint=\"fp\", device=\"cuda\")")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_killed_cuda_run_resumes_to_the_same_weights(tmp_path):
    # the CUDA generators are checkpointed too: a killed and resumed run on the GPU ends as an
    # uninterrupted one (the MLP's kernels are deterministic run to run on one GPU)
    assert CUDA_SCRIPT != SCRIPT
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "PYTHONPATH": os.path.join(root, "src")}
    env.pop(KILL_ENV, None)

    def run(name, kill_at=None):
        ckpt, live, out = tmp_path / f"{name}.pt", tmp_path / f"live_{name}", tmp_path / f"{name}_final.pt"
        script = CUDA_SCRIPT.format(root=root, ckpt=str(ckpt), live=str(live), out=str(out),
                                    threads=torch.get_num_threads())
        proc = subprocess.run([sys.executable, "-c", script], env={**env, **({KILL_ENV: str(kill_at)} if kill_at else {})},
                              capture_output=True)
        return proc, ckpt, out

    proc, _, ref_out = run("ref")
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    proc, ckpt, out = run("k", kill_at=25)
    assert proc.returncode == -9 and load_torch(ckpt)["step"] == 20 and load_torch(ckpt)["cuda_rng"] is not None
    proc, ckpt, out = run("k")
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    reference, resumed = torch.load(ref_out), torch.load(out)
    assert all(torch.equal(reference[k], resumed[k]) for k in reference)


def test_adam_impl_picks_torchs_implementation_with_the_same_update_rule(tmp_path):
    """``adam_impl`` reaches ``torch.optim.Adam``; every implementation trains the same weights up to
    rounding, and ``auto`` is the loop over parameters on the CPU, bit for bit (so the CPU outputs
    of the profiles, all ``auto``, are what they were before the option)."""
    groups = tiny_model().param_groups(OPT.lr)
    flags = {impl: adam(groups, OptimParams(**{**OPT.__dict__, "adam_impl": impl})).defaults for impl in ADAM_IMPLS}
    assert flags["fused"]["fused"] and flags["foreach"]["foreach"] and flags["for-loop"]["foreach"] is False
    assert not flags["auto"]["fused"] and flags["auto"]["foreach"] is None
    assert adam([], OPT) is None
    weights = {impl: _train(tmp_path, impl, OptimParams(**{**OPT.__dict__, "adam_impl": impl})) for impl in ADAM_IMPLS}
    loop = weights["for-loop"]
    assert all(torch.equal(weights["auto"][k], loop[k]) for k in loop)
    for impl in ("foreach", "fused"):
        assert all(torch.allclose(weights[impl][k], loop[k], rtol=1e-4, atol=1e-5) for k in loop), impl
    assert not all(torch.allclose(weights["fused"][k], _train(tmp_path, "lr", OptimParams(
        **{**OPT.__dict__, "lr": 2e-2}))[k], rtol=1e-4, atol=1e-5) for k in loop)  # the tolerance sees a change


def test_adam_impl_is_checked_when_params_are_read(tmp_path):
    from priorlab.config import ParamsError, load_params

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for profile in ("cpu", "paper", "tiny"):  # every profile names the option in pretrain and train
        text = open(os.path.join(root, "profiles", f"{profile}.yaml")).read()
        assert text.count("\n  adam_impl: ") == 2, profile
    assert text.count("\n  adam_impl: auto") == 2  # tiny (the last): the value replaced below
    bad = tmp_path / "p.yaml"  # one file, as a profile
    bad.write_text(text.replace("\n  adam_impl: auto", "\n  adam_impl: fast", 1))
    with pytest.raises(ParamsError, match="adam_impl: unknown value 'fast'; allowed: auto, for-loop, foreach, fused"):
        load_params(bad)


def test_fused_adam_run_killed_and_resumed_ends_bit_identical(tmp_path):
    """The fused implementation keeps its step counts as tensors on the parameters' device; they come
    back from the checkpoint with the moments."""
    opt = OptimParams(**{**OPT.__dict__, "adam_impl": "fused"})
    reference = _train(tmp_path, "ref", opt)
    model = tiny_model()
    crash_at(model, 26)
    with pytest.raises(KeyboardInterrupt):
        fit(model, as_training_set(tiny_data()), opt, checkpoint=tmp_path / "k.pt", live_dir=None, fingerprint="fp")
    model = tiny_model()
    result = fit(model, as_training_set(tiny_data()), opt, checkpoint=tmp_path / "k.pt", live_dir=None,
                 fingerprint="fp")
    assert result.resumed_from == 20
    resumed = model.state_dict()
    assert all(torch.equal(reference[k], resumed[k]) for k in reference)


def test_checkpoint_of_another_config_is_ignored(tmp_path):
    ckpt = tmp_path / "x.pt"
    torch.save({"fingerprint": "other", "step": 30}, ckpt)
    model = tiny_model()
    res = fit(model, as_training_set(tiny_data()), OPT, checkpoint=ckpt, live_dir=None, fingerprint="fp")
    assert res.resumed_from == 0 and res.steps == 40


def test_kl_weight_schedule():
    assert kl_weight(5, 0) == 1.0
    assert [kl_weight(s, 4) for s in (0, 2, 4, 8)] == [0.0, 0.5, 1.0, 1.0]


def test_batch_sampler_covers_each_epoch_once():
    s = BatchSampler(10, 5, seed=0)
    first = torch.cat([s.next(), s.next()])
    assert sorted(first.tolist()) == list(range(10))


def test_saved_checkpoints_are_byte_identical(tmp_path):
    from priorlab.io import save_torch

    state = tiny_model().state_dict()
    save_torch(tmp_path / "a.pt", state)
    save_torch(tmp_path / "b.pt", state)
    assert (tmp_path / "a.pt").read_bytes() == (tmp_path / "b.pt").read_bytes()


def test_a_checkpoint_temporary_left_by_a_killed_save_is_removed(tmp_path):
    """issue 44: a signal during a checkpoint's atomic write can leave its temporary (.<name>.<random>.pt,
    often 0 B); the next fit of that run removes it, and nothing else beside it."""
    from priorlab.io import remove_temporaries

    stale = [tmp_path / ".t.pt.k2j3h4.pt", tmp_path / ".t.pt.zz9.pt"]
    for p in stale:
        p.write_bytes(b"")
    keep = [tmp_path / ".other.pt.a1.pt", tmp_path / "t.pt.notes"]
    for p in keep:
        p.write_text("x")
    _train(tmp_path, "t")
    assert not any(p.exists() for p in stale) and all(p.exists() for p in keep)
    assert remove_temporaries(tmp_path / "missing" / "x.pt") == []


def test_a_diverged_stage_names_its_run(tmp_path, monkeypatch):
    """issue 44: the train / pretrain stages label the trainer with the stage's name, so a divergence's
    one error line says which run (``train@<run>: loss is nan at step …``)."""
    from priorlab import phases, pipeline

    seen = {}

    def fake_fit(model, data, opt, **kwargs):
        seen.update(kwargs)
        return type("R", (), {"steps": 0, "final_logs": {}})()

    class M:
        def bind_data(self, data):
            pass

        def training_set(self, data):
            return None

        def to(self, device):
            return self

    monkeypatch.setattr(phases, "fit", fake_fit)
    monkeypatch.setattr(pipeline.paths, "CHECKPOINTS", tmp_path)
    params = type("P", (), {"device": "cpu"})()
    pipeline._fit_phase(params, M(), None, OPT, "train", "mnist-vae-0", "fp", tmp_path / "live")
    assert seen["desc"] == "train@mnist-vae-0"
    assert seen["curves"] == "train"  # the curves keep the phase's name


def test_curves_are_named_by_phase_not_by_the_progress_label(tmp_path):
    """A stage's progress label names its run (``train@<run>``); its curves stay ``train/<term>``, the names
    the committed curves and `dvc plots diff` across runs use."""
    model = tiny_model()
    fit(model, as_training_set(tiny_data()), OPT, checkpoint=tmp_path / "c.pt", live_dir=tmp_path / "live",
        fingerprint="fp", desc="train@some-run", curves="train")
    names = sorted(p.relative_to(tmp_path / "live" / "plots" / "metrics").as_posix()
                   for p in (tmp_path / "live" / "plots" / "metrics").rglob("*.tsv"))
    assert names and all(n.startswith("train/") for n in names), names
