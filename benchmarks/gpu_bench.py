"""The GPU benchmark of issue 15: priorlab's training step against a plain PyTorch loop, the
prior_init / evaluate work on the GPU and on the CPU, the CUDA exact-resume check, and the GPU-hours
of the paper profile.

Run from the project's root as ``PYTHONPATH=src python -m benchmarks.gpu_bench --out DIR`` (no install, no dvc or
dvclive needed; on a machine with torch only, ``make gpu-deps`` here unpacks the PyYAML and tqdm wheels it needs into
``.gpu_deps/``, to carry along and add to ``PYTHONPATH``); ``--tiny``
shrinks nets, data and step counts for a dry run on a CPU.  Sections, each written to
``DIR/gpu_bench.json`` as soon as it is measured:

(a) ``step``: ms per training step through priorlab's trainer — :func:`priorlab.train.fit` itself,
    with the data on the device, ``live_dir=None``, the paper's ``log_every`` — for the paper
    profile's nets (VAE on Smiley's MLP 3000 and on dSprites' conv net at 64 px, β-TCVAE, VSC with
    20 pseudo-inputs, the factorial mixture VAE at I = 2 with and without its semi-supervised
    factor), next to a minimal PyTorch loop in the same process with the *same* encoder and decoder
    modules (copies), batch 64, Gaussian reparameterisation, Bernoulli likelihood, analytic KL, Adam.
    The trainer's time per step is the difference of two ``fit`` calls of different lengths divided
    by the difference in steps (set-up costs cancel); both sides are timed between
    ``torch.cuda.synchronize()`` calls after a warm-up, interleaved over rounds (median).
(b) ``stage_work``: the prior_init work (:func:`priorlab.train.fit_prior`, what the stage runs) and
    :func:`priorlab.evaluation.evaluate_model` for the dSprites factorial mixture VAE on dSprites
    generated in-process, on the GPU and on the CPU, with reduced sizes (in the record).
(c) ``cuda_resume``: a run killed (SIGKILL) after step 25 of 40 and resumed from its step-20
    checkpoint ends with the same weights as an uninterrupted one, on the device (three processes).
(d) the JSON, rewritten after every measurement, and a table on stdout.
(e) ``gpu_hours``: the paper profile's cost from ``profiles/paper.yaml``: for every distinct
    (nets, model structure, batch) of its runs and pretrainings, ms/step measured as in (a) at that batch; training
    = Σ runs × steps × ms/step, pretraining likewise per setup; the prior_init iterations at the rate
    of (b); the importance-weighted bound at the paper's ``n_eval`` × ``iw_samples`` at the rate
    measured per (nets, model).  The metric algorithms (CPU, numpy) and the in-process studies are
    not included.

:func:`step_table` and :func:`paper_gpu_hours` are the GPU section of ``make bench``
(:mod:`benchmarks.bench`).

Two narrower modes: ``--ops`` counts the aten ops of one training step per case (with torch's CUDA
default, foreach Adam, and with fused Adam) and of the plain loop (on the CPU, no GPU needed: each
op is a kernel launch on a GPU) into ``DIR/step_ops.json``; ``--compile [MODE[,MODE]]`` runs only
(a), eager and then with the trainer's ``compile`` option (``OptimParams.compile``:
``nn.Module.compile`` of the model's forward pass) in each torch.compile mode (default "default";
section ``step_compiled.<mode>``), cases in the order of ``--cases``.  ``--adam IMPL`` sets the
trainer's ``adam_impl`` in (a) (the plain loop keeps torch's default Adam).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import functools
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import typing
from dataclasses import replace
from pathlib import Path

os.environ.setdefault("TQDM_DISABLE", "1")  # no progress bars in the benchmark's output

import priorlab  # noqa: E402,F401,I001  (before torch: priorlab sets OMP_WAIT_POLICY)
import numpy as np  # noqa: E402
import yaml  # noqa: E402
import torch  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

from priorlab.config import EvaluateParams, ModelParams, OptimParams, Params, SetupParams
from priorlab.data.store import Dataset
from priorlab.models import build_model
from priorlab.train import fit, fit_prior
from priorlab.train.trainer import ADAM_IMPLS

ROOT = Path(__file__).resolve().parents[1]
PAPER_PROFILE = ROOT / "profiles" / "paper.yaml"

COMPILE_MODES = tuple(m for m in typing.get_args(typing.get_type_hints(OptimParams)["compile"]) if m != "eager")
STEP_CASES = {  # (a): name -> (setup, model) of the paper profile
    "vae_mlp3000_smiley": ("smiley", "vae"),
    "vae_conv_dsprites64": ("dsprites", "vae"),
    "beta_tcvae_mlp3000_smiley": ("smiley18", "beta_tcvae"),
    "vsc_mlp3000_smiley_u20": ("smiley18_vsc", "vsc_smiley"),
    "fmvae_conv_dsprites64_i2": ("dsprites", "fmvae_i2"),
    "fmvae_ss_conv_dsprites64_i2": ("dsprites", "fmvae_ss"),
}
ISSUE_H200_MS = {  # issue 15's measurements before this work (H200, paper nets, batch 64), for reference
    "vae_mlp3000_smiley": "3.4", "vae_conv_dsprites64": "5.9-6.4", "beta_tcvae_mlp3000_smiley": "5.7",
    "vsc_mlp3000_smiley_u20": "6.0-8.5", "fmvae_ss_conv_dsprites64_i2": "17-27",
}
OBS_SHAPES = {"smiley": (1, 32, 32), "mnist": (1, 28, 28), "fashion_mnist": (1, 28, 28)}


# --------------------------------------------------------------------------- results


class Results:
    """The benchmark's record: a dict rewritten to ``path`` (atomically) after every change."""

    def __init__(self, path: Path, head: dict):
        self.path, self.data = Path(path), dict(head)
        self.save()

    def set(self, *keys_and_value) -> None:
        *keys, value = keys_and_value
        node = self.data
        for k in keys[:-1]:
            node = node.setdefault(k, {})
        node[keys[-1]] = value
        self.save()

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=2, sort_keys=False, default=str) + "\n")
        tmp.replace(self.path)


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


# --------------------------------------------------------------------------- profile, nets, data


def load_profile(path: Path = PAPER_PROFILE) -> Params:
    from priorlab.config import load_params

    return load_params(path)


def shrink_setup(setup: SetupParams) -> SetupParams:
    """``--tiny``: the same kind of nets, a few units wide."""
    return replace(setup, hidden=[min(h, 32) for h in setup.hidden], channels=[8] * len(setup.channels))


def obs_shape_of(params: Params, setup: str) -> tuple[int, ...]:
    ds = params.datasets[params.setup(setup).dataset]
    if ds.kind == "dsprites":
        return (1, ds.resolution, ds.resolution)
    if ds.kind in OBS_SHAPES:
        return OBS_SHAPES[ds.kind]
    from priorlab.data.store import build_arrays

    return tuple(build_arrays(replace(ds, n_train=2, n_test=1))["x_train"].shape[1:])


def synthetic_dataset(obs_shape: tuple[int, ...], n: int, seed: int = 0) -> Dataset:
    """Binary images of ``obs_shape`` (rows: ``n`` train, ``n // 4`` test) with a 3-valued factor
    ``shape`` and 10 class labels, so that every model of the profile binds to it (step timing only:
    the cost of a step does not depend on the pixels)."""
    g = np.random.RandomState(seed)
    n_test = max(1, n // 4)
    arrays = {}
    for split, rows in (("train", n), ("test", n_test)):
        arrays[f"x_{split}"] = (g.rand(rows, *obs_shape) > 0.7).astype(np.uint8)
        arrays[f"factors_{split}"] = g.randint(0, 3, size=(rows, 1)).astype(np.int64)
        arrays[f"labels_{split}"] = g.randint(0, 10, size=rows).astype(np.int64)
    return Dataset(name="bench", arrays=arrays, manifest={"factor_names": ["shape"], "factor_sizes": [3],
                                                          "num_classes": 10, "pixel_max": 1})


def build_bound(setup: SetupParams, spec: ModelParams, data: Dataset, phase: str, seed: int = 0):
    torch.manual_seed(seed)
    model = build_model(setup, spec, data.obs_shape)
    model.bind_data(data)
    model.set_phase(phase)
    return model


# --------------------------------------------------------------------------- (a) step timing


def fit_seconds(model, data: Dataset, steps: int, device: torch.device, workdir: Path, batch: int = 64,
                log_every: int = 500, compile: str = "eager", adam_impl: str = "auto") -> float:
    """Wall seconds of one ``fit`` call of ``steps`` steps (no checkpoint written, no curves)."""
    opt = OptimParams(steps=steps, batch_size=batch, lr=1e-4, checkpoint_every=10**9, log_every=log_every, seed=0,
                      compile=compile, adam_impl=adam_impl)
    sync(device)
    t0 = time.perf_counter()
    fit(model, model.training_set(data), opt, checkpoint=workdir / "bench_ck.pt", live_dir=None,
        fingerprint="gpu-bench", device=device, desc="bench")
    sync(device)
    return time.perf_counter() - t0


class PlainLoop:
    """The minimal PyTorch VAE loop on copies of a model's encoder and decoder: a batch of 64 drawn on
    the device, q = N(μ, σ²) from the first 2J encoder outputs, one reparameterised draw, the model's own
    log-likelihood (Bernoulli logits, or paper 002's decoded-variance Gaussian), analytic KL to N(0, I),
    Adam.  No logging, no checks."""

    def __init__(self, model, data: Dataset, device: torch.device, batch: int = 64, foreach: bool | None = None):
        self.encoder = copy.deepcopy(model.encoder).to(device).train()
        self.decoder = copy.deepcopy(model.decoder).to(device).train()
        self.likelihood = copy.deepcopy(model.likelihood).to(device)
        self.latent = model.posterior_head.latent_dim
        self.x = data.x("train").to(device)
        self.batch, self.device = batch, device
        self.opt = torch.optim.Adam([*self.encoder.parameters(), *self.decoder.parameters()], lr=1e-4, foreach=foreach)

    def step(self) -> None:
        j = self.latent
        idx = torch.randint(self.x.shape[0], (self.batch,), device=self.device)
        x = self.x[idx].float()
        h = self.encoder(x)
        mu, logvar = h[:, :j], h[:, j : 2 * j].clamp(-12.0, 8.0)
        z = mu + torch.exp(0.5 * logvar) * torch.randn_like(mu)
        rec = -self.likelihood.log_prob(x, self.decoder(z))
        kl = 0.5 * (mu * mu + logvar.exp() - 1.0 - logvar).sum(1)
        loss = (rec + kl).mean()
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()

    def seconds(self, steps: int) -> float:
        sync(self.device)
        t0 = time.perf_counter()
        for _ in range(steps):
            self.step()
        sync(self.device)
        return time.perf_counter() - t0


def trainer_vs_plain(model, data: Dataset, device: torch.device, workdir: Path, short: int, long: int,
                     rounds: int, warmup: int, compile: str = "eager", adam_impl: str = "auto") -> dict:
    """ms/step of ``fit`` (difference of a ``long`` and a ``short`` run) and of :class:`PlainLoop`
    (``long - short`` steps), ``rounds`` interleaved rounds after ``warmup`` steps of each; ``compile``
    and ``adam_impl``: the trainer's options of those names (the compile time is in the warm-up,
    reported as ``warmup_s``, with the number of graphs dynamo compiled; the plain loop stays eager,
    with torch's default Adam)."""
    plain = PlainLoop(model, data, device)
    fit_steps = functools.partial(fit_seconds, model, data, device=device, workdir=workdir, compile=compile,
                                  adam_impl=adam_impl)
    graphs = _dynamo_graphs()
    t0 = time.perf_counter()
    fit_steps(warmup)
    warmup_s = time.perf_counter() - t0
    plain.seconds(warmup)
    ours, base = [], []
    n = long - short
    for _ in range(rounds):
        ours.append(1e3 * (fit_steps(long) - fit_steps(short)) / n)
        base.append(1e3 * plain.seconds(n) / n)
    t, p = float(np.median(ours)), float(np.median(base))
    return {"trainer_ms": t, "plain_ms": p, "ratio": t / p, "trainer_rounds_ms": ours, "plain_rounds_ms": base,
            "compile": compile, "adam_impl": adam_impl, "warmup_s": round(warmup_s, 2),
            "graphs_compiled": _dynamo_graphs() - graphs}


def _dynamo_graphs() -> int:
    """Graphs dynamo has compiled in this process so far (0 before its first use)."""
    from torch._dynamo.utils import counters

    return int(counters["stats"]["unique_graphs"])


class OpCounter(TorchDispatchMode):
    """Counts the aten ops dispatched inside its ``with`` block."""

    def __init__(self):
        super().__init__()
        self.n = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.n += 1
        return func(*args, **(kwargs or {}))


def step_ops(model, data: Dataset, batch: int = 64, steps: int = 3, adam_impl: str = "foreach") -> int:
    """aten ops dispatched by the last of ``steps`` training steps of ``model`` (forward, backward,
    Adam in ``adam_impl``, by default ``foreach`` as torch picks on CUDA, the model's after-step
    updates), counted on the CPU: each is a kernel launch on a GPU, the cost that dominates a
    small-batch step there."""
    from priorlab.device import deferred_value_checks
    from priorlab.models.protocol import StepContext
    from priorlab.train.trainer import BatchSampler, adam

    ts = model.training_set(data)
    optimizer = adam(model.param_groups(1e-4), OptimParams(steps=steps, batch_size=batch, lr=1e-4,
                                                           adam_impl=adam_impl))
    sampler = BatchSampler(ts.x.shape[0], batch, seed=0, device="cpu")
    counter = OpCounter()
    with deferred_value_checks():
        for step in range(1, steps + 1):
            model.before_step(step)
            x = ts.batch(sampler.next())
            with counter if step == steps else contextlib.nullcontext():
                model.train_step(x, step, StepContext(optimizer, 1.0, wants_logs=False))
    return counter.n


def plain_step_ops(model, data: Dataset) -> int:
    """:func:`step_ops` of :class:`PlainLoop` on copies of ``model``'s nets."""
    plain = PlainLoop(model, data, torch.device("cpu"), foreach=True)
    plain.step()
    counter = OpCounter()
    with counter:
        plain.step()
    return counter.n


def ops_table(params: Params | None = None, cases: dict | None = None) -> dict[str, dict]:
    """``--ops``: :func:`step_ops` (torch's CUDA default, foreach Adam, and ``fused_adam``: the fused
    implementation) and :func:`plain_step_ops` for each case, on the CPU, with the paper nets' layers a
    few units wide (the count depends on the layers, not their width)."""
    params = params or load_profile()
    rows = {}
    for case, (setup_name, model_name) in (cases or STEP_CASES).items():
        data = synthetic_dataset(obs_shape_of(params, setup_name), 256)
        rows[case] = {}
        for impl, key in (("foreach", "ops"), ("fused", "fused_adam")):
            torch.manual_seed(0)
            model = build_bound(shrink_setup(params.setup(setup_name)), params.model(model_name), data, "train")
            rows[case][key] = step_ops(model, data, adam_impl=impl)
        rows[case]["plain_ops"] = plain_step_ops(model, data)
    return rows


def step_table(device: torch.device, params: Params | None = None, tiny: bool = False, rounds: int = 3,
               cases: dict | None = None, workdir: Path | None = None, on_result=None,
               compile: str = "eager", adam_impl: str = "auto") -> dict[str, dict]:
    """(a): ``{case: {trainer_ms, plain_ms, ratio, ...}}`` for :data:`STEP_CASES` (or ``cases``).
    ``on_result(case, row)`` is called after each case (the benchmark saves its record there)."""
    params = params or load_profile()
    short, long, warmup = (3, 8, 3) if tiny else (20, 170, 30)
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(workdir or tmp)
        for case, (setup_name, model_name) in (cases or STEP_CASES).items():
            setup = params.setup(setup_name)
            setup = shrink_setup(setup) if tiny else setup
            data = synthetic_dataset(obs_shape_of(params, setup_name), 256 if tiny else 8192)
            spec = params.model(model_name)
            model = build_bound(setup, spec, data, "train")
            try:
                row = trainer_vs_plain(model, data, device, workdir, short, long, rounds, warmup, compile,
                                       adam_impl)
            except Exception as exc:  # noqa: BLE001  (a compiled case that fails is recorded; the others still run)
                if compile == "eager":
                    raise
                row = {"error": f"{type(exc).__name__}: {str(exc)[:2000]}", "compile": compile}
            row.update(setup=setup_name, model=model_name, kind=spec.kind, encoder=setup.encoder,
                       hidden=setup.hidden, latent_dim=setup.latent_dim, batch_size=64,
                       obs_shape=list(data.obs_shape), issue_h200_ms=ISSUE_H200_MS.get(case))
            rows[case] = row
            if on_result is not None:
                on_result(case, row)
            del model
            if device.type == "cuda":
                torch.cuda.empty_cache()
    return rows


# --------------------------------------------------------------------------- (b) prior_init / evaluate


def dsprites_dataset(workdir: Path, resolution: int, n_train: int, n_test: int):
    """dSprites generated here (priorlab.data), written and loaded as the data stage would."""
    from priorlab.config import DSpritesParams
    from priorlab.data.store import build_arrays, ground_truth, load_dataset, write_dataset

    p = DSpritesParams(kind="dsprites", n_train=n_train, n_test=n_test, resolution=resolution, seed=0)
    out = workdir / f"dsprites{resolution}"
    write_dataset(out, p, build_arrays(p))
    return load_dataset(out), ground_truth(p)


def stage_work(device: torch.device, params: Params | None = None, tiny: bool = False, case=("dsprites", "fmvae_i2"),
               on_result=None) -> dict:
    """(b): seconds of the prior_init work and of ``evaluate_model`` for one model, on ``device`` and
    on the CPU (same seeds, same sizes), and the prior_init iteration rate on ``device``."""
    from priorlab.evaluation import evaluate_model
    from priorlab.models.estimates import encode_means, evaluate_elbo

    params = params or load_profile()
    setup_name, model_name = case
    setup = params.setup(setup_name)
    setup = shrink_setup(setup) if tiny else setup
    res = params.datasets[setup.dataset].resolution if params.datasets[setup.dataset].kind == "dsprites" else 64
    sizes = dict(n_train=600, n_test=200, prior_init_steps=20, n_eval=50, iw_samples=4, metric_num_train=100,
                 metric_num_test=50) if tiny else \
        dict(n_train=5000, n_test=1000, prior_init_steps=500, n_eval=300, iw_samples=50, metric_num_train=500,
             metric_num_test=250)
    spec = replace(params.model(model_name), prior_init_steps=sizes["prior_init_steps"])
    ev = EvaluateParams(n_eval=sizes["n_eval"], iw_samples=sizes["iw_samples"], batch_size=100,
                        metric_num_train=sizes["metric_num_train"], metric_num_test=sizes["metric_num_test"],
                        metric_batch_size=64, metrics=["mig", "sap"], seed=0)
    out = {"setup": setup_name, "model": model_name, "sizes": sizes, "metrics": ev.metrics,
           "cpu_threads": torch.get_num_threads(), "device": {}, "cpu": {}}
    with tempfile.TemporaryDirectory() as tmp:
        data, truth = dsprites_dataset(Path(tmp), res, sizes["n_train"], sizes["n_test"])
        # one-time costs (imports of the metric libraries, first calls) outside the timed runs
        warm = build_bound(setup, replace(spec, prior_init_steps=2), data, "train").eval()
        evaluate_model(warm, data, truth, replace(ev, n_eval=20, iw_samples=2, metric_num_train=20, metric_num_test=10),
                       profile="gpu-bench")
        del warm
        devices = [("device", device), ("cpu", torch.device("cpu"))]
        for label, dev in devices:
            model = build_bound(setup, spec, data, "prior_init")
            for p in model.parameters():
                p.requires_grad_(False)
            sync(dev)
            t0 = time.perf_counter()
            logs = fit_prior(model, model.training_set(data), device=dev, seed=0)
            sync(dev)
            out[label]["prior_init_s"] = time.perf_counter() - t0
            out[label]["prior_init_kl_z"] = logs.get("kl_z")
            if label == "device":  # the iteration rate: the same init with no SVI iterations
                zero = build_bound(setup, replace(spec, prior_init_steps=0), data, "prior_init")
                for p in zero.parameters():
                    p.requires_grad_(False)
                sync(dev)
                t0 = time.perf_counter()
                fit_prior(zero, zero.training_set(data), device=dev, seed=0)
                sync(dev)
                base = time.perf_counter() - t0
                out[label]["prior_init_ms_per_iteration"] = \
                    1e3 * max(out[label]["prior_init_s"] - base, 0.0) / max(1, sizes["prior_init_steps"])
                del zero
            for p in model.parameters():
                p.requires_grad_(True)
            model.set_phase("train")
            model.to(dev).eval()
            x = data.prepare(data.x("test")[: sizes["n_eval"]])
            torch.manual_seed(0)
            sync(dev)
            t0 = time.perf_counter()
            evaluate_elbo(model, x, sizes["iw_samples"], 100)
            sync(dev)
            out[label]["iw_bound_s"] = time.perf_counter() - t0
            t0 = time.perf_counter()
            encode_means(model, data.prepare(data.x("train")), 500)
            out[label]["encode_train_s"] = time.perf_counter() - t0
            t0 = time.perf_counter()
            result = evaluate_model(model, data, truth, ev, profile="gpu-bench", device=dev)
            sync(dev)
            out[label]["evaluate_model_s"] = time.perf_counter() - t0
            out[label]["elbo"] = result["test"]["elbo"]
            if on_result is not None:
                on_result(out)
            del model
    for key in ("prior_init_s", "iw_bound_s", "encode_train_s", "evaluate_model_s"):
        out[f"speedup_{key}"] = out["cpu"][key] / out["device"][key] if out["device"][key] > 0 else None
    return out


# --------------------------------------------------------------------------- (c) exact resume

RESUME_SCRIPT = """
import sys, torch
sys.path.insert(0, {src!r})
from priorlab.config import OptimParams, SetupParams, VSCParams
from priorlab.models import build_model
from priorlab.models.protocol import TrainingSet
from priorlab.train import fit
torch.manual_seed(0)
model = build_model(SetupParams(dataset="x", latent_dim=8, hidden=[64]), VSCParams(kind="vsc", n_pseudo_inputs=4,
                    warmup_ramp_steps=30), (1, 16, 16))
model.set_phase("train")
g = torch.Generator().manual_seed(1)
x = (torch.rand(400, 1, 16, 16, generator=g) > 0.7).float()
opt = OptimParams(steps=40, batch_size=32, lr=1e-3, checkpoint_every=10, log_every=5, seed=3)
fit(model, TrainingSet(x, lambda b: b), opt, checkpoint={ckpt!r}, live_dir=None, fingerprint="fp", device={device!r})
torch.save(model.state_dict(), {out!r})
"""


def resume_check(device: torch.device, workdir: Path) -> dict:
    """(c): VSC (both of its random draws per step come from the device's generator) trained 40 steps in
    one process, and killed after step 25 then resumed in two more: final weights equal?"""
    from priorlab.train.trainer import KILL_ENV

    src = str(ROOT / "src")
    env = {k: v for k, v in os.environ.items() if k != KILL_ENV}

    def run(name: str, kill_at: int | None = None):
        ckpt, out = workdir / f"{name}.ckpt", workdir / f"{name}.pt"
        script = RESUME_SCRIPT.format(src=src, ckpt=str(ckpt), out=str(out), device=str(device))
        run_env = {**env, KILL_ENV: str(kill_at)} if kill_at else env
        proc = subprocess.run([sys.executable, "-c", script], env=run_env, capture_output=True, text=True)
        return proc, ckpt, out

    t0 = time.perf_counter()
    ref, _, ref_out = run("reference")
    killed, ckpt, _ = run("killed", kill_at=25)
    row = {"device": str(device), "reference_rc": ref.returncode, "killed_rc": killed.returncode}
    if ref.returncode != 0:
        row.update(ok=False, error=ref.stderr[-1500:])
        return row
    state = torch.load(ckpt, weights_only=False) if ckpt.exists() else {}
    row.update(checkpoint_step=state.get("step"), checkpoint_has_cuda_rng=state.get("cuda_rng") is not None)
    resumed, _, out = run("killed")
    row["resumed_rc"] = resumed.returncode
    if resumed.returncode != 0:
        row.update(ok=False, error=resumed.stderr[-1500:])
        return row
    a, b = torch.load(ref_out), torch.load(out)
    row["tensors_equal"] = sum(torch.equal(a[k], b[k]) for k in a)
    row["tensors"] = len(a)
    row["ok"] = (killed.returncode == -9 and row["checkpoint_step"] == 20 and row["tensors_equal"] == len(a)
                 and (device.type != "cuda" or row["checkpoint_has_cuda_rng"]))
    row["seconds"] = time.perf_counter() - t0
    return row


# --------------------------------------------------------------------------- (e) GPU-hours


STEP_BATCH = 64  # the batch of the step table (a) and of records made before cost keys held the batch


def phase_batch(params: Params, spec: ModelParams, phase: str) -> int:
    """The batch a model trains ``phase`` at (its own ``<phase>_phase`` setting, else the profile's)."""
    return spec.phase(phase, getattr(params, phase)).batch_size


def cost_key(params: Params, setup_name: str, spec: ModelParams, phase: str, batch: int | None = None) -> str:
    """What the cost of a step depends on: the nets and observation shape, the model kind and the
    structural settings of the kind (components, factors, a supervised factor, pseudo-inputs, the
    spike pre-training phase) and the batch (default: the phase's, :func:`phase_batch`); not β, α or
    schedules."""
    s = params.setup(setup_name)
    net = [s.encoder, s.decoder, list(s.hidden), list(s.channels), s.latent_dim, s.likelihood,
           list(obs_shape_of(params, setup_name))]
    kind = spec.kind
    if kind == "fmvae":
        extra = [list(spec.components()), spec.num_factors,
                 bool(spec.supervised_factor) and spec.labelled_fraction > 0 and spec.delta > 0]
    elif kind == "vsc":
        extra = [spec.n_pseudo_inputs, phase == "pretrain"]
    elif kind == "beta_tcvae":
        extra = [spec.estimator]
    elif kind == "vae":
        extra = [getattr(getattr(spec, "prior", None), "kind", "standard_normal")]
    else:
        extra = [json.dumps(spec.record() if hasattr(spec, "record") else str(spec), sort_keys=True, default=str)]
    return json.dumps([kind, net, extra, batch or phase_batch(params, spec, phase)])


def paper_work(params: Params) -> dict[str, dict]:
    """Every distinct cost key of the profile's runs and pretrainings, with one (setup, model, phase)
    to measure it on and the steps (``pretrain_steps`` of them pretraining), runs, IW evaluations and
    prior_init iterations that use it."""
    work: dict[str, dict] = {}

    def add(setup: str, model: str, phase: str, steps: int, runs: int, evals: int, prior_init_steps: int):
        spec = params.model(model)
        key = cost_key(params, setup, spec, phase)
        w = work.setdefault(key, {"key": key, "setup": setup, "model": model, "phase": phase, "kind": spec.kind,
                                  "batch": phase_batch(params, spec, phase), "steps": 0, "pretrain_steps": 0,
                                  "runs": 0, "evaluations": 0, "prior_init_steps": 0})
        w["steps"] += steps
        w["pretrain_steps"] += steps if phase == "pretrain" else 0
        w["runs"] += runs
        w["evaluations"] += evals
        w["prior_init_steps"] += prior_init_steps

    used = []
    for name, run in params.runs.items():
        spec = params.model(run.model)
        steps = getattr(spec, "train_steps", 0) or params.train.steps
        add(run.setup, run.model, "train", steps, 1, 1, getattr(spec, "prior_init_steps", 0) or 0)
        if run.setup not in used:
            used.append(run.setup)
    for setup in used:
        s = params.setup(setup)
        if not s.pretraining:
            continue
        spec = params.model(s.pretrain_model)
        add(setup, s.pretrain_model, "pretrain", getattr(spec, "pretrain_steps", 0) or params.pretrain.steps, 0, 0, 0)
    return work


def iw_rate(model, data: Dataset, device: torch.device, rows: int, k: int) -> float:
    """Importance samples per second of the IW bound (:func:`evaluate_elbo`, batch 100, chunks of 50)."""
    from priorlab.models.estimates import evaluate_elbo

    model.to(device).eval()
    x = data.prepare(data.x("test")[:rows])
    evaluate_elbo(model, x[: min(rows, 10)], min(k, 10), 100)  # warm-up
    sync(device)
    t0 = time.perf_counter()
    evaluate_elbo(model, x, k, 100)
    sync(device)
    return rows * k / (time.perf_counter() - t0)


def paper_gpu_hours(device: torch.device, params: Params | None = None, tiny: bool = False, measured=None,
                    prior_init_ms: float | None = None, deadline: float | None = None, on_result=None) -> dict:
    """(e): the paper profile's GPU-hours from measured ms/step per cost key (``measured``: rows of
    :func:`step_table` to reuse, keyed by case).  Keys left unmeasured at ``deadline`` take the ms/step
    of a measured key of the same kind and nets (else of the kind), flagged in the record; the first key
    (a) did not measure is measured whatever the deadline (the section measures something of its own)."""
    params = params or load_profile()
    work = paper_work(params)
    reuse = {}
    for case, row in (measured or {}).items():
        setup, model = STEP_CASES.get(case, (row.get("setup"), row.get("model")))
        reuse[cost_key(params, setup, params.model(model), "train", batch=STEP_BATCH)] = row["trainer_ms"]
    short, long = (2, 5) if tiny else (10, 70)
    rows_iw, k_iw = (10, 4) if tiny else (100, 100)
    with tempfile.TemporaryDirectory() as tmp:
        for key, w in work.items():
            if key in reuse:
                w["ms_per_step"], w["how"] = reuse[key], "step table (a)"
            elif deadline is not None and time.perf_counter() > deadline and \
                    any(v.get("how") == "measured" for v in work.values()):
                continue
            else:
                setup = params.setup(w["setup"])
                setup = shrink_setup(setup) if tiny else setup
                data = synthetic_dataset(obs_shape_of(params, w["setup"]), max(256 if tiny else 4096, w["batch"]))
                model = build_bound(setup, params.model(w["model"]), data, w["phase"])
                fit_seconds(model, data, short, device, Path(tmp), batch=w["batch"])  # warm-up
                dt = (fit_seconds(model, data, long, device, Path(tmp), batch=w["batch"])
                      - fit_seconds(model, data, short, device, Path(tmp), batch=w["batch"]))
                w["ms_per_step"], w["how"] = 1e3 * dt / (long - short), "measured"
                if w["evaluations"] and (deadline is None or time.perf_counter() < deadline):
                    w["iw_samples_per_s"] = iw_rate(model, data, device, rows_iw, k_iw)
                del model
            if on_result is not None:
                on_result(work)
    measured_keys = [k for k, w in work.items() if "ms_per_step" in w]
    for key, w in work.items():  # the unmeasured (deadline): borrow from the most similar measured key
        if "ms_per_step" in w:
            continue
        kind, net = json.loads(key)[:2]
        same = [k for k in measured_keys if json.loads(k)[:2] == [kind, net]] or \
            [k for k in measured_keys if json.loads(k)[0] == kind] or measured_keys
        if same:
            w["ms_per_step"], w["how"] = max(work[k]["ms_per_step"] for k in same), "borrowed (time budget)"
    ev = params.evaluate
    train_h = pre_h = eval_h = 0.0
    rates = [w["iw_samples_per_s"] for w in work.values() if w.get("iw_samples_per_s")]
    for w in work.values():
        ms = w.get("ms_per_step")
        if ms is None:
            continue
        w["gpu_hours"] = w["steps"] * ms / 3.6e6
        pre_h += w["pretrain_steps"] * ms / 3.6e6
        train_h += (w["steps"] - w["pretrain_steps"]) * ms / 3.6e6
        if w["evaluations"]:
            rate = w.get("iw_samples_per_s") or (min(rates) if rates else None)
            if rate:
                w["iw_gpu_hours"] = w["evaluations"] * ev.n_eval * ev.iw_samples / rate / 3600
                eval_h += w["iw_gpu_hours"]
    prior_iters = sum(w["prior_init_steps"] for w in work.values())
    prior_h = prior_iters * prior_init_ms / 3.6e6 if prior_init_ms is not None else None
    total = train_h + pre_h + eval_h + (prior_h or 0.0)
    return {"runs": len(params.runs), "cost_keys": len(work), "train_gpu_hours": train_h,
            "pretrain_gpu_hours": pre_h, "iw_bound_gpu_hours": eval_h, "prior_init_gpu_hours": prior_h,
            "prior_init_iterations": prior_iters, "total_gpu_hours": total,
            "n_eval": ev.n_eval, "iw_samples": ev.iw_samples,
            "not_included": "metric algorithms (CPU), data/figures/report stages, the in-process studies "
                            "(isa_study, sparse_vae_study, supervised_ceiling, mssc_study), prior_init encodings",
            "work": list(work.values())}


# --------------------------------------------------------------------------- main


def environment(device: torch.device) -> dict:
    """Versions and settings the timings depend on."""
    env = {"torch": torch.__version__, "python": platform.python_version(), "machine": platform.machine(),
           "cpu_threads": torch.get_num_threads(), "device": str(device),
           "cudnn_benchmark": torch.backends.cudnn.benchmark,
           "matmul_tf32": torch.backends.cuda.matmul.allow_tf32}
    if device.type == "cuda":
        env["gpu"] = torch.cuda.get_device_name(device)
        env["cuda"] = torch.version.cuda
    return env


def print_step_table(rows: dict) -> None:
    print(f"\n(a) ms per training step, batch 64: priorlab's fit vs a plain PyTorch loop (same nets)")
    print(f"{'case':32s} {'trainer':>9s} {'plain':>9s} {'ratio':>7s} {'issue (H200)':>13s}")
    for case, r in rows.items():
        if "error" in r:
            print(f"{case:32s} failed: {r['error'][:200]}")
            continue
        print(f"{case:32s} {r['trainer_ms']:9.2f} {r['plain_ms']:9.2f} {r['ratio']:7.2f} {r.get('issue_h200_ms') or '-':>13s}")


def print_gpu_hours(hours: dict, device_name: str) -> None:
    """The table of :func:`paper_gpu_hours`: one row per distinct nets/model, then the totals."""
    print(f"\n(e) paper profile ({hours['runs']} runs, {hours['cost_keys']} distinct nets/models) on {device_name}:")
    print(f"{'setup':18s} {'model':20s} {'kind':10s} {'runs':>4s} {'ms/step':>8s} {'steps':>9s} {'GPU-h':>7s} how")
    for w in hours["work"]:
        ms = w.get("ms_per_step")
        print(f"{w['setup']:18s} {w['model']:20s} {w['kind']:10s} {w['runs']:4d} "
              f"{(f'{ms:.2f}' if ms is not None else '-'):>8s} {w['steps']:9d} {w.get('gpu_hours', 0):7.2f} {w.get('how', '-')}")
    fmt = lambda v: "-" if v is None else f"{v:.1f}"  # noqa: E731
    print(f"training {fmt(hours['train_gpu_hours'])} h + pretraining {fmt(hours['pretrain_gpu_hours'])} h + "
          f"prior_init {fmt(hours['prior_init_gpu_hours'])} h + IW bound ({hours['n_eval']} x {hours['iw_samples']}) "
          f"{fmt(hours['iw_bound_gpu_hours'])} h = {fmt(hours['total_gpu_hours'])} GPU-hours")


CLAIM_GROUPS: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(("001.elbo_rises", "001.elbo_saturates", "001.kl_r_rises", "001.kl_z_falls"),
                    ("fmvae_experiments/elbo_vs_k",)),
    **dict.fromkeys(("001.semi_supervised", "001.semi_supervised_relative"), ("fmvae_experiments/semi_supervised",)),
    **dict.fromkeys(("002.vsc_contrast_kept", "002.vsc_used_latents", "002.beta_vae_degrades",
                     "002.beta_tcvae_degrades", "002.vsc_beats_beta_vae"), ("vsc_experiments/smiley",)),
    **dict.fromkeys(("002.vsc_elbo_alpha", "002.beta_vae_elbo_beta", "002.vsc_elbo_comparable",
                     "002.class_spike_patterns"), ("vsc_experiments/elbo",)),
    "002.spikes_input_dependent": ("vsc_experiments/smiley", "vsc_experiments/elbo"),
}
"""The pipeline runs each claim of papers 001 and 002 is decided on (its runs' groups in ``runs:``)."""

ISA_RECORD = ROOT / "reports" / "gpu" / "isa_core_h200"
"""Paper 004's measured GPU run (``outcome_seeds_*.json``: every stage's wall): cells of two models (β-VAE and
ISA-VAE at β ∈ {1, 2} is one model per strength: 2 per cell) of 3,550 steps at batch 2048, 6 workers on one H200."""
BENCHMARK_SPEED = ROOT / "reports" / "benchmark_speed"  # `make benchmark-speed` records (CPU step ratios per prior)
ISA_RECORD_STEPS, ISA_RECORD_MODELS_PER_CELL = 3550, 2


def isa_seconds_per_model_step(outcomes: list[dict]) -> float:
    """GPU seconds per model and training step of paper 004's study, from the walls of a measured run:
    each run's cells share the GPU, so a run holds it for its longest ``isa_fit`` cell; divided by the
    models and steps they trained. Scoring is included and does not shrink with fewer steps: an upper
    estimate at longer training, a lower one at shorter."""
    held = sum(max(w for n, w in o["wall_s"].items() if n.startswith("isa_fit@")) for o in outcomes)
    models = sum(sum(n.startswith("isa_fit@") for n in o["wall_s"]) for o in outcomes) * ISA_RECORD_MODELS_PER_CELL
    return held / (models * ISA_RECORD_STEPS)


def isa_gpu_hours(params: Params, s_per_model_step: float) -> dict[str, float]:
    """Paper 004's study at ``params``' grid and length: the whole grid, and the claim's (004.isa_mig:
    the models of kind vae, β-VAE and ISA-VAE, at every β and seed)."""
    study = params.isa_study
    per_model = study.train.steps * s_per_model_step / 3600
    grid = {m: len(study.gammas if params.models[m].kind == "factor_vae" else study.betas) * len(study.seeds)
            for m in study.models}
    return {"isa_study": round(sum(grid.values()) * per_model, 2),
            "004.isa_mig": round(sum(n for m, n in grid.items() if params.models[m].kind == "vae") * per_model, 2)}


NET_FIELDS = ("dataset", "encoder", "decoder", "hidden", "channels", "latent_dim", "likelihood")


def same_nets(setup: SetupParams, then: dict) -> bool:
    """Whether ``setup`` still has the nets ``then`` (a setup's :data:`NET_FIELDS` when a record was made) lists."""
    return all(getattr(setup, k) == v for k, v in then.items() if k in NET_FIELDS)


def record_ms(record: dict, params: Params, record_setups: dict | None = None):
    """``(ms_of, stale)``: ``ms_of(cost key)`` → (the ms/step of a training step on the record's GPU,
    how it was found: ``measured``, ``other batch`` (the same step measured at another batch: the
    slowest such), ``borrowed`` (the slowest measured key of its kind and nets, else of its kind) or
    ``unmeasured`` (None)); ``stale``, the record's rows whose setup's nets have changed since."""
    measured = {}  # each row's cost key: its own, or (older records) under ``params`` if its setup's nets are unchanged
    stale = []
    for w in record["gpu_hours"]["work"]:
        if "ms_per_step" not in w:
            continue
        if "key" not in w:
            if w["setup"] not in params.setups or w["model"] not in params.models:
                continue
            if not same_nets(params.setup(w["setup"]), (record_setups or {}).get(w["setup"], {})):
                stale.append(f"{w['setup']}/{w['model']}/{w['phase']}")
                continue
        key = w.get("key") or cost_key(params, w["setup"], params.model(w["model"]), w["phase"],
                                       batch=w.get("batch", STEP_BATCH))
        measured[key] = w["ms_per_step"]

    def ms_of(key: str) -> tuple[float | None, str]:
        if key in measured:
            return measured[key], "measured"
        kind, net, extra, _ = json.loads(key)
        other_batch = [k for k in measured if json.loads(k)[:3] == [kind, net, extra]]
        if other_batch:  # the same step at another batch (a lower bound when the record's batch is smaller)
            return max(measured[k] for k in other_batch), "other batch"
        same = [k for k in measured if json.loads(k)[:2] == [kind, net]] or \
            [k for k in measured if json.loads(k)[0] == kind]
        return (max(measured[k] for k in same), "borrowed") if same else (None, "unmeasured")

    return ms_of, stale


def benchmark_gpu_hours(record: dict, params: Params, record_setups: dict | None = None,
                        cpu_speed: dict | None = None) -> dict:
    """The cross-prior benchmark's training GPU-hours under ``params`` (issue 45), priced as
    :func:`reestimate` prices runs: each image cell's seeds that it trains (not those it reads from
    paper 004's ``isa_fit`` cells, not the priors its nets refuse) at ``benchmark.train``'s steps and
    batch.  A cell whose kind the record has no usable step of is ``unmeasured``; with ``cpu_speed``
    (a ``make benchmark-speed`` record) it is also extrapolated, apart: the VAE's GPU step on its setup
    times the prior's CPU step ratio to the VAE there (a CPU ratio, so a guess for a launch-bound GPU).
    The synthetic table's fits (paper 003's vector data: nets the record never measured) are counted,
    not priced; its sparse VAE fits are paper 003's own."""
    from priorlab.studies.benchmark.fit import prior_spec, reused_model
    from priorlab.studies.benchmark.synthetic import SYNTHETIC, study_method

    ms_of, _ = record_ms(record, params, record_setups)
    bench = params.benchmark
    cells, how, hours, guessed = [], {}, 0.0, 0.0
    tables = (cpu_speed or {}).get("tables", {})
    for setup in bench.setups:
        obs = obs_shape_of(params, setup)
        vae_ms = ms_of(cost_key(params, setup, prior_spec(params, "vae", setup), "train",
                                batch=bench.train.batch_size))[0] if "vae" in bench.priors else None
        for prior in bench.priors:
            spec = prior_spec(params, prior, setup)
            try:
                build_model(params.setup(setup), spec, obs)
            except ValueError as exc:  # ParamsError included: the row shows as not run
                cells.append({"setup": setup, "prior": prior, "trained_seeds": 0, "not_run": str(exc)[:120]})
                continue
            trained = [seed for seed in bench.seeds if reused_model(params, setup, spec, seed) is None]
            key = cost_key(params, setup, spec, "train", batch=bench.train.batch_size)
            ms, how[key] = ms_of(key)
            h = None if ms is None else len(trained) * bench.train.steps * ms / 3.6e6
            hours += h or 0.0
            cell = {"setup": setup, "prior": prior, "kind": spec.kind, "trained_seeds": len(trained),
                    "steps": bench.train.steps, "batch": bench.train.batch_size, "ms_per_step": ms,
                    "how": how[key], "gpu_hours": None if h is None else round(h, 3)}
            ratio = tables.get(setup, {}).get("priors", {}).get(prior, {}).get("ratio_to_vae")
            if ms is None and ratio is not None and vae_ms is not None:
                cell["extrapolated_ms_per_step"] = vae_ms * ratio
                cell["extrapolated_gpu_hours"] = round(len(trained) * bench.train.steps * vae_ms * ratio / 3.6e6, 3)
                guessed += cell["extrapolated_gpu_hours"]
            cells.append(cell)
    synthetic = bench.synthetic
    fits = {prior: sum(study_method(params, prior_spec(params, prior, SYNTHETIC), seed) is None
                       for seed in range(synthetic.datasets_per_rho)) * len(synthetic.rhos)
            for prior in bench.priors} if synthetic.rhos else {}
    return {"image_cells_gpu_hours": round(hours, 2), "extrapolated_gpu_hours": round(guessed, 2),
            "unmeasured_cells": sum(c.get("how") == "unmeasured" and c["trained_seeds"] > 0 for c in cells),
            "extrapolated_from": (cpu_speed or {}).get("profile"), "cells": cells,
            "cost_keys": {v: sum(h == v for h in how.values()) for v in ("measured", "other batch", "borrowed",
                                                                          "unmeasured")},
            "synthetic_fits_not_priced": {"fits": fits, "steps_each": params.sparse_vae_study.train.steps},
            "not_included": "scoring (the IW bound, the metrics); the synthetic table's fits (counted above)"}


def reestimate(record: dict, params: Params, record_setups: dict | None = None, speedup=None) -> dict:
    """The paper profile's training and pretraining GPU-hours under the settings of ``params`` with the
    ms/step a GPU measured before (``record``: a ``gpu_bench.json`` with section (e)), in total and per
    paper (a run's group up to its first ``/``; a pretraining counts for its setup's first run's group).
    A cost key the record did not measure borrows the slowest measured key of its kind and nets (else
    of its kind), as :func:`paper_gpu_hours` does; one of neither is listed as unmeasured.  ``speedup``:
    a function of a cost key dividing its ms/step (replicates trained vectorised:
    :func:`benchmarks.replicates_bench.vectorised_hours`)."""
    ms_of, stale = record_ms(record, params, record_setups)

    by_group: dict[str, float] = {}
    how: dict[str, str] = {}
    group_of_setup: dict[str, str] = {}

    def add(group: str, key: str, steps: int) -> None:
        ms, how[key] = ms_of(key)
        if ms is not None and speedup is not None:
            ms /= speedup(key)
        if ms is not None:
            by_group[group] = by_group.get(group, 0.0) + steps * ms / 3.6e6

    for run in params.runs.values():
        spec = params.model(run.model)
        group = run.group
        group_of_setup.setdefault(run.setup, group)
        add(group, cost_key(params, run.setup, spec, "train"), getattr(spec, "train_steps", 0) or params.train.steps)
    for setup, group in group_of_setup.items():
        s = params.setup(setup)
        if s.pretraining:
            spec = params.model(s.pretrain_model)
            add(group, cost_key(params, setup, spec, "pretrain"),
                getattr(spec, "pretrain_steps", 0) or params.pretrain.steps)
    by_paper: dict[str, float] = {}
    for group, h in by_group.items():
        by_paper[group.split("/")[0]] = by_paper.get(group.split("/")[0], 0.0) + h
    return {"by_paper_gpu_hours": {g: round(h, 2) for g, h in sorted(by_paper.items())},
            "by_group_gpu_hours": {g: round(h, 2) for g, h in sorted(by_group.items())},
            "by_claim_gpu_hours": {c: round(sum(by_group.get(g, 0.0) for g in groups), 2)
                                   for c, groups in CLAIM_GROUPS.items() if any(g in by_group for g in groups)},
            "train_and_pretrain_gpu_hours": round(sum(by_group.values()), 2),
            "cost_keys": {"measured": sum(v == "measured" for v in how.values()),
                          "other_batch": sum(v == "other batch" for v in how.values()),
                          "borrowed": sum(v == "borrowed" for v in how.values()),
                          "unmeasured": sorted(k for k, v in how.items() if v == "unmeasured"),
                          "record_rows_on_changed_nets": stale},
            "device": record.get("environment", {}).get("device", "unknown"),
            "not_included": "the IW bound, prior_init and the in-process studies (see the record's gpu_hours)"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="folder for gpu_bench.json")
    ap.add_argument("--tiny", action="store_true", help="small nets, data and steps: a dry run (any device)")
    ap.add_argument("--device", default="auto", help="cuda, cpu or auto (default: cuda when available)")
    ap.add_argument("--budget-s", type=float, default=215.0,
                    help="wall budget: (e) borrows ms/step for what is left unmeasured past it")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--ops", action="store_true",
                    help="only count the aten ops (kernel launches on a GPU) of one training step per case, on the CPU")
    ap.add_argument("--compile", nargs="?", const="default", default=None, metavar="MODE[,MODE]",
                    help="only (a), eager and then with the trainer's compile option in each of these "
                         f"torch.compile modes ({', '.join(COMPILE_MODES)}; default: default; section "
                         "step_compiled.<mode>)")
    ap.add_argument("--adam", default="auto", choices=list(ADAM_IMPLS), metavar="IMPL",
                    help="the trainer's adam_impl in (a) and its compiled rows: "
                         f"{' | '.join(ADAM_IMPLS)} (default auto; the plain loop keeps torch's default)")
    ap.add_argument("--cases", default=",".join(STEP_CASES),
                    help=f"comma-separated cases of (a), in this order (default: all: {','.join(STEP_CASES)})")
    ap.add_argument("--reestimate", default=None, metavar="RECORD",
                    help="no device needed: the paper profile's GPU-hours now, with the ms/step of an earlier "
                         "gpu_bench.json (e.g. reports/gpu/gpu_bench_h100.json), into OUT/gpu_hours.json")
    args = ap.parse_args(argv)
    start = time.perf_counter()
    if args.reestimate:
        params = load_profile()
        then = Path(args.reestimate).with_name(Path(args.reestimate).stem + "_setups.yaml")  # older records' nets
        hours = reestimate(json.loads(Path(args.reestimate).read_text()), params,
                           yaml.safe_load(then.read_text()) if then.is_file() else None)
        hours["record"] = args.reestimate
        bench = None
        if params.benchmark.priors:
            speed = BENCHMARK_SPEED / f"{params.profile}.json"  # the CPU ratios of the profile, or the cpu profile's
            speed = speed if speed.is_file() else BENCHMARK_SPEED / "cpu.json"
            bench = {**benchmark_gpu_hours(json.loads(Path(args.reestimate).read_text()), params,
                                           yaml.safe_load(then.read_text()) if then.is_file() else None,
                                           json.loads(speed.read_text()) if speed.is_file() else None),
                     "record": args.reestimate, "cpu_ratios": str(speed.relative_to(ROOT)) if speed.is_file() else None}
        outcomes = [json.loads(f.read_text()) for f in sorted(ISA_RECORD.glob("outcome_seeds_*.json"))]
        if outcomes:
            rate = isa_seconds_per_model_step(outcomes)
            hours["isa_study"] = {**isa_gpu_hours(params, rate), "gpu_s_per_model_step": round(rate, 5),
                                  "record": str(ISA_RECORD.relative_to(ROOT)), "device": "NVIDIA H200 (6 workers)"}
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "gpu_hours.json").write_text(json.dumps(hours, indent=2) + "\n")
        if bench is not None:
            (Path(args.out) / "benchmark_gpu_hours.json").write_text(json.dumps(bench, indent=2) + "\n")
        for paper, h in hours["by_paper_gpu_hours"].items():
            print(f"{paper:24s} {h:7.1f} GPU-hours")
        print(f"{'training + pretraining':24s} {hours['train_and_pretrain_gpu_hours']:7.1f} GPU-hours "
              f"({hours['cost_keys']['measured']} cost keys measured, {hours['cost_keys']['other_batch']} at another "
              f"batch, {hours['cost_keys']['borrowed']} borrowed)")
        for claim, h in hours["by_claim_gpu_hours"].items():
            print(f"  {claim:34s} {h:7.1f} GPU-hours (its runs' groups: {', '.join(CLAIM_GROUPS[claim])})")
        if bench is not None:
            b = bench
            print(f"{'benchmark (image cells)':24s} {b['image_cells_gpu_hours']:7.1f} GPU-hours priced ({b['cost_keys']}); "
                  f"{b['unmeasured_cells']} cells unmeasured, extrapolated from CPU ratios: {b['extrapolated_gpu_hours']:.1f}")
        if "isa_study" in hours:
            print(f"{'isa_study (004)':24s} {hours['isa_study']['isa_study']:7.1f} GPU-hours on an H200, "
                  f"the claim's models {hours['isa_study']['004.isa_mig']:.1f}")
        return 0
    if args.ops:
        rows = ops_table()
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "step_ops.json").write_text(json.dumps(rows, indent=2) + "\n")
        print(f"{'case':32s} {'ops/step':>9s} {'fused Adam':>11s} {'plain':>7s}")
        for case, row in rows.items():
            print(f"{case:32s} {row['ops']:9d} {row['fused_adam']:11d} {row['plain_ops']:7d}")
        return 0
    device = torch.device(("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device)
    if device.type != "cuda" and not args.tiny:
        print("no CUDA device: run with --tiny for a dry run on the CPU (the paper nets take hours there)",
              file=sys.stderr)
        return 2
    params = load_profile()
    out = Results(Path(args.out) / "gpu_bench.json",
                  {"profile": str(PAPER_PROFILE.relative_to(ROOT)), "tiny": args.tiny,
                   "environment": environment(device)})
    print(f"gpu_bench: {out.data['environment']}")

    try:
        cases = {c: STEP_CASES[c] for c in args.cases.split(",")}
    except KeyError as exc:
        print(f"unknown case {exc.args[0]!r}; cases: {', '.join(STEP_CASES)}", file=sys.stderr)
        return 2
    modes = args.compile.split(",") if args.compile else []
    if any(m not in COMPILE_MODES for m in modes):
        print(f"unknown compile mode in {args.compile!r}; modes: {', '.join(COMPILE_MODES)}", file=sys.stderr)
        return 2
    rows = step_table(device, params, args.tiny, args.rounds, cases=cases, adam_impl=args.adam,
                      on_result=lambda case, row: (out.set("step", case, row),
                                                   print(f"  {case}: {row['trainer_ms']:.2f} ms vs "
                                                         f"{row['plain_ms']:.2f} ms plain ({row['ratio']:.2f}x)",
                                                         flush=True)))
    print_step_table(rows)
    if modes:
        for mode in modes:
            def report(case: str, row: dict) -> None:
                out.set("step_compiled", mode, case, row)
                if "error" in row:
                    print(f"  {case} compiled ({mode}) failed: {row['error'][:500]}", flush=True)
                    return
                print(f"  {case} compiled ({mode}): {row['trainer_ms']:.2f} ms vs {row['plain_ms']:.2f} ms plain "
                      f"({row['ratio']:.2f}x; warm-up with compile {row['warmup_s']:.0f} s, "
                      f"{row['graphs_compiled']} graphs)", flush=True)

            compiled = step_table(device, params, args.tiny, args.rounds, cases=cases, compile=mode,
                                  adam_impl=args.adam, on_result=report)
            print(f"\n(a') with the trainer's compile option, mode {mode!r}")
            print_step_table(compiled)
        out.set("wall_s", time.perf_counter() - start)
        print(f"\nwrote {out.path} ({out.data['wall_s']:.0f} s)")
        return 0

    with tempfile.TemporaryDirectory() as tmp:
        resume = resume_check(device, Path(tmp))
    out.set("cuda_resume", resume)
    print(f"\n(c) exact resume on {resume['device']}: {'OK' if resume.get('ok') else 'FAILED'} "
          f"({resume.get('tensors_equal')}/{resume.get('tensors')} tensors equal, checkpoint at step "
          f"{resume.get('checkpoint_step')}, CUDA RNG in checkpoint: {resume.get('checkpoint_has_cuda_rng')})", flush=True)
    if not resume.get("ok") and resume.get("error"):
        print(resume["error"], file=sys.stderr)

    work = stage_work(device, params, args.tiny, on_result=lambda o: out.set("stage_work", o))
    out.set("stage_work", work)
    print(f"\n(b) {work['setup']}/{work['model']} {work['sizes']}")
    print(f"{'work':22s} {str(device):>10s} {'cpu':>10s} {'speed-up':>9s}")
    for key in ("prior_init_s", "iw_bound_s", "encode_train_s", "evaluate_model_s"):
        s = work.get(f"speedup_{key}")
        print(f"{key:22s} {work['device'][key]:10.2f} {work['cpu'][key]:10.2f} {s if s is None else round(s, 1)!s:>9s}")

    deadline = start + args.budget_s
    hours = paper_gpu_hours(device, params, args.tiny, measured=rows,
                            prior_init_ms=work["device"].get("prior_init_ms_per_iteration"), deadline=deadline,
                            on_result=lambda w: out.set("gpu_hours_progress", len([v for v in w.values()
                                                                                    if "ms_per_step" in v])))
    out.set("gpu_hours", hours)
    print_gpu_hours(hours, out.data["environment"].get("gpu", str(device)))
    out.set("wall_s", time.perf_counter() - start)
    print(f"\nwrote {out.path} ({out.data['wall_s']:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
