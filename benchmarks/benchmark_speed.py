"""``make benchmark-speed``: the training cost of every prior of the cross-prior benchmark on each of its
setups' nets and batch — seconds per 1,000 Adam steps (the protocol's whole step: a discriminator's
update, SVI or SSL updates included) and the ratio to the VAE row, measured in one process with the
priors interleaved round by round (so machine noise mostly cancels in the ratios; the spread of the
ratio over rounds is kept).  Writes ``reports/benchmark_speed/<profile>.json``, which the ``benchmark``
stage shows beside its tables.  Timings are of this machine and thread count, not outputs of the
pipeline: they are measured here, committed, and never recomputed by ``dvc repro``.
"""

from __future__ import annotations

import argparse
import platform
import time
from pathlib import Path

import numpy as np
import torch

from priorlab.config import BenchmarkPriorParams, ParamsError, load_params
from priorlab.config.models import loss_scaling_of
from priorlab.io import write_json
from priorlab.models import build_model

from benchmarks.bench import step_times
from benchmarks.cross_machine import cpu_model_name

SYNTHETIC = BenchmarkPriorParams.SYNTHETIC
"""The table of paper 003's synthetic data: its name here and its key in ``setup_models``."""


def obs_shape(params, setup: str) -> tuple[int, ...]:
    """The observation shape of a setup's data set (from its manifest: the data stage must have run)."""
    from priorlab.phases import load_setup_data

    return tuple(load_setup_data(params, setup).obs_shape)


def nets(params) -> dict[str, tuple[object, tuple[int, ...], dict[str, object]]]:
    """``table -> (nets per prior, observation shape, {prior: spec})``: the image setups, and paper 003's
    synthetic data (``synthetic``) where ``benchmark.synthetic`` is on; only priors whose model builds."""
    from priorlab.studies.benchmark.fit import prior_spec
    from priorlab.studies.sparse_vae_experiments.fit import setup_for

    bench = params.benchmark
    tables = {}
    for setup in bench.setups:
        shape = obs_shape(params, setup)
        tables[setup] = ({p: params.setup(setup) for p in bench.priors}, shape, {})
    if bench.synthetic.rhos:
        study = params.sparse_vae_study
        tables[SYNTHETIC] = ({p: setup_for(study, "gaussian", loss_scaling_of(prior_spec(params, p, SYNTHETIC)))
                                for p in bench.priors}, (7,), {})
    for name, (per_prior, shape, specs) in tables.items():
        for prior in bench.priors:
            spec = prior_spec(params, prior, name)  # name: a setup, or SYNTHETIC
            try:
                build_model(per_prior[prior], spec, shape)
            except (ValueError, ParamsError):
                continue
            specs[prior] = spec
    return tables


def synthetic_data(params):
    """Data set 0 at the first ρ of ``benchmark.synthetic`` (a likelihood with per-feature variances binds to it)."""
    from priorlab.data.sparse_synthetic import make_sparse_synthetic
    from priorlab.data.store import in_memory

    study = params.sparse_vae_study
    d = make_sparse_synthetic(study.n, float(params.benchmark.synthetic.rhos[0]), study.noise_std, random_state=0)
    return in_memory("speed", {"x_train": d["x_train"], "x_test": d["x_test"]})


def image_data(shape: tuple[int, ...], batch: int):
    """A training set of random binary images (the timed batch's kind), for the models that bind their data
    before training (the sparse VAE's SSL penalty is scaled by N)."""
    from priorlab.data.store import in_memory

    x = (np.random.default_rng(0).random((4 * batch, *shape)) > 0.6).astype(np.float32)
    return in_memory("speed", {"x_train": x, "x_test": x[:batch]})


def measure(params, rounds: int, steps: int, round_s: float | None = None) -> dict:
    """Per table and prior: median seconds per step, seconds per 1,000 steps, the ratio to ``vae`` (median
    over rounds of the per-round ratio) and its range over the rounds, and the steps a round took (fewer
    than ``steps`` for a prior slower than ``round_s`` seconds a round).  The priors of one net are
    interleaved; on the synthetic data the nets differ by loss scaling (paper 003's σ), each timed apart."""
    out = {}
    for table, (per_prior, shape, specs) in nets(params).items():
        batch = params.sparse_vae_study.train.batch_size if table == SYNTHETIC else params.benchmark.train.batch_size
        groups: dict[str, dict[str, object]] = {}
        for prior, spec in specs.items():
            groups.setdefault(repr(per_prior[prior]), {})[prior] = spec
        data = synthetic_data(params) if table == SYNTHETIC else None
        times: dict[str, list[float]] = {}
        used: dict[str, int] = {}
        for group in groups.values():
            times.update(step_times(per_prior[next(iter(group))], group, batch=batch, rounds=rounds, steps=steps,
                                    obs_shape=shape, data=data if data is not None else image_data(shape, batch),
                                    round_s=round_s, steps_used=used))
        base = np.array(times["vae"]) if "vae" in times else None
        out[table] = {"batch_size": batch, "priors": {}}
        for prior, ts in times.items():
            med = float(np.median(ts))
            row = {"s_per_step": med, "s_per_1000_steps": 1000 * med, "steps_per_round": used[prior]}
            if base is not None:
                ratios = np.array(ts) / base
                row.update(ratio_to_vae=float(np.median(ratios)), ratio_range=[float(ratios.min()), float(ratios.max())])
            out[table]["priors"][prior] = row
            print(f"{table:12s} {prior:16s} {1000 * med:8.1f} s/1000 steps" +
                  (f"  {row['ratio_to_vae']:.2f}x the VAE" if base is not None else ""), flush=True)
    return out


def machine() -> str:
    """The CPU's model name (Linux) or the architecture."""
    name = cpu_model_name()
    return f"{name} ({platform.machine()})" if name else platform.machine()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--out", default=None, help="default: reports/benchmark_speed/<profile>.json")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--round-s", type=float, default=2.0,
                    help="a prior slower than this many seconds a round takes fewer steps (at least one)")
    args = ap.parse_args(argv)
    params = load_params(args.params)
    torch.set_num_threads(params.threads)
    t0 = time.perf_counter()
    result = {"profile": params.profile, "threads": params.threads,
              "rounds": args.rounds, "steps_per_round": args.steps, "torch": torch.__version__,
              "round_s": args.round_s, "machine": machine(), "tables": measure(params, args.rounds, args.steps, args.round_s)}
    result["measure_s"] = round(time.perf_counter() - t0, 1)
    write_json(args.out or f"reports/benchmark_speed/{params.profile}.json", result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
