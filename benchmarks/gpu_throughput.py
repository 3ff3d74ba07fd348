"""Two throughput measurements for planning GPU work (issues on ISA at scale and on the GPU plan):

``isa``      ms per training step and samples/s of paper 004's core models — the β-VAE and the ISA-VAE
             (Lp-nested prior) on the paper profile's ``dsprites_isa`` setup (MLP 1200-1200, 64 × 64
             Bernoulli, 25 latents) at the study's batch (2048) — through priorlab's :func:`priorlab.train.fit`,
             eager and (``--modes eager,default``) compiled; from them the minutes one model and the claim's core
             (2 models × 2 β × 3 seeds) take at the profile's ``isa_study.train.steps``.
``workers``  the aggregate samples/s of k copies of one small run (paper 002's Smiley VAE, MLP 3000,
             batch 64: a launch-bound step) trained at the same time on one device, k = 1, 2, 4, 8: what
             several workers per GPU buy.  Each worker is its own process; they start timing together
             (a file barrier) and each counts the steps it finishes in a fixed window.

Run from the project's root, without DVC (``PYTHONPATH=src:.gpu_deps`` on a machine with torch only)::

    python -m benchmarks.gpu_throughput --out OUT                      # a GPU: both sections
    python -m benchmarks.gpu_throughput --out OUT --tiny --device cpu  # a dry run (small nets, short windows)

Results go to ``OUT/gpu_throughput.json``, rewritten after every measurement (a run cut short keeps
what it measured).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.gpu_bench import (Results, build_bound, environment, fit_seconds, load_profile, obs_shape_of,
                                  shrink_setup, synthetic_dataset)

import numpy as np  # noqa: I001  (after benchmarks.gpu_bench, which imports priorlab before torch)
import torch

ISA_MODELS = {"beta_vae": "isa_beta_vae", "isa_vae": "isa_vae"}
WORKER_CASE = ("smiley", "vae")  # the paper profile's (setup, model) trained by every worker
WORKER_BATCH = 64


def isa_rates(device: torch.device, tiny: bool = False, compile: str = "eager", rounds: int = 3,
              on_result=None, counts: tuple[int, int, int] | None = None) -> dict[str, dict]:
    """``{model: {ms_per_step, samples_per_s, ...}}`` for :data:`ISA_MODELS` at the study's batch:
    the difference of a long and a short ``fit`` divided by the difference in steps (set-up cancels),
    median over ``rounds`` (``counts``: the short, long and warm-up steps); the compile time falls in
    the warm-up."""
    params = load_profile()
    study = params.isa_study
    setup = params.setup(study.setup)
    batch = 64 if tiny else study.train.batch_size
    setup = shrink_setup(setup) if tiny else setup
    short, long, warmup = counts or ((2, 6, 2) if tiny else (20, 120, 30))
    data = synthetic_dataset(obs_shape_of(params, study.setup), 256 if tiny else 4 * batch)
    n_train = params.datasets[setup.dataset].n_train
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, model_name in ISA_MODELS.items():
            spec = dataclasses.replace(params.model(model_name), beta=1.0)
            model = build_bound(setup, spec, data, "train").to(device)
            run = lambda steps: fit_seconds(model, data, steps, device, Path(tmp), batch=batch,  # noqa: E731
                                            compile=compile)
            t0 = time.perf_counter()
            run(warmup)
            warmup_s = time.perf_counter() - t0
            ms = [1e3 * (run(long) - run(short)) / (long - short) for _ in range(rounds)]
            ms_step = float(np.median(ms))
            model_min = study.train.steps * ms_step / 6e4
            rows[name] = {"model": model_name, "batch": batch, "compile": compile, "ms_per_step": ms_step,
                          "rounds_ms": ms, "warmup_s": round(warmup_s, 2),
                          "samples_per_s": batch * 1e3 / ms_step, "steps": study.train.steps,
                          "epochs": study.train.steps * study.train.batch_size / n_train,
                          "train_minutes_per_model": model_min}
            if on_result:
                on_result(name, rows[name])
    if len(rows) == len(ISA_MODELS):  # the claim's core: both models at β ∈ {1, 2}, 3 seeds each
        rows["core_train_minutes"] = 2 * 3 * sum(r["train_minutes_per_model"] for r in rows.values())
    return rows


def _worker(device: str, barrier: Path, k: int, index: int, seconds: float, tiny: bool, chunk: int) -> dict:
    """One of k concurrent runs: warm up, wait for the others, then train ``chunk``-step ``fit`` calls
    until ``seconds`` have passed; returns the steps and the seconds they took."""
    params = load_profile()
    setup = params.setup(WORKER_CASE[0])
    setup = shrink_setup(setup) if tiny else setup
    data = synthetic_dataset(obs_shape_of(params, WORKER_CASE[0]), 256 if tiny else 4096, seed=index)
    dev = torch.device(device)
    model = build_bound(setup, params.model(WORKER_CASE[1]), data, "train", seed=index).to(dev)
    with tempfile.TemporaryDirectory() as tmp:
        run = lambda steps: fit_seconds(model, data, steps, dev, Path(tmp), batch=WORKER_BATCH)  # noqa: E731
        run(chunk)  # warm-up
        (barrier / f"ready{index}").touch()
        wait_until = time.time() + 120
        while len(list(barrier.glob("ready*"))) < k and time.time() < wait_until:
            time.sleep(0.01)
        steps, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            run(chunk)
            steps += chunk
        return {"steps": steps, "seconds": time.perf_counter() - t0}


def worker_rates(device: torch.device, ks=(1, 2, 4, 8), seconds: float = 12.0, tiny: bool = False,
                 on_result=None) -> dict[str, dict]:
    """``{k: {aggregate_samples_per_s, per_worker_samples_per_s, speedup_vs_1}}``: k processes of
    :func:`_worker` on ``device`` at once."""
    rows: dict[str, dict] = {}
    chunk = 5 if tiny else 100
    for k in ks:
        with tempfile.TemporaryDirectory() as tmp:
            barrier = Path(tmp)
            cmd = lambda i: [sys.executable, "-m", "benchmarks.gpu_throughput", "--worker",  # noqa: E731
                             json.dumps({"device": str(device), "barrier": tmp, "k": k, "index": i,
                                         "seconds": seconds, "tiny": tiny, "chunk": chunk})]
            env = {**os.environ, "OMP_NUM_THREADS": "1"}
            procs = [subprocess.Popen(cmd(i), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
                     for i in range(k)]
            outs = [p.communicate(timeout=seconds + 300) for p in procs]
        bad = [err[-2000:] for p, (_, err) in zip(procs, outs) if p.returncode]
        if bad:
            rows[str(k)] = {"error": bad[0]}
        else:
            runs = [json.loads(out.strip().splitlines()[-1]) for out, _ in outs]
            rates = [WORKER_BATCH * r["steps"] / r["seconds"] for r in runs]
            rows[str(k)] = {"workers": k, "aggregate_samples_per_s": float(sum(rates)),
                            "per_worker_samples_per_s": rates, "window_s": seconds, "batch": WORKER_BATCH}
            one = rows.get("1", {}).get("aggregate_samples_per_s")
            if one:
                rows[str(k)]["speedup_vs_1"] = float(sum(rates)) / one
        if on_result:
            on_result(str(k), rows[str(k)])
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="reports/gpu")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--tiny", action="store_true", help="small nets and windows: a dry run on a CPU")
    ap.add_argument("--sections", default="isa,workers")
    ap.add_argument("--modes", default="eager", help="the trainer's compile modes to time the ISA models in")
    ap.add_argument("--workers", default="1,2,4,8")
    ap.add_argument("--window-s", type=float, default=12.0)
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        spec = json.loads(args.worker)
        result = _worker(spec["device"], Path(spec["barrier"]), spec["k"], spec["index"], spec["seconds"],
                         spec["tiny"], spec["chunk"])
        print(json.dumps(result))
        return 0
    device = torch.device(("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device)
    if device.type != "cuda" and not args.tiny:
        print("no CUDA device: run with --tiny for a dry run on the CPU", file=sys.stderr)
        return 2
    sections = args.sections.split(",")
    unknown = set(sections) - {"isa", "workers"}
    if unknown:
        print(f"unknown section {sorted(unknown)[0]!r}; sections: isa, workers", file=sys.stderr)
        return 2
    out = Results(Path(args.out) / "gpu_throughput.json", {"tiny": args.tiny, "environment": environment(device)})
    start = time.perf_counter()
    if "isa" in sections:
        for mode in args.modes.split(","):
            def report(name: str, row: dict, mode: str = mode) -> None:
                out.set("isa", mode, name, row)
                print(f"isa {mode} {name}: {row['ms_per_step']:.2f} ms/step at batch {row['batch']}, "
                      f"{row['samples_per_s']:.0f} samples/s, {row['train_minutes_per_model']:.1f} min per model "
                      f"(warm-up {row['warmup_s']} s)", flush=True)

            rows = isa_rates(device, args.tiny, compile=mode, on_result=report)
            if "core_train_minutes" in rows:
                out.set("isa", mode, "core_train_minutes", rows["core_train_minutes"])
                print(f"isa {mode}: the core (2 models x 2 betas x 3 seeds) trains in "
                      f"{rows['core_train_minutes']:.1f} min", flush=True)
    if "workers" in sections:
        def report_k(k: str, row: dict) -> None:
            out.set("workers", k, row)
            if "error" in row:
                print(f"workers k={k} failed: {row['error'][-500:]}", flush=True)
            else:
                print(f"workers k={k}: {row['aggregate_samples_per_s']:.0f} samples/s together "
                      f"(x{row.get('speedup_vs_1', 1.0):.2f} of k=1)", flush=True)

        worker_rates(device, [int(k) for k in args.workers.split(",")], args.window_s, args.tiny, on_result=report_k)
    out.set("wall_s", time.perf_counter() - start)
    print(f"wrote {out.path} ({out.data['wall_s']:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
