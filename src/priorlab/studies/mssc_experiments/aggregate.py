"""Paper 000's study, aggregation (pure reading and tabulating): the ``mssc_fit`` / ``mssc_patches``
cells' rows (:func:`read_cells`) -> the recovery table per model and bars entry (:func:`recovery_table`)."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from priorlab.config import Params
from priorlab.studies.mssc_experiments import NAME
from priorlab.studies.mssc_experiments.fit import ablation_dir, cell_dir
from priorlab.studies.runs import stage_output


def read_cells(params: Params) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The bars rows of every ``mssc_fit`` cell and the patch rows of every ``mssc_patches`` cell, in
    the study's order (bars entry, then model, then seed; patches by model); a ``UserError`` naming the
    first missing cell."""
    study = params.mssc_study

    def cell(model: str, part: str, stage: str) -> dict[str, Any]:
        return stage_output(cell_dir(model, part) / "rows.json", stage, NAME)

    rows = [r for bars in study.bars for model in study.models
            for r in cell(model, bars, f"mssc_fit@{model}-{bars}")["rows"]]
    return rows, [p for model in study.models for p in cell(model, "patches", f"mssc_patches@{model}")["patches"]]


def read_arms(params: Params) -> dict[str, dict[str, Any]]:
    """Every ``mssc_study.ablations`` arm: name → {``spec`` (its params as a dict), ``rows``}; a
    ``UserError`` naming the first missing arm."""
    return {name: {"spec": dataclasses.asdict(spec),
                   "rows": stage_output(ablation_dir(name) / "rows.json", f"mssc_ablation@{name}", NAME)["rows"]}
            for name, spec in params.mssc_study.ablations.items()}


def recovery_table(rows: list[dict]) -> dict[tuple[str, str], dict[str, float]]:
    """(model, bars entry) → runs, runs recovering every bar, their rate, mean bars recovered, and the
    medians over seeds of the fitted noise variance σ² and prior π."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for r in rows:
        e = out.setdefault((r["model"], r["bars"]), {"variant": r["variant"], "n": 0, "recovered": 0, "bars": 0.0,
                                                     "sigma2": [], "pi": []})
        e["n"] += 1
        e["recovered"] += int(r["recovered"])
        e["bars"] += r["n_recovered"]
        e["sigma2"].append(r["sigma2"])
        e["pi"].append(r["pi"])
    for e in out.values():
        e["rate"], e["mean_bars"] = e["recovered"] / e["n"], e["bars"] / e["n"]
        e["sigma2"], e["pi"] = float(np.median(e["sigma2"])), float(np.median(e["pi"]))
    return out
