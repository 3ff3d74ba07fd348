"""The benchmark's cells -> one frame (a row per prior, setup and seed) -> a mean with its 95 % t
interval per (setup, prior, score) over the seeds (each trained from scratch: independent units)."""

from __future__ import annotations

from typing import Any, NamedTuple

import pandas as pd

from priorlab.config import Params
from priorlab.errors import UserError
from priorlab.io import read_json
from priorlab.metric_registry import columns
from priorlab.studies.benchmark.fit import cell_dir, cell_name
from priorlab.studies.intervals import Estimate, mean_t


class Score(NamedTuple):
    name: str  # the row key (a headline name of the metric registry, or one of the benchmark's own)
    title: str
    better: int  # +1: higher is better, 0: no direction (a property, not a quality)


NO_DIRECTION = ("kl", "active_dims")
SCORES: tuple[Score, ...] = tuple(Score(c.name, c.title, 0 if c.name in NO_DIRECTION else 1) for c in columns()) + (
    Score("sparsity", "zeros per input", 0),
    Score("probe", "probe accuracy", 1),
    Score("contrast", "corr. contrast", 1),
)
"""Every score a benchmark row can carry, in table order: the evaluate record's headline numbers, then
the per-observation sparsity, the linear probe on the labels and paper 002's correlation contrast."""


def read_rows(params: Params) -> tuple[list[dict[str, Any]], list[str]]:
    """Every row of every ``benchmark_fit`` cell, setups then priors in params order, and the devices
    they ran on; a ``UserError`` naming the first cell that has not run or holds other seeds."""
    rows, devices = [], set()
    bench = params.benchmark
    for setup in bench.setups:
        for prior in bench.priors:
            path = cell_dir(setup, prior) / "rows.json"
            stage = f"benchmark_fit@{cell_name(setup, prior)}"
            if not path.is_file():
                raise UserError(f"{path} is missing: stage {stage} has not run (dvc repro benchmark runs it)")
            cell = read_json(path)
            seeds = [r["seed"] for r in cell["rows"]]
            if seeds != list(bench.seeds) and seeds != [None]:
                raise UserError(f"{path} holds seeds {seeds}, not benchmark.seeds {bench.seeds}: rerun {stage} "
                                "(dvc repro benchmark)")
            devices.add(cell["device"])
            rows += cell["rows"]
    return rows, sorted(devices)


def frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """A row per (prior, setup, seed) that ran, with every score (NaN where it does not apply)."""
    ran = [r for r in rows if r["origin"] != "not_run"]
    keys = ["prior", "label", "setup", "seed", "origin"] + [s.name for s in SCORES]
    return pd.DataFrame([{k: r.get(k) for k in keys} for r in ran], columns=keys).astype(
        {s.name: float for s in SCORES})


def not_run(rows: list[dict[str, Any]]) -> dict[tuple[str, str], str]:
    """(setup, prior) -> the reason its model was not built there."""
    return {(r["setup"], r["prior"]): r["reason"] for r in rows if r["origin"] == "not_run"}


def present(f: pd.DataFrame) -> list[Score]:
    """The scores some row of ``f`` has."""
    return [s for s in SCORES if s.name in f and f[s.name].notna().any()]


def estimates(f: pd.DataFrame) -> dict[tuple[str, str, str], Estimate]:
    """(setup, prior, score) -> the mean over the seeds with its t interval (where every seed has it)."""
    out = {}
    for (setup, prior), g in f.groupby(["setup", "prior"], sort=False):
        for s in SCORES:
            values = g[s.name].to_numpy(dtype=float)
            if len(values) and not pd.isna(values).any():
                out[(setup, prior, s.name)] = mean_t(values)
    return out
