"""Replicates trained as one vectorised model (priorlab.train.replicates, issue 47): member i equals the
standalone run of seed i, resumes exactly, diverges alone; kinds that cannot be vectorised say why."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from priorlab.config import (MODEL_PARAMS, BetaTCVAEParams, FactorialMixtureParams, FactorVAEParams, OptimParams,
                             SetupParams, SparseVAEParams, VAEParams, VSCParams)
from priorlab.config.models import LpNestedPriorParams
from priorlab.models import build_model
from priorlab.models.protocol import Batch, LossStep, TrainingSet
from priorlab.models.vae import VAE
from priorlab.train import TrainingDiverged, fit
from priorlab.priors.normal_gamma import NormalGammaParams
from priorlab.train.replicates import Draw, NotVectorisable, describe, fit_replicates, vectorisable
from tests.helpers import tiny_data

OBS = (1, 8, 8)
SETUP = SetupParams(dataset="x", latent_dim=4, hidden=[16])
SEEDS = [3, 4, 5]
DTYPE = torch.float64  # in float64 rounding is ~1e-16: a wrong stream or state shows as an O(1) difference
TOLERANCE = 1e-10
"""Member vs standalone weights after 100 steps, relative to the tensor's largest entry.  The two differ
only where a batched matrix product sums in another order than the single one (rounding ~1e-16 in
float64, grown by Adam over the steps: measured ≤ 3e-14 for every kind here, ≤ 4e-13 for the paper profile's
VSC on shrunk nets); any other difference (another batch, another noise draw, another Adam state) is O(1e-3)
or more after one step."""

KINDS = {
    "vae": VAEParams(kind="vae"),
    "beta_vae": VAEParams(kind="vae", beta=4.0),
    "beta_tcvae": BetaTCVAEParams(kind="beta_tcvae"),
    "vsc": VSCParams(kind="vsc", n_pseudo_inputs=3, warmup_ramp_steps=40, sharpness_ramp_steps=60),
    "vsc_released_code": VSCParams(kind="vsc", n_pseudo_inputs=3, preset="released_code", selector="code"),
    "isa_vae": VAEParams(kind="vae", prior=LpNestedPriorParams(subspaces=[[2.2, 2], [2.2, 2]], lr=5e-4)),
    "factor_vae": FactorVAEParams(kind="factor_vae", gamma=10.0, discriminator_hidden=[16, 16]),
    # SVI after every step; tau0 = 1 makes its step rho large, so a member updated from another's carry
    # (or not at all) would differ at O(1)
    "fmvae": FactorialMixtureParams(kind="fmvae", num_factors=2, num_components=[3, 2], tau0=1.0),
    # Delta > 0 on the labelled factor: the first-order (Adam) updates of sec. 2.5 and the cross-entropy
    "fmvae_semi_supervised": FactorialMixtureParams(kind="fmvae", num_factors=2, num_components=[3, 2], tau0=1.0,
                                                    supervised_factor="shape", labelled_fraction=0.5, delta=2.0,
                                                    delta_steps=60, kl_z_weight=5.0, kl_z_weight_steps=30),
    "sparse_vae": SparseVAEParams(kind="sparse_vae", warm_start="scratch"),
    "sparse_vae_released_code": SparseVAEParams(kind="sparse_vae", warm_start="scratch", loss_scaling="released_code"),
}


def setup_of(spec) -> tuple[SetupParams, tuple[int, ...]]:
    """A kind's setup and observation shape here: the sparse VAE's masked decoder on vectors, with the σ
    treatment of its loss scaling; the others on 8 × 8 images."""
    if isinstance(spec, SparseVAEParams):
        likelihood = "gaussian_ig_released" if spec.loss_scaling == "released_code" else "gaussian_ig"
        return SetupParams(dataset="x", latent_dim=4, hidden=[16, 16], decoder="masked_linear", likelihood=likelihood,
                           obs_std=1.0), (12,)
    return SETUP, OBS


class _Data:
    """The two things ``bind_data`` reads of a data set."""

    def __init__(self, x):
        self._x = x

    def x(self, split):
        return self._x

    @staticmethod
    def prepare(b):
        return b


def build(spec, seed: int, x):
    torch.manual_seed(100 + seed)
    setup, obs = setup_of(spec)
    model = build_model(setup, spec, obs).to(DTYPE)
    model.bind_data(_Data(x))
    if isinstance(spec, FactorialMixtureParams):  # a q(xi) away from the hyperprior (where components coincide)
        g = torch.Generator().manual_seed(seed)
        prior = model.prior
        shape = (prior.num_factors, prior.max_components, prior.latent_dim)
        m = torch.randn(shape, generator=g, dtype=DTYPE)
        a = torch.full(shape, 3.0, dtype=DTYPE)
        prior.set_posterior(NormalGammaParams(m, torch.full(shape, 3.0, dtype=DTYPE), a, a), torch.full(shape[:2], 5.0))
        prior.refresh(global_kl=True)  # caches of the start (state, not settings: the members' differ)
    model.set_phase("train")
    return model


def training_set(spec, x) -> TrainingSet:
    """The rows, and for a semi-supervised kind labels of factor 0 on half of them (-1 = none)."""
    if not (isinstance(spec, FactorialMixtureParams) and spec.supervised_factor):
        return TrainingSet(x, lambda b: b)
    labels = torch.arange(len(x)) % 3
    return TrainingSet(x, lambda b: b, torch.where(torch.arange(len(x)) % 2 == 0, labels, torch.full_like(labels, -1)))


def options(steps: int = 100, **kw) -> OptimParams:
    return OptimParams(**{"steps": steps, "batch_size": 32, "lr": 1e-3, "checkpoint_every": 10**9, "log_every": 50,
                          "kl_warmup_steps": 30, **kw})


def standalone(spec, seed: int, x, tmp_path, **kw):
    model = build(spec, seed, x)
    fit(model, training_set(spec, x), options(seed=seed, **kw), checkpoint=tmp_path / f"alone{seed}.pt",
        live_dir=None, fingerprint="f", progress=False)
    return model


def vectorised(spec, x, tmp_path, seeds=SEEDS, models=None, **kw):
    models = models or [build(spec, s, x) for s in seeds]
    out = fit_replicates(models, training_set(spec, x), options(**kw), seeds,
                         checkpoints=[tmp_path / f"member{s}.pt" for s in seeds], fingerprints=["f"] * len(seeds),
                         progress=False)
    return models, out


def difference(a, b) -> float:
    """The largest difference of two models' tensors, relative to the entry's tensor (an integer buffer,
    e.g. a step count, 1 where it differs at all)."""
    sa, sb = a.state_dict(), b.state_dict()
    return max(float((sa[k] - sb[k]).abs().max() / sa[k].abs().max().clamp_min(1e-30)) if sa[k].is_floating_point()
               else float(not torch.equal(sa[k], sb[k])) for k in sa if isinstance(sa[k], torch.Tensor))


@pytest.fixture(scope="module")
def x():
    return tiny_data(200, OBS).to(DTYPE)


@pytest.fixture(scope="module")
def vectors():
    return torch.randn(200, 12, generator=torch.Generator().manual_seed(7), dtype=DTYPE)


@pytest.mark.parametrize("kind", list(KINDS))
def test_member_equals_its_standalone_run(kind, x, vectors, tmp_path):
    spec = KINDS[kind]
    x = vectors if isinstance(spec, SparseVAEParams) else x
    models, out = vectorised(spec, x, tmp_path)
    for seed, model, result in zip(SEEDS, models, out):
        alone = standalone(spec, seed, x, tmp_path)
        assert result.diverged is None and result.result.steps == 100
        assert difference(alone, model) < TOLERANCE, kind
        assert result.result.final_logs["loss"] == pytest.approx(float(result.result.final_logs["loss"]))
    assert difference(models[0], models[1]) > 1e-3  # the members did not train alike
    assert not (tmp_path / f"member{SEEDS[0]}.pt").exists()  # a completed member's checkpoint is removed


def test_final_logs_are_the_standalone_run_logs(x, tmp_path):
    spec = KINDS["vsc"]
    _, out = vectorised(spec, x, tmp_path, steps=50)
    model = build(spec, SEEDS[1], x)
    alone = fit(model, TrainingSet(x, lambda b: b), options(steps=50, seed=SEEDS[1]), checkpoint=tmp_path / "a.pt",
                live_dir=None, fingerprint="f", progress=False)
    logs = out[1].result.final_logs
    assert set(logs) == set(alone.final_logs)
    for k, v in alone.final_logs.items():
        assert logs[k] == pytest.approx(v, rel=1e-9, abs=1e-9), k


def test_killed_run_resumes_to_the_same_weights_and_a_member_resumes_alone(x, tmp_path):
    spec = KINDS["vsc"]
    reference, _ = vectorised(spec, x, tmp_path / "ref", checkpoint_every=20)
    crashed = [build(spec, s, x) for s in SEEDS]
    original = crashed[1].before_step

    def before_step(step):
        if step == 47:
            raise KeyboardInterrupt
        original(step)

    crashed[1].before_step = before_step
    with pytest.raises(KeyboardInterrupt):
        vectorised(spec, x, tmp_path, models=crashed, checkpoint_every=20)
    checkpoint = tmp_path / f"member{SEEDS[1]}.pt"
    assert torch.load(checkpoint, weights_only=False)["step"] == 40
    alone = build(spec, SEEDS[1], x)  # member 1's checkpoint, resumed as a standalone run
    (tmp_path / "alone.pt").write_bytes(checkpoint.read_bytes())
    result = fit(alone, TrainingSet(x, lambda b: b), options(seed=SEEDS[1], checkpoint_every=20),
                 checkpoint=tmp_path / "alone.pt", live_dir=None, fingerprint="f", progress=False)
    assert result.resumed_from == 40
    resumed, out = vectorised(spec, x, tmp_path, checkpoint_every=20)
    assert all(r.result.resumed_from == 40 for r in out)
    for a, b in zip(reference, resumed):
        sa, sb = a.state_dict(), b.state_dict()
        assert all(torch.equal(sa[k], sb[k]) for k in sa)  # the same arithmetic: bit-identical
    assert difference(alone, resumed[1]) < TOLERANCE


def test_a_diverging_member_stops_alone(x, tmp_path):
    spec = KINDS["vae"]
    models = [build(spec, s, x) for s in SEEDS]
    with torch.no_grad():
        models[1].decoder.net[-1].bias.fill_(float("nan"))
    models, out = vectorised(spec, x, tmp_path, models=models)
    assert isinstance(out[1].diverged, TrainingDiverged) and out[1].result is None
    assert "at step 1" in str(out[1].diverged) and f"seed {SEEDS[1]}" in str(out[1].diverged)
    for i in (0, 2):
        assert out[i].diverged is None
        assert difference(standalone(spec, SEEDS[i], x, tmp_path), models[i]) < TOLERANCE


def test_kinds_that_cannot_be_vectorised_say_why():
    cov = [[1.0, 0.5, 0.0, 0.0], [0.5, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 1.0]]
    cases = {"ppca": MODEL_PARAMS["ppca"](kind="ppca"), "mssc": MODEL_PARAMS["mssc"](kind="mssc"),
             "sparse_vae": SparseVAEParams(kind="sparse_vae", warm_start="scratch", prior_cov=cov)}
    for kind, spec in cases.items():
        setup, obs = setup_of(spec)
        model = build_model(setup, spec, obs)
        why = vectorisable(model)
        assert isinstance(why, str) and len(why) > 20, kind
        with pytest.raises(ValueError, match="cannot train vectorised"):
            fit_replicates([model], TrainingSet(torch.zeros(4, *obs), lambda b: b), options(steps=1), [0],
                           checkpoints=["unused.pt"], fingerprints=["f"])
    for kind in ("vsc", "fmvae", "sparse_vae"):
        setup, obs = setup_of(KINDS[kind])
        assert vectorisable(build_model(setup, KINDS[kind], obs)) is None, kind


def _subclasses(cls) -> set:
    return {s for sub in cls.__subclasses__() for s in {sub, *_subclasses(sub)}}


def test_every_kind_with_work_besides_its_loss_declares_it():
    """The vectorised trainer runs a member's step_loss and update_after_step only.  So a kind whose step
    does other work (its own train_step) must give that work as its step_loss or name it in
    not_vectorised, and no kind may override after_step (the standalone step's call of
    update_after_step), whose extra work the trainer would never run."""
    from priorlab.models import factor_vae, fmvae, sparse_vae, vsc  # noqa: F401  (their classes registered)

    kinds = _subclasses(VAE)
    assert {factor_vae.FactorVAE, fmvae.FactorialMixtureVAE, sparse_vae.SparseVAE} <= kinds
    for cls in kinds:
        assert issubclass(cls, LossStep)
        assert cls.after_step is VAE.after_step, cls.__name__
        if cls.train_step is not VAE.train_step:
            assert cls.step_loss is not VAE.step_loss or cls.not_vectorised is not VAE.not_vectorised, cls.__name__


def test_an_update_after_the_step_that_draws_noise_is_refused(x, tmp_path):
    """A member's update runs outside its noise plan: a draw there would come from the global generator,
    not the member's (the standalone run's), so it is refused with the reason."""
    spec = KINDS["vae"]
    models = [build(spec, s, x) for s in SEEDS[:2]]

    def noisy(batch, carry, step):
        torch.randn(3)

    for m in models:
        m.update_after_step = noisy
    with pytest.raises(NotVectorisable, match="update after the step draws noise"):
        vectorised(spec, x, tmp_path, seeds=SEEDS[:2], models=models, steps=2)


def test_noise_a_member_cannot_own_is_refused():
    with pytest.raises(NotVectorisable, match="bernoulli"):
        describe(torch.bernoulli, (torch.full((3,), 0.5),), {})
    with pytest.raises(NotVectorisable, match="own torch.Generator"):
        describe(torch.randn, ((2, 3),), {"generator": torch.Generator()})
    assert describe(torch.randn, (2, 3), {}) == Draw("normal", (2, 3), torch.get_default_dtype(), 0.0, 1.0)
    assert describe(torch.Tensor.uniform_, (torch.empty(4, dtype=torch.float64), -1.0, 2.0), {}) == \
        Draw("uniform", (4,), torch.float64, -1.0, 2.0)
    assert describe(torch.add, (torch.ones(2), 1), {}) is None


def test_batched_noise_trains_every_member_differently(x, tmp_path):
    spec = KINDS["vae"]
    models = [build(spec, 0, x) for _ in range(2)]  # the same start: only the noise and batches differ
    fit_replicates(models, TrainingSet(x, lambda b: b), options(steps=20), [7, 7], checkpoints=[
        tmp_path / "a.pt", tmp_path / "b.pt"], fingerprints=["f", "f"], noise="batched", progress=False)
    assert difference(models[0], models[1]) > 1e-6  # one draw for both: each member its own slice
    with pytest.raises(ValueError, match="noise must be one of"):
        fit_replicates(models, TrainingSet(x, lambda b: b), options(steps=1), [0, 1],
                       checkpoints=[tmp_path / "a.pt", tmp_path / "b.pt"], fingerprints=["f", "f"], noise="shared")


def arm_params(steps: int = 30) -> dict:
    return {
        "profile": "tiny", "device": "cpu", "threads": 1,
        "datasets": {"smiley": {"kind": "smiley", "n_train": 200, "n_test": 50}},
        "setups": {"s": {"dataset": "smiley", "latent_dim": 4, "hidden": [16], "pretrain_model": "pretrain"},
                   "s_r1": {"dataset": "smiley", "latent_dim": 4, "hidden": [16], "pretrain_model": "pretrain",
                            "seed": 1}},
        "models": {"pretrain": {"kind": "vae"}, "vae": {"kind": "vae"}, "beta_vae": {"kind": "vae", "beta": 4.0}},
        "pretrain": {"steps": 10, "batch_size": 16, "lr": 0.001},
        "train": {"steps": steps, "batch_size": 16, "lr": 0.001, "log_every": 10, "checkpoint_every": 10},
        "evaluate": {"iw_samples": 3, "metrics": []},
        "runs": {"s-vae-0": {"setup": "s", "model": "vae", "seed": 0, "group": "baselines/g"},
                 "s-vae-1": {"setup": "s", "model": "vae", "seed": 1, "group": "baselines/g"},
                 "s_r1-vae-0": {"setup": "s_r1", "model": "vae", "seed": 0, "group": "baselines/g"},
                 "s-beta_vae-0": {"setup": "s", "model": "beta_vae", "seed": 0, "group": "baselines/g"}}}


def test_an_arm_writes_what_its_train_stages_write(tmp_path, monkeypatch):
    """run_train_arm (``stages/train.py --runs``): each run's model file, meta and curves where
    ``train@<run>`` puts them, equal to its output up to float32 rounding, with the same fingerprint."""
    import json
    import shutil

    from priorlab import paths, pipeline
    from priorlab.errors import UserError
    from priorlab.io import load_torch

    from priorlab.config import parse_params

    monkeypatch.chdir(tmp_path)
    params = parse_params(arm_params())
    pipeline.run_data(params, "smiley")
    for setup in ("s", "s_r1"):
        pipeline.run_pretrain(params, setup)
    pipeline.run_setup_runs(params)
    for setup in ("s", "s_r1"):
        pipeline.run_prior_init(params, setup)
    arm = ["s-vae-0", "s-vae-1", "s_r1-vae-0"]  # two seeds on one pretraining, one on its own
    separate = {}
    for run in arm:
        pipeline.run_train(params, run)
        separate[run] = (load_torch(paths.train_dir(run, "baselines/g") / "model.pt"),
                         json.loads((paths.train_live_dir(run, "baselines/g") / "metrics.json").read_text()),
                         sorted(p.relative_to(paths.train_live_dir(run, "baselines/g")).as_posix()
                                for p in paths.train_live_dir(run, "baselines/g").rglob("*") if p.is_file()))
        shutil.rmtree(paths.train_dir(run, "baselines/g"))
        shutil.rmtree(paths.train_live_dir(run, "baselines/g"))
    metas = pipeline.run_train_arm(params, ",".join(arm))
    assert [m["run"] for m in metas] == arm
    for run in arm:
        blob = load_torch(paths.train_dir(run, "baselines/g") / "model.pt")
        want, curves, files = separate[run]
        assert blob["meta"]["fingerprint"] == want["meta"]["fingerprint"] and blob["meta"]["steps"] == 30
        assert set(blob["meta"]["final"]) == set(want["meta"]["final"])
        for k, v in want["state_dict"].items():
            if v.is_floating_point():
                assert (blob["state_dict"][k] - v).abs().max() <= 1e-4 * v.abs().max().clamp_min(1e-6), (run, k)
        live = paths.train_live_dir(run, "baselines/g")
        assert sorted(p.relative_to(live).as_posix() for p in live.rglob("*") if p.is_file()) == files
        got = json.loads((live / "metrics.json").read_text())
        assert got["step"] == curves["step"] and set(got["train"]) == set(curves["train"])
        assert got["train"]["loss"] == pytest.approx(curves["train"]["loss"], rel=1e-4)
        assert not paths.checkpoint_file("train", run).exists()
    with pytest.raises(UserError, match="runs of one model only"):
        pipeline.run_train_arm(params, "s-vae-0,s-beta_vae-0")


def test_members_that_differ_in_a_setting_are_refused(x, tmp_path):
    """The vectorised step runs the first member's Python code (its β, schedules) for every member."""
    models = [build(VAEParams(kind="vae", beta=1.0), 0, x), build(VAEParams(kind="vae", beta=4.0), 1, x)]
    with pytest.raises(ValueError, match="beta is 1.0 for the first member, 4.0 for member 1"):
        fit_replicates(models, TrainingSet(x, lambda b: b), options(steps=1), [0, 1],
                       checkpoints=[tmp_path / "a.pt", tmp_path / "b.pt"], fingerprints=["f", "f"])
    # the mapped prior reads the first member's hyperprior numbers: another hyperprior is another model
    models = [build(KINDS["fmvae"], 0, x), build(replace(KINDS["fmvae"], a0=0.1), 1, x)]
    with pytest.raises(ValueError, match=r"prior\._hyper is"):
        fit_replicates(models, TrainingSet(x, lambda b: b), options(steps=1), [0, 1],
                       checkpoints=[tmp_path / "a.pt", tmp_path / "b.pt"], fingerprints=["f", "f"])


# --------------------------------------------------------------------------- an arm through the pipeline


def _claims(project) -> dict:
    """Every study's claims on the tiny run: key -> (verdict, lean, each part's value)."""
    import json

    out = {}
    for path in sorted((project / "reports").glob("*/summary.json")):
        for c in json.loads(path.read_text()).get("claims", []):
            out[c["key"]] = (c["verdict"], c.get("lean"), [p["value"] for p in c.get("parts", [])])
    return out


@pytest.mark.slow
def test_arms_trained_vectorised_by_the_runner_give_the_separate_runs_claims(tiny_serial):
    """``replicates.mode: vectorised``: the runner trains the ready seeds of each arm (the β-VAE and VSC on
    Smiley; the semi-supervised factorial mixture VAE on dSprites, with its SVI and first-order prior
    updates after each step: seeds 0 and 1 of each) in one process per arm, each recorded as its train@ stage; with the
    seeds 1 dropped again, the report's claims equal those of the separate runs (the tiny fixture's): the
    same verdicts and leans, the numbers to float rounding.  The seeds 0's trained models are removed first
    and the run-cache is not used (``--no-run-cache``), so that they are trained again, vectorised, not
    restored."""
    import json
    import math
    import shutil
    import sys

    from tests.tiny_pipeline import param_texts, read_params, restore_params, sh, write_params

    project = tiny_serial.path
    before = _claims(project)
    original = param_texts(project)
    raw = read_params(project)
    arms = [("smiley-beta_vae-0", "smiley-beta_vae-1"), ("smiley_vsc-vsc_smiley-0", "smiley_vsc-vsc_smiley-1"),
            ("dsprites-fmvae_ss-0", "dsprites-fmvae_ss-1")]
    try:
        raw["replicates"]["mode"] = "vectorised"
        two = {**raw["runs"], **{run1: {**raw["runs"][run0], "seed": 1} for run0, run1 in arms}}
        write_params(project, {**raw, "runs": two})
        grouped = sh(project, sys.executable, "stages/train.py", "--arms", ",".join(two))
        assert sorted(json.loads(grouped.stdout.strip().splitlines()[-1])) == sorted(list(a) for a in arms)  # 2+ seeds
        old_models = {}
        for run0, _ in arms:
            group = raw["runs"][run0]["group"]
            old_models[run0] = (project / "models" / "train" / group / run0 / "model.pt").read_bytes()
            for out in (project / "models" / "train" / group / run0, project / "reports" / "live" / "train" / group / run0):
                shutil.rmtree(out)
        first = sh(project, sys.executable, "-m", "stagerun.repro", "-j", "2", "--no-run-cache",
                   *[f"train@{r}" for arm in arms for r in arm])
        for run0, run1 in arms:
            assert f"train@{run0} + train@{run1}: python stages/train.py --runs {run0},{run1}" in first.stdout \
                or f"train@{run1} + train@{run0}: python stages/train.py --runs {run1},{run0}" in first.stdout, \
                first.stdout
            group = raw["runs"][run0]["group"]
            assert (project / "models" / "train" / group / run0 / "model.pt").read_bytes() != old_models[run0]  # rounding
        write_params(project, raw)  # the seeds 1 gone
        second = sh(project, sys.executable, "-m", "stagerun.repro", "-j", "2", "report")
        assert "running train@" not in second.stdout  # the vectorised members stand; no other run retrained
        assert all(f"running evaluate@{run0}" in second.stdout for run0, _ in arms)
        after = _claims(project)
        assert after.keys() == before.keys() and before
        for key, (verdict, lean, values) in before.items():
            assert after[key][:2] == (verdict, lean), key
            assert all(math.isclose(a, b, rel_tol=1e-3, abs_tol=1e-4) for a, b in zip(after[key][2], values)
                       if a is not None and b is not None), (key, after[key][2], values)
    finally:
        restore_params(original)
        for folder in ("models/prior_init", "models/train", "reports/live/train"):
            for _, run1 in arms:
                for path in (project / folder).rglob(run1):
                    shutil.rmtree(path, ignore_errors=True)
        sh(project, "git", "checkout", "-q", "--", ".")
        sh(project, "git", "clean", "-fdq", "--", "metrics", "reports")


def test_train_arms_groups_the_seeds_of_one_model_and_nets_under_the_chosen_mode(monkeypatch):
    """:func:`priorlab.pipeline.train_arms`: nothing under ``separate`` (and ``auto`` on a CPU device);
    under ``vectorised`` the runs of one model whose setups differ at most in their seed, two or more, of
    a kind whose replicates vectorise, the models of ``replicates.separate`` left out."""
    import copy
    from pathlib import Path
    from types import SimpleNamespace

    import yaml

    from priorlab import pipeline
    from priorlab.config import ParamsError, parse_params

    raw = yaml.safe_load((Path(__file__).resolve().parents[1] / "profiles" / "tiny.yaml").read_text())
    raw["setups"]["smiley_r1"] = {**raw["setups"]["smiley"], "seed": 1}  # a pretraining replicate: same nets
    raw["runs"].update({
        "smiley-vae-1": {"setup": "smiley", "model": "vae", "seed": 1, "group": "baselines"},
        "smiley_r1-vae-2": {"setup": "smiley_r1", "model": "vae", "seed": 2, "group": "baselines"},
        "smiley-beta_vae-1": {"setup": "smiley", "model": "beta_vae", "seed": 1, "group": "baselines"},
        "dsprites-fmvae_ss-1": {"setup": "dsprites", "model": "fmvae_ss", "seed": 1,
                                "group": "fmvae_experiments/semi_supervised"},
        "synthetic-ppca-1": {"setup": "synthetic", "model": "ppca", "seed": 1, "group": "baselines"},
    })
    monkeypatch.setattr(pipeline, "load_setup_data",
                        lambda params, setup: SimpleNamespace(obs_shape=(1, 32, 32)))
    runs = ["smiley-vae-0", "dsprites-vae-0", "smiley-vae-1", "smiley_r1-vae-2", "smiley-beta_vae-0",
            "smiley-beta_vae-1", "dsprites-fmvae_ss-0", "dsprites-fmvae_ss-1", "synthetic-ppca-0", "synthetic-ppca-1"]

    def arms(mode: str, separate=(), device: str = "cpu") -> list[list[str]]:
        r = copy.deepcopy(raw)
        r["replicates"] = {"mode": mode, "separate": list(separate)}
        r["device"] = device
        return pipeline.train_arms(parse_params(r), ",".join(runs))

    assert arms("separate") == [] and arms("auto") == []
    assert arms("vectorised") == [["smiley-vae-0", "smiley-vae-1", "smiley_r1-vae-2"],
                                  ["smiley-beta_vae-0", "smiley-beta_vae-1"],
                                  ["dsprites-fmvae_ss-0", "dsprites-fmvae_ss-1"]]  # dSprites' VAE alone; PPCA: EM
    assert arms("vectorised", separate=["beta_vae"]) == [["smiley-vae-0", "smiley-vae-1", "smiley_r1-vae-2"],
                                                          ["dsprites-fmvae_ss-0", "dsprites-fmvae_ss-1"]]
    with pytest.raises(ParamsError, match=r"replicates.separate\[0\]"):
        arms("vectorised", separate=["nowhere"])
