"""``make bench``: training-step cost of every model relative to the plain VAE, and the tiny pipeline.

Step times are measured in one process, interleaving the models round by
round with identical nets and batch, and reported as ratios to the VAE (the
median over rounds), so machine noise mostly cancels.  The tiny pipeline is
timed end to end (``dvc repro`` in a temporary git copy) with the peak
resident memory of its largest stage.  Writes ``reports/bench.json``.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from priorlab.config import BetaTCVAEParams, FactorialMixtureParams, ModelParams, SetupParams, VSCParams
from priorlab.io import write_json
from priorlab.models import build_model

NETS = {
    "mlp": SetupParams(dataset="bench", latent_dim=10, encoder="mlp", decoder="mlp", hidden=[400, 400]),
    "conv": SetupParams(dataset="bench", latent_dim=10, encoder="conv", decoder="conv", hidden=[256],
                        channels=[32, 32, 64]),
}
MODELS = {
    "vae": ModelParams(kind="vae", beta=1.0),
    "beta_vae": ModelParams(kind="vae", beta=4.0),
    "vsc": VSCParams(kind="vsc"),  # paper defaults: 20 pseudo-inputs, the A.3 selector
    "beta_tcvae": BetaTCVAEParams(kind="beta_tcvae"),
    "fmvae_k64": FactorialMixtureParams(kind="fmvae", num_components=[64]),  # I = 1, K = 64; SVI in after_step
    "fmvae_i2_k16": FactorialMixtureParams(kind="fmvae", num_factors=2, num_components=[16]),
}
"""Models compared with ``vae``; later models register here with their default settings."""


def step_times(net: SetupParams, models: dict[str, ModelParams], batch: int = 64, rounds: int = 7,
               steps: int = 20, obs_shape=(1, 32, 32), seed: int = 0) -> dict[str, list[float]]:
    """Seconds per Adam training step of each model, ``rounds`` interleaved measurements each."""
    g = torch.Generator().manual_seed(seed)
    x = (torch.rand(batch, *obs_shape, generator=g) > 0.6).float()
    built = {}
    for name, spec in models.items():
        torch.manual_seed(seed)
        model = build_model(net, spec, obs_shape)
        built[name] = (model, torch.optim.Adam(model.parameters(), lr=1e-4))
    times: dict[str, list[float]] = {name: [] for name in models}

    def run(name: str, n: int) -> None:
        model, opt = built[name]
        after_step = getattr(model, "after_step", None)  # per-step prior updates (SVI) count too
        for i in range(n):
            loss, _ = model.loss(x)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            if after_step is not None:
                after_step(x, i + 1)

    for name in models:  # warm-up
        run(name, 3)
    for _ in range(rounds):
        for name in models:
            t0 = time.perf_counter()
            run(name, steps)
            times[name].append((time.perf_counter() - t0) / steps)
    return times


def copy_project(root: Path, dst: Path) -> Path:
    """Git copy of the project's source files (no pipeline outputs) at ``dst``, committed."""
    files = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"], cwd=root,
                           capture_output=True, check=True).stdout.split(b"\0")
    for f in filter(None, (x.decode() for x in files)):
        src = root / f
        if src.is_file() and not f.startswith(("data/", "models/", "metrics/", "reports/")) and f != "dvc.lock":
            (dst / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst / f)
    git = ["git", "-c", "user.email=bench@priorlab", "-c", "user.name=bench"]
    subprocess.run(["git", "init", "-q"], cwd=dst, check=True)
    subprocess.run([*git, "add", "-A"], cwd=dst, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "copy"], cwd=dst, check=True)
    return dst


def pipeline_env(project: Path) -> dict[str, str]:
    bin_dir = str(Path(sys.executable).parent)
    return {**os.environ, "PATH": bin_dir + os.pathsep + os.environ["PATH"], "DVC_NO_ANALYTICS": "1",
            "PYTHONPATH": str(project / "src")}


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
    if not args.no_pipeline:
        result["tiny_pipeline"] = time_tiny_pipeline(Path.cwd())
        tp = result["tiny_pipeline"]
        print(f"tiny pipeline: {tp['wall_s']:.1f} s wall, peak RSS {tp['peak_rss_mib_largest_process']:.0f} MiB")
    write_json(args.out, result)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
