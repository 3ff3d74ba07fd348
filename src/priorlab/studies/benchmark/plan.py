"""The ``benchmark_plan`` stage: the whole input of every benchmark cell — a ``benchmark_fit`` cell per
(setup, prior) (:func:`.fit.plan_record`) and a ``benchmark_synthetic`` cell per prior
(:func:`.synthetic.plan_records`) — one file each, the only input its stage tracks."""

from __future__ import annotations

from typing import Any

from priorlab.config import Params
from priorlab.io import write_json_folder
from priorlab.studies.benchmark.fit import cell_name, plan_dir, plan_record
from priorlab.studies.benchmark.synthetic import plan_records


def run_benchmark_plan(params: Params) -> dict[str, Any]:
    """``benchmark_plan``: one file per cell (:func:`plan_record`; the synthetic cells' under ``synthetic/``,
    :func:`.synthetic.plan_records`), the only input its stage tracks."""
    records = {cell_name(setup, prior): plan_record(params, setup, prior)
               for setup in params.benchmark.setups for prior in params.benchmark.priors}
    write_json_folder(plan_dir(), {**records, **plan_records(params)})
    return records
