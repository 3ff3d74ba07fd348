"""When do VSC's spikes escape the collapse?  The spike pre-training (λ = 0, eq. 7) on Smiley with the
spike statistics measured on held-out inputs every ``log_every`` steps.

The released code's spikes collapse for the first few thousand steps (all on, uniform selector) and
then become input-dependent; the paper's objective stays collapsed.  This study measures the escape
point (steps × batch) for a given net size, batch and objective (``preset``), on the CPU or a GPU.
It needs only the library (no DVC), so the same command runs on a machine with an accelerator:

    python -m benchmarks.vsc_escape --preset released_code --hidden 512 --batch 64 \\
        --steps 20000 --out reports/vsc_experiments/escape_cpu.json

Escape: the first logged step with at least ``escape_dims`` input-dependent dimensions (std of γ over
the held-out inputs > 0.1), the same count as the per-observation sparsity claim.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np
import torch

from priorlab.config import SetupParams, VSCParams
from priorlab.io import write_json
from priorlab.models import build_model
from priorlab.models.protocol import Batch, StepContext
from priorlab.models.vsc import spike_diagnostics


def smiley_arrays(n: int, seed: int) -> torch.Tensor:
    """``n`` binary Smiley images ``[n, 1, 32, 32]`` (float32), seeded."""
    from priorlab.data.smiley import sample_smiley

    images, _, _ = sample_smiley(n, np.random.RandomState(seed))
    return torch.from_numpy(images[:, None].astype(np.float32))


def escape_study(*, preset: str = "released_code", latent_dim: int = 60, hidden: int = 512, batch: int = 64,
                 steps: int = 20000, n_pseudo: int = 10, alpha: float = 0.003, lr: float = 5e-4,
                 n_train: int = 20000, n_heldout: int = 1000, log_every: int = 250, escape_dims: int = 5,
                 stop_after_escape: int = 2000, seed: int = 0, device: str = "cpu") -> dict:
    """Spike pre-training with the statistics of held-out inputs every ``log_every`` steps; stops
    ``stop_after_escape`` steps after the escape (or at ``steps``)."""
    dev = torch.device(device)
    x = smiley_arrays(n_train + n_heldout, seed).to(dev)
    x_train, x_held = x[:n_train], x[n_train:]
    torch.manual_seed(seed)
    setup = SetupParams(dataset="smiley", latent_dim=latent_dim, hidden=[hidden])
    spec = VSCParams(kind="vsc", alpha=alpha, n_pseudo_inputs=n_pseudo, preset=preset,
                     selector="code")
    model = build_model(setup, spec, (1, 32, 32)).to(dev)
    model.set_phase("pretrain")
    optimizer = torch.optim.Adam(model.param_groups(lr), lr=lr)
    g = torch.Generator(device="cpu").manual_seed(seed)
    history, escaped, start = [], None, time.perf_counter()
    for step in range(1, steps + 1):
        idx = torch.randint(n_train, (batch,), generator=g).to(dev)
        model.train_step(Batch(x_train[idx]), step, StepContext(optimizer))
        if step % log_every == 0 or step == steps:
            with torch.no_grad():
                head = model.posterior_head
                gamma = torch.exp(head.raw_parameters(model.encoder(x_held))[0])
                stats = {k: float(v) for k, v in spike_diagnostics(gamma, model.prior.weights(x_held)).items()}
            stats.update(step=step, samples=step * batch, seconds=round(time.perf_counter() - start, 1))
            history.append(stats)
            print(json.dumps(stats), flush=True)
            if escaped is None and stats["spike_input_dependent"] >= escape_dims:
                escaped = step
            if escaped is not None and step >= escaped + stop_after_escape:
                break
    return {
        "settings": {"preset": preset, "latent_dim": latent_dim, "hidden": hidden, "batch": batch, "steps": steps,
                     "n_pseudo_inputs": n_pseudo, "alpha": alpha, "lr": lr, "n_train": n_train,
                     "n_heldout": n_heldout, "escape_dims": escape_dims, "seed": seed, "likelihood": "bernoulli"},
        "escape_step": escaped,
        "escape_samples": None if escaped is None else escaped * batch,
        "history": history,
        "device": torch.cuda.get_device_name(dev) if dev.type == "cuda" else platform.processor() or "cpu",
        "versions": {"torch": torch.__version__, "python": platform.python_version()},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.vsc_escape", description=__doc__.splitlines()[0])
    for name, default in (("preset", "released_code"), ("device", "cpu"), ("out", "")):
        parser.add_argument(f"--{name}", default=default)
    for name, default in (("latent_dim", 60), ("hidden", 512), ("batch", 64), ("steps", 20000), ("n_pseudo", 10),
                          ("log_every", 250), ("seed", 0), ("stop_after_escape", 2000)):
        parser.add_argument(f"--{name}", type=int, default=default)
    parser.add_argument("--alpha", type=float, default=0.003)
    parser.add_argument("--lr", type=float, default=5e-4)
    args = vars(parser.parse_args(argv))
    out = args.pop("out")
    result = escape_study(**args)
    if out:
        write_json(Path(out), result)
    print(f"escape step: {result['escape_step']} (samples {result['escape_samples']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
