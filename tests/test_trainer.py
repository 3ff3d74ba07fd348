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
from priorlab.train.trainer import KILL_ENV, BatchSampler
from tests.helpers import as_training_set, tiny_data, tiny_model

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
