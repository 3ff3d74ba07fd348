"""``make bench``: training-step cost of every model relative to the plain VAE, and the tiny pipeline;
on a CUDA machine also the GPU section (:func:`gpu_section`: paper nets vs a plain PyTorch loop, GPU-hours).

Step times are measured in one process, interleaving the models round by
round with identical nets and batch, and reported as ratios to the VAE (the
median over rounds), so machine noise mostly cancels.  The tiny pipeline is
timed end to end (``dvc repro`` in a temporary git copy) with the peak
resident memory of its largest stage.  Writes ``reports/bench.json``.
"""

from __future__ import annotations

import argparse
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from priorlab.config import (BetaTCVAEParams, FactorialMixtureParams, FactorVAEParams, LpNestedPriorParams,
                             ModelParams, SetupParams, VAEParams, VSCParams)
from priorlab.io import write_json
from priorlab.models import build_model
from priorlab.models.protocol import Batch, StepContext

from benchmarks.project_copy import copy_project, pipeline_env

NETS = {
    "mlp": SetupParams(dataset="bench", latent_dim=10, encoder="mlp", decoder="mlp", hidden=[400, 400]),
    "conv": SetupParams(dataset="bench", latent_dim=10, encoder="conv", decoder="conv", hidden=[256],
                        channels=[32, 32, 64]),
}
MODELS = {
    "vae": VAEParams(kind="vae", beta=1.0),
    "beta_vae": VAEParams(kind="vae", beta=4.0),
    "vsc": VSCParams(kind="vsc"),  # paper defaults: 20 pseudo-inputs, the A.3 selector
    "beta_tcvae": BetaTCVAEParams(kind="beta_tcvae"),
    "fmvae_k64": FactorialMixtureParams(kind="fmvae", num_components=[64]),  # I = 1, K = 64; SVI in after_step
    "fmvae_i2_k16": FactorialMixtureParams(kind="fmvae", num_factors=2, num_components=[16]),
    # paper 004: ISA-VAE = β-VAE with the Lp-nested prior (10 latents: 5 subspaces of 2, p0 = 2.1, p_l = 2.2;
    # MC KL, exponents learned); FactorVAE: 6 x 1000 discriminator, its update included
    "isa_vae": VAEParams(kind="vae", beta=4.0, prior=LpNestedPriorParams(subspaces=[[2.2, 2]] * 5, lr=5e-4)),
    "factor_vae": FactorVAEParams(kind="factor_vae"),
}
"""Models compared with ``vae``; later models register here with their default settings."""


def step_times(net: SetupParams, models: dict[str, ModelParams], batch: int = 64, rounds: int = 7,
               steps: int = 20, obs_shape=(1, 32, 32), seed: int = 0, data=None, round_s: float | None = None,
               steps_used: dict[str, int] | None = None) -> dict[str, list[float]]:
    """Seconds per Adam training step of each model, ``rounds`` interleaved measurements each; ``data``:
    the training set each model is bound to first (a likelihood whose update needs N), else none.
    ``round_s``: a model whose warm-up step is slow takes fewer steps a round, as many as fit in about
    ``round_s`` seconds (at least one; ``steps_used`` receives each model's count)."""
    g = torch.Generator().manual_seed(seed)
    x = (torch.rand(batch, *obs_shape, generator=g) > 0.6).float()
    built = {}
    for name, spec in models.items():
        torch.manual_seed(seed)
        model = build_model(net, spec, obs_shape)
        if data is not None:
            model.bind_data(data)
        groups = model.param_groups(1e-4)
        built[name] = (model, torch.optim.Adam(groups, lr=1e-4) if groups else None)
    times: dict[str, list[float]] = {name: [] for name in models}

    def run(name: str, n: int) -> None:
        # the protocol's whole training step (per-step prior updates, a discriminator's update included)
        model, opt = built[name]
        for i in range(n):
            model.train_step(Batch(x), i + 1, StepContext(opt))

    per_round = {}
    for name in models:  # warm-up, which also prices a step
        t0 = time.perf_counter()
        run(name, 3)
        warm = (time.perf_counter() - t0) / 3
        per_round[name] = steps if round_s is None else max(1, min(steps, int(round_s / warm)))
    if steps_used is not None:
        steps_used.update(per_round)
    for _ in range(rounds):
        for name in models:
            t0 = time.perf_counter()
            run(name, per_round[name])
            times[name].append((time.perf_counter() - t0) / per_round[name])
    return times


def gpu_section(budget_s: float = 150.0) -> dict:
    """On a CUDA device (skipped without one): ms per training step of the paper profile's nets through
    the trainer next to a plain PyTorch loop with the same nets and batch, and the paper profile's
    GPU-hours at the measured rates (:mod:`benchmarks.gpu_bench`; ``python -m benchmarks.gpu_bench`` adds the
    prior_init / evaluate timings and the exact-resume check)."""
    if not torch.cuda.is_available():
        print("GPU section skipped: no CUDA device")
        return {"skipped": "no CUDA device"}
    from priorlab import gpu_bench

    device = torch.device("cuda")
    deadline = time.perf_counter() + budget_s
    rows = gpu_bench.step_table(device)
    gpu_bench.print_step_table(rows)
    hours = gpu_bench.paper_gpu_hours(device, measured=rows, deadline=deadline)
    gpu_bench.print_gpu_hours(hours, torch.cuda.get_device_name(device))
    return {"environment": gpu_bench.environment(device), "step": rows, "gpu_hours": hours}


def time_tiny_pipeline(root: Path) -> dict[str, float]:
    """Wall time of ``dvc repro`` on the tiny profile, and the peak RSS of its largest stage."""
    with tempfile.TemporaryDirectory() as tmp:
        project = copy_project(root, Path(tmp))
        env = pipeline_env(project)
        subprocess.run([sys.executable, "-m", "priorlab.config", "use", "tiny"], cwd=project, env=env, check=True,
                       capture_output=True)
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "dvc", "repro"], cwd=project, env=env, check=True, capture_output=True)
        wall = time.perf_counter() - t0
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return {"wall_s": wall, "peak_rss_mib_largest_process": peak_kib / 1024}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="reports/bench.json")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--no-pipeline", action="store_true", help="skip timing the tiny pipeline")
    args = ap.parse_args(argv)
    torch.set_num_threads(max(1, torch.get_num_threads()))
    result: dict = {"batch_size": 64, "obs_shape": [1, 32, 32], "rounds": args.rounds,
                    "threads": torch.get_num_threads(), "torch": torch.__version__, "machine": platform.machine(),
                    "step": {}}
    print(f"{'net':6s} {'model':12s} {'ms/step':>9s} {'samples/s':>10s} {'ratio to vae':>13s}")
    for net_name, net in NETS.items():
        times = step_times(net, MODELS, rounds=args.rounds)
        base = np.median(times["vae"])
        result["step"][net_name] = {}
        for name, ts in times.items():
            med = float(np.median(ts))
            row = {"median_s": med, "samples_per_s": 64 / med, "ratio_to_vae": float(np.median(np.array(ts) / base))}
            result["step"][net_name][name] = row
            print(f"{net_name:6s} {name:12s} {1e3 * med:9.2f} {row['samples_per_s']:10.0f} {row['ratio_to_vae']:13.2f}")
    result["sparse_vae"] = {"step": sparse_vae_step_ratios(), "memory": sparse_vae_peak_memory()}
    for g_dim, row in result["sparse_vae"]["step"].items():
        print(f"sparse VAE G={g_dim}: {1e3 * row['sparse_vae_s']:.1f} ms/step, {row['ratio']:.1f}x the VAE step")
    mem = result["sparse_vae"]["memory"]
    print(f"sparse VAE G=1000: peak RSS {mem['peak_rss_mib']:.0f} MiB (trunk activations {mem['trunk_activation_mib']:.0f} MiB)")
    result["gpu"] = gpu_section()
    if not args.no_pipeline:
        result["tiny_pipeline"] = time_tiny_pipeline(Path.cwd())
        tp = result["tiny_pipeline"]
        print(f"tiny pipeline: {tp['wall_s']:.1f} s wall, peak RSS {tp['peak_rss_mib_largest_process']:.0f} MiB")
    write_json(args.out, result)
    print(f"wrote {args.out}")
    return 0



# --- sparse VAE (paper 003): masked decoder vs the plain MLP decoder -----------------------------

SPARSE_VAE_GS = (100, 300, 1000)


def _bound_model(spec: ModelParams, net: SetupParams, x: torch.Tensor):
    from priorlab.data.store import Dataset

    model = build_model(net, spec, tuple(x.shape[1:]))
    model.bind_data(Dataset(name="bench", arrays={"x_train": x.numpy(), "x_test": x[:1].numpy()},
                            manifest={"observation_kind": "vector"}))
    return model, torch.optim.Adam(model.param_groups(1e-4), lr=1e-4)


def sparse_vae_step_ratios(gs=SPARSE_VAE_GS, latent_dim: int = 30, hidden: int = 300, batch: int = 64,
                           rounds: int = 5, steps: int = 5, seed: int = 0) -> dict[str, dict[str, float]]:
    """Per G: seconds per training step of the sparse VAE and of the VAE with the same encoder and
    trunk widths (K = 30, two hidden layers of 300, Gaussian likelihood), interleaved, and their ratio.
    The masked decoder runs its trunk on B·G rows, so the ratio grows about linearly in G."""
    from priorlab.config import SparseVAEParams

    out = {}
    for g_dim in gs:
        net = SetupParams(dataset="bench", latent_dim=latent_dim, hidden=[hidden, hidden], likelihood="gaussian")
        x = torch.randn(batch, g_dim, generator=torch.Generator().manual_seed(seed))
        built = {name: _bound_model(spec, net, x) for name, spec in
                 (("vae", VAEParams(kind="vae")), ("sparse_vae", SparseVAEParams(kind="sparse_vae")))}
        times: dict[str, list[float]] = {name: [] for name in built}
        for r in range(rounds + 1):  # round 0: warm-up
            for name, (model, opt) in built.items():
                t0 = time.perf_counter()
                for i in range(steps):
                    model.train_step(Batch(x), i + 1, StepContext(opt))
                if r:
                    times[name].append((time.perf_counter() - t0) / steps)
        out[str(g_dim)] = {"vae_s": float(np.median(times["vae"])), "sparse_vae_s": float(np.median(times["sparse_vae"])),
                           "ratio": float(np.median(np.array(times["sparse_vae"]) / np.array(times["vae"])))}
    return out


def sparse_vae_peak_memory(g_dim: int = 1000, batch: int = 64) -> dict[str, float]:
    """Peak RSS (MiB) of a fresh process that built the sparse VAE at G = ``g_dim`` (K = 30, trunk 300 ×
    300, batch 64) and ran 3 training steps, with the size of the trunk's activations B·G·(K + 4H)
    floats (masked codes, pre- and post-activation of both layers), which the plain decoder holds only
    B·(K + 4H) of."""
    code = ("import resource, torch; from priorlab import bench; "
            f"x = torch.randn({batch}, {g_dim}); from priorlab.config import SparseVAEParams, SetupParams; "
            "net = SetupParams(dataset='bench', latent_dim=30, hidden=[300, 300], likelihood='gaussian'); "
            "m, o = bench._bound_model(SparseVAEParams(kind='sparse_vae'), net, x); "
            "[m.train_step(bench.Batch(x), i + 1, bench.StepContext(o)) for i in range(3)]; "
            "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    after = int(res.stdout.split()[-1]) / 1024
    return {"G": g_dim, "peak_rss_mib": after, "trunk_activation_mib": batch * g_dim * (30 + 4 * 300) * 4 / 2**20}


if __name__ == "__main__":
    raise SystemExit(main())
