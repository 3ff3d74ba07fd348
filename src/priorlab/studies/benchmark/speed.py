"""The benchmark's measured training cost per prior (``make benchmark-speed``, ``benchmarks/benchmark_speed.py``
→ ``reports/benchmark_speed/<profile>.json``): shown beside the tables (:mod:`.report`), and under
``benchmark.max_train_s`` the cap that leaves a cell whose measured training would cost more not run,
its row saying what it would cost (:func:`cap_reason`, read by :mod:`.fit` and recorded in the cell's plan).

The file holds measurements of one machine, committed, never recomputed by DVC: a cell's outcome depends
on it only through that run / not-run decision."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from priorlab import paths
from priorlab.config import Params, ParamsError
from priorlab.io import read_json

SPEED = paths.REPORTS / "benchmark_speed"
"""A file per profile (:func:`read_speed`)."""


def read_speed(params: Params, folder: Path = SPEED) -> dict[str, Any] | None:
    """The profile's measured training cost (:data:`SPEED`), or None where it was not measured."""
    path = Path(folder) / f"{params.profile}.json"
    return read_json(path) if path.is_file() else None


def speed_row(speed: dict[str, Any] | None, table: str, prior: str) -> dict[str, Any] | None:
    """The measured row of ``prior`` on ``table`` (``s_per_step``, ``ratio_to_vae`` …), or None."""
    return (speed or {}).get("tables", {}).get(table, {}).get("priors", {}).get(prior)


def cap_reason(params: Params, setup: str, prior: str, trained_seeds: int,
               speed: dict[str, Any] | None) -> str | None:
    """Why cell ``(setup, prior)`` is not run under ``benchmark.max_train_s``: its ``trained_seeds`` ×
    ``benchmark.train.steps`` × the measured seconds per step exceed the cap (the reason states the
    measurement and the cost); None when it fits, when no cap is set, or when the step is unmeasured.  A
    ``ParamsError`` when the measurement is of another batch size than ``benchmark.train``'s."""
    bench = params.benchmark
    row = speed_row(speed, setup, prior)
    if bench.max_train_s is None or row is None or trained_seeds == 0:
        return None
    measured_batch = speed["tables"][setup].get("batch_size")
    if measured_batch != bench.train.batch_size:
        raise ParamsError(f"{SPEED}/{params.profile}.json timed {setup}'s steps at batch {measured_batch}; the benchmark "
                          f"trains at batch {bench.train.batch_size}: run `make benchmark-speed` again, or set "
                          "benchmark.max_train_s: null")
    cost = trained_seeds * bench.train.steps * row["s_per_step"]
    if cost <= bench.max_train_s:
        return None
    ratio = f" ({row['ratio_to_vae']:.0f}× the VAE's)" if "ratio_to_vae" in row else ""
    return (f"measured {row['s_per_step']:.2f} s a training step at batch {bench.train.batch_size}{ratio} on "
            f"{speed['machine']}: {trained_seeds} seeds × {bench.train.steps} steps ≈ {cost / 60:.3g} cpu-min, above "
            f"benchmark.max_train_s ({bench.max_train_s / 60:.3g} min a cell)")
