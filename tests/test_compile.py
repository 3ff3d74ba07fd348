"""The trainer's ``compile`` option (``OptimParams.compile``): ``nn.Module.compile`` of a gradient
model's forward pass.  It trains the same model as eager up to float rounding, compiles a bounded
number of graphs however the schedules move (VSC's λ and c ramps, the factorial mixture prior's SVI
updates between steps), leaves EM models alone, and gives torch.distributions' default argument
validation back when it returns (dynamo turns it off for the whole process at its first use)."""

import copy
from dataclasses import replace

import pytest
import torch
from torch._dynamo.utils import counters

from benchmarks import gpu_bench
from priorlab.config import OptimParams, ParamsError, load_params
from priorlab.train import fit
from tests.helpers import crash_at, gen
from tests.test_fmvae import first_order_case

pytestmark = pytest.mark.slow  # inductor compiles C++ kernels: seconds per graph


@pytest.fixture(autouse=True)
def _restore_validation():
    torch._dynamo.reset()  # graph counts start from an empty cache, whatever compiled earlier in the process
    validate = torch.distributions.Distribution._validate_args
    yield
    torch.distributions.Distribution.set_default_validate_args(validate)


def _model(setup: str, model: str, **changes):
    params = gpu_bench.load_profile()
    data = gpu_bench.synthetic_dataset(gpu_bench.obs_shape_of(params, setup), 256)
    spec = replace(params.model(model), **changes)
    return gpu_bench.build_bound(gpu_bench.shrink_setup(params.setup(setup)), spec, data, "train", seed=0), data


def _train(model, data, steps: int, compile: str, workdir, seed: int = 0):
    opt = OptimParams(steps=steps, batch_size=32, lr=1e-3, checkpoint_every=10**9, log_every=5, seed=seed,
                      compile=compile)
    return fit(model, model.training_set(data), opt, checkpoint=workdir / f"{compile}.pt", live_dir=None,
               fingerprint="compile-test", desc="test")


def _weights(model, under: str = "") -> torch.Tensor:
    return torch.cat([p.detach().flatten() for n, p in model.named_parameters() if n.startswith(under)])


def _same_run(a, b, eager, compiled) -> None:
    """Same noise (inductor's ``fallback_random``), so the logged terms agree to float rounding, and so
    do the encoder's and decoder's weights (to well under one Adam step, lr = 1e-3)."""
    for k in ("loss", "log_lik", "kl"):
        assert b.final_logs[k] == pytest.approx(a.final_logs[k], rel=1e-5, abs=1e-4), k
    for net in ("encoder.", "decoder."):
        assert torch.allclose(_weights(eager, net), _weights(compiled, net), rtol=1e-4, atol=5e-5), net


def _graphs() -> int:
    return int(counters["stats"]["unique_graphs"])


@pytest.mark.parametrize("preset", ["paper", "released_code"])
def test_compiled_vsc_follows_eager_through_its_ramps_with_few_graphs(tmp_path, preset):
    """λ ramps 0 → 1 and c from c_start to c_end within the run, changing every step.  c is a tensor
    (the buffer); dynamo specialises on the first λ, makes it a symbolic input at the second, then
    meets the λ = 1 branch: three graphs (one more for the first call's KL lookup, a dict dynamo
    guards on), however long the ramps (a recompile per step would hit
    dynamo's limit of 8).  The paper's objective runs the selection-weighted KL as one autograd
    Function with a hand-written backward, the released code's through autograd: both compile
    whole.  (The selector's weights are not compared: Adam turns the rounding noise of
    its near-zero gradients, the normalised weights being scale-free, into steps of ±lr.)"""
    changes = dict(preset=preset, warmup_ramp_steps=12, sharpness_ramp_steps=16, sharpness_start=60.0,
                   sharpness_end=180.0)
    eager, data = _model("smiley18_vsc", "vsc_smiley", **changes)
    compiled, _ = _model("smiley18_vsc", "vsc_smiley", **changes)
    assert compiled.paper_objective == (preset == "paper")
    assert torch.equal(_weights(eager), _weights(compiled))
    a = _train(eager, data, 20, "eager", tmp_path)
    before = _graphs()
    b = _train(compiled, data, 20, "default", tmp_path)
    assert 1 <= _graphs() - before <= 4
    assert compiled.posterior_head._lam == 1.0 and compiled.posterior_head._sharpness == compiled.sharpness_end != compiled.sharpness_start
    _same_run(a, b, eager, compiled)


def test_svi_updates_and_schedules_of_the_factorial_mixture_vae_do_not_recompile(tmp_path):
    """The semi-supervised factorial mixture VAE: q(xi) changes after every step (SVI for the free
    factor, first-order steps for the supervised one while Delta > 0), and Delta and the KL[z]
    up-weighting switch off at steps 4 and 7.  The prior's caches are refreshed before the compiled
    pass (by their own compiled function), the schedules reach it as two floats: a second run on the
    same model, through both switches, compiles one forward graph per switch and one SVI update for
    all factors (the supervised one joins SVI when Delta reaches 0), and the run follows eager."""
    changes = dict(delta_steps=4, kl_z_weight_steps=7)
    eager, data = _model("dsprites", "fmvae_ss", **changes)
    compiled, _ = _model("dsprites", "fmvae_ss", **changes)
    assert compiled.supervised and compiled._schedule[0] > 0 and compiled._schedule[1] > 0
    _train(eager, data, 3, "eager", tmp_path)
    _train(compiled, data, 3, "default", tmp_path)
    graphs = _graphs()
    a = _train(eager, data, 10, "eager", tmp_path, seed=1)
    b = _train(compiled, data, 10, "default", tmp_path, seed=1)
    assert compiled._schedule == (0.0, 0.0)
    assert _graphs() - graphs <= 3  # a forward graph per schedule switch, the SVI update of every factor
    assert int(compiled.svi_count) == int(eager.svi_count) == 13
    _same_run(a, b, eager, compiled)
    assert torch.allclose(compiled.prior.ng_natural, eager.prior.ng_natural, rtol=1e-4, atol=1e-6)


def test_the_first_order_update_compiles_into_one_graph_and_follows_eager():
    """Compiling the factorial mixture VAE compiles its prior's first-order update of section 2.5
    (the semi-supervised factor's after-step work, ~500 eager ops) too: one graph for every step
    (the Adam step count and the batch change, the shapes do not), the eager steps' values."""
    model = first_order_case(gen(3))[0]
    eager = copy.deepcopy(model.prior)
    model.compile(options={"fallback_random": True})
    before = _graphs()
    for step in range(4):  # a new batch each step
        _, mu, var, labels, _ = first_order_case(gen(10 + step))
        gamma = eager.responsibilities(mu, var, labels)
        args = (mu, var, gamma, 500, [0], 1e-2)
        a = eager.first_order_step(*args, labels=labels, delta=3.0)
        b = model.prior.first_order_step(*args, labels=labels, delta=3.0)
        torch.testing.assert_close(b, a)
        for name in ("ng_natural", "dirichlet_natural", "fo_ng_moments", "fo_dir_moments"):
            torch.testing.assert_close(getattr(model.prior, name), getattr(eager, name), msg=f"{name}, step {step}")
        assert _graphs() - before == 1
    assert model.prior.fo_steps.tolist() == [4, 0]


@pytest.mark.parametrize("model_name, factors", [("fmvae_i2", None), ("fmvae_ss", [1])])
def test_the_svi_update_and_the_prior_caches_compile_and_follow_eager(model_name, factors):
    """Compiling the factorial mixture VAE compiles the SVI update of q(xi) (eq. 13-14, all factors or
    a subset) and the caches refreshed after it (the coefficients of eq. 6 and the global KL): a few
    graphs over the first steps (the Robbins-Monro step size is a float that changes every step:
    dynamo makes it symbolic at its second value), none after, and the eager values."""
    model, data = _model("dsprites", model_name)
    eager = copy.deepcopy(model.prior)
    model.compile(options={"fallback_random": True})
    compiled = model.prior
    mu, var = torch.randn(64, compiled.num_factors * compiled.latent_dim, generator=gen(0)), \
        torch.rand(64, compiled.num_factors * compiled.latent_dim, generator=gen(1)) + 0.1
    graphs = []
    for step in range(1, 6):
        mu, var = mu + 0.1 * torch.randn(mu.shape, generator=gen(step)), var
        for prior in (eager, compiled):
            gamma = eager.responsibilities(mu, var)
            prior.svi_step(mu, var, gamma, 1000, step=step, factors=factors)
            prior.refresh(global_kl=True)
        for name in ("ng_natural", "dirichlet_natural"):
            torch.testing.assert_close(getattr(compiled, name), getattr(eager, name), msg=f"{name}, step {step}")
        for a, b in zip(eager._coef + (eager._global_kl,), compiled._coef + (compiled._global_kl,)):
            torch.testing.assert_close(b, a, msg=f"caches, step {step}")
        graphs.append(_graphs())
    assert graphs[2] == graphs[-1]  # nothing new after the third step


def test_the_prior_caches_are_compiled_without_cuda_graphs():
    """The caches outlive the step that made them, so their compile arguments turn CUDA graphs off,
    whether the mode or the options asked for them; other arguments pass through."""
    from priorlab.priors.factorial_mixture import without_cuda_graphs

    trainer_args = {"options": {"triton.cudagraphs": True, "fallback_random": True}}
    assert without_cuda_graphs(trainer_args) == {"options": {"triton.cudagraphs": False, "fallback_random": True}}
    assert without_cuda_graphs({"mode": "reduce-overhead", "dynamic": False}) == \
        {"dynamic": False, "options": {"triton.cudagraphs": False}}
    assert without_cuda_graphs({"mode": "max-autotune"})["options"]["max_autotune"] is True
    assert without_cuda_graphs({"backend": "eager"}) == {"backend": "eager"}


@pytest.mark.parametrize("kind", ["isa_vae", "isa_factor_vae", "sparse_vae"])
def test_the_other_gradient_kinds_compile_whole_and_follow_eager(tmp_path, kind):
    """ISA-VAE (the Lp-nested prior, its exponents trained), FactorVAE (its discriminator outside the
    compiled pass) and the sparse VAE (Spike-and-Slab-Lasso masks): one graph (two with the first
    call's KL lookup) and the eager run's terms."""
    from priorlab.config import load_params
    from priorlab.studies.sparse_vae_experiments.fit import setup_for

    cpu = load_params(gpu_bench.ROOT / "profiles" / "cpu.yaml")
    if kind == "sparse_vae":
        spec = cpu.model("sparse_vae")
        setup, shape = setup_for(cpu.sparse_vae_study), (30,)
    else:
        spec, setup, shape = cpu.model(kind), gpu_bench.shrink_setup(cpu.setup("dsprites_isa")), (1, 32, 32)
    data = gpu_bench.synthetic_dataset(shape, 256)
    runs, models = [], []
    for mode in ("eager", "default"):
        model = gpu_bench.build_bound(setup, spec, data, "train")
        before = _graphs()
        runs.append(_train(model, data, 8, mode, tmp_path))
        models.append(model)
    assert 1 <= _graphs() - before <= 2
    _same_run(*runs, *models)


def test_compiled_run_interrupted_and_resumed_ends_bit_identical(tmp_path):
    """Exact resume holds for a compiled run: the noise comes from torch's generator
    (``fallback_random``), whose state the checkpoint carries."""
    def run(kill_after: int | None):
        model, data = _model("smiley", "vae")
        opt = OptimParams(steps=12, batch_size=32, lr=1e-3, checkpoint_every=5, log_every=4, seed=2, compile="default")
        if kill_after is not None:
            crash_at(model, kill_after + 1)
            with pytest.raises(KeyboardInterrupt):
                fit(model, model.training_set(data), opt, checkpoint=tmp_path / "ck.pt", live_dir=None,
                    fingerprint="resume", desc="test")
            model, data = _model("smiley", "vae")
        result = fit(model, model.training_set(data), opt, checkpoint=tmp_path / "ck.pt", live_dir=None,
                     fingerprint="resume", desc="test")
        return result, model.state_dict()

    full, a = run(None)
    resumed, b = run(7)
    assert full.resumed_from == 0 and resumed.resumed_from == 5
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_em_models_are_not_compiled_and_validation_comes_back(tmp_path):
    """An EM model (nothing to compile) trains bit-identically with the option; after any compiled
    run, torch.distributions validates arguments by default again."""
    from priorlab.config import PPCAParams, SetupParams

    data = gpu_bench.synthetic_dataset((7,), 256)
    out = []
    for mode in ("eager", "default"):
        model = gpu_bench.build_bound(SetupParams(dataset="x", latent_dim=2), PPCAParams(kind="ppca"), data, "train")
        assert not model.compilable
        _train(model, data, 3, mode, tmp_path)
        out.append(model.state_dict())
    assert out[0].keys() == out[1].keys() and all(torch.equal(out[0][k], out[1][k]) for k in out[0])
    torch.distributions.Distribution.set_default_validate_args(True)
    beta_tcvae, data = _model("smiley18", "beta_tcvae")
    _train(beta_tcvae, data, 2, "default", tmp_path)
    assert torch.distributions.Distribution._validate_args is True


def test_compile_mode_is_checked_when_params_are_read(tmp_path):
    text = (gpu_bench.ROOT / "profiles" / "tiny.yaml").read_text()
    assert "\n  compile: eager" in text  # every profile names the option
    bad = tmp_path / "p.yaml"  # one file, as a profile
    bad.write_text(text.replace("\n  compile: eager", "\n  compile: off", 1))
    with pytest.raises(ParamsError, match="compile.*eager"):
        load_params(bad)
