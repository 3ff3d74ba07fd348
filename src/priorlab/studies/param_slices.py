"""The ``param_slices`` stage: for each study stage that reads a few entries of ``models``, ``setups`` or
``datasets``, those entries in ``models/param_slices/<stage>.json`` (:mod:`priorlab.config.slices`).  The
stage tracks the whole sections once; each sliced stage depends on its own file, so an edit of an
entry it does not read reruns this stage alone (its file unchanged, DVC stops there)."""

from __future__ import annotations

from typing import Callable

from priorlab.config import Params
from priorlab.config.slices import slices_root
from priorlab.io import as_read_back, write_json_folder
from priorlab.studies.fmvae_experiments import supervised_ceiling
from priorlab.studies.mssc_experiments import fit as mssc_fit
from priorlab.studies.sparse_vae_experiments import fit as sparse_vae_fit
from priorlab.studies.sparse_vae_experiments import real as sparse_vae_real

SLICES: dict[str, Callable[[Params], dict]] = {
    sparse_vae_fit.SLICE: sparse_vae_fit.param_slice,
    sparse_vae_real.SLICE: sparse_vae_real.param_slice,
    sparse_vae_real.ABLATION_SLICE: sparse_vae_real.ablation_param_slice,
    supervised_ceiling.NAME: supervised_ceiling.param_slice,
    mssc_fit.PATCHES_SLICE: mssc_fit.patches_param_slice,
}
"""Sliced stage (its name before ``@``) → what it reads of the shared sections."""


def run_param_slices(params: Params) -> dict[str, dict]:
    """``param_slices``: one file per entry of :data:`SLICES` (the folder replaced whole)."""
    records = {stage: as_read_back(fn(params)) for stage, fn in SLICES.items()}
    write_json_folder(slices_root(), records)
    return records
