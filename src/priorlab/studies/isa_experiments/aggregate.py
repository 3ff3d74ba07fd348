"""Paper 004's study, aggregation (pure reading and tabulating): the ``isa_fit`` cells' rows
(:func:`read_rows`) -> the study's frame (:func:`study_frame`), ``results.csv``'s table
(:func:`results_table`) and the data plots of fig. 3 for ``dvc plots`` (:func:`strength_tables`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from priorlab.config import Params
from priorlab.errors import UserError
from priorlab.io import read_json
from priorlab.studies.isa_experiments.fit import SCORES, cell_dir, cell_name, study_runs

# --------------------------------------------------------------------------- the cells' rows -> the frame

RESULT_COLUMNS = ("run", "model", "label", "kind", "strength", "seed", *SCORES)
"""``results.csv``'s columns, in this order whether a row was just trained or read back from its
sorted-key cache after a kill (the same bytes either way)."""


def results_table(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.loc[:, list(RESULT_COLUMNS)]


def study_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    return pd.DataFrame(rows) if rows else pd.DataFrame(columns=["label", "kind", "strength", "seed", "mig"])


def read_rows(params: Params) -> tuple[list[dict[str, Any]], list[str]]:
    """The rows of every run of the grid, in :func:`study_runs` order, from the ``isa_fit`` cells'
    ``rows.json``, and the devices the cells ran on; a ``UserError`` naming the first missing cell."""
    rows: dict[str, dict[str, Any]] = {}
    devices: set[str] = set()
    runs = study_runs(params) if params.isa_study.setup else []
    for run in runs:
        if run.name in rows:
            continue
        path = cell_dir(run.model, run.seed) / "rows.json"
        if not path.is_file():
            raise UserError(f"{path} is missing: stage isa_fit@{cell_name(run.model, run.seed)} has not run "
                            "(dvc repro isa_experiments runs it)")
        cell = read_json(path)
        devices.add(cell["device"])
        rows.update((r["run"], r) for r in cell["rows"])
    missing = [r.name for r in runs if r.name not in rows]
    if missing:
        raise UserError(f"run {missing[0]} is not in its cell's rows.json: rerun isa_fit "
                        f"(dvc repro isa_experiments)")
    return [rows[r.name] for r in runs], sorted(devices)


# --------------------------------------------------------------------------- data plots (dvc.yaml `plots:`)

STRENGTH_SCORES = ("chen_mig_no_shape", "mig", "mig_no_shape")  # the scores of the data plots


def strength_tables(frame: pd.DataFrame, scores=STRENGTH_SCORES) -> dict[str, pd.DataFrame]:
    """The data plots of fig. 3 that ``dvc plots diff`` overlays across commits: ``mig_vs_beta.csv``
    (the β grid of kinds ``vae`` and ``beta_tcvae``) and ``mig_vs_gamma.csv`` (the γ grid of kind
    ``factor_vae``), one row per strength, one column ``<score>_<models entry>`` per score and model:
    the median over seeds (as ``mig_vs_beta.png`` and the claim). A grid without runs has no file."""
    tables = {}
    for col, gamma in (("beta", False), ("gamma", True)):
        f = frame[(frame["kind"] == "factor_vae") == gamma]
        if f.empty:
            continue
        models = list(dict.fromkeys(f["model"]))
        med = f.astype({s: float for s in scores}).groupby(["strength", "model"])[list(scores)].median()
        med = med.unstack("model")
        table = pd.DataFrame({f"{s}_{m}": med[s, m] for s in scores for m in models})
        tables[f"mig_vs_{col}.csv"] = table.rename_axis(col).sort_index().reset_index()
    return tables


def write_strength_tables(frame: pd.DataFrame, out: Path) -> list[Path]:
    """Writes :func:`strength_tables` into ``out``; returns the files."""
    written = []
    for name, table in strength_tables(frame).items():
        table.to_csv(out / name, index=False, float_format="%.10g")
        written.append(out / name)
    return written
