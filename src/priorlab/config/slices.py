"""A stage's slice of the shared params sections (issue 44: a param change reruns only what it affects).

A study stage that trains a few named entries of a large section (``models``, ``setups``,
``datasets``) would otherwise track the whole section, and an edit of any other entry would rerun it
(a β-TCVAE's weight reran paper 003's five ``sparse_vae_fit`` cells, ~14 min on 2 cores).  Instead the
``param_slices`` stage writes, per such stage, the entries it reads (``models/param_slices/<stage>.json``);
the stage depends on that file and checks, before any work, that it holds what these params say
(:func:`check_slice`): a stale or missing file is one message, nothing written.  The stage's own study
keys stay tracked in ``dvc.yaml`` as before.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Iterable, Mapping

from priorlab import paths
from priorlab.config.checks import ParamsError
from priorlab.io import as_read_back, read_json


def slices_root() -> Path:
    """Output of ``param_slices``: a file per sliced stage."""
    return paths.MODELS / "param_slices"


def slice_file(stage: str) -> Path:
    """``param_slices``' file for ``stage`` (its name before any ``@``: one file serves all its cells)."""
    return slices_root() / f"{stage}.json"


def entries(section: Mapping, names: Iterable[str]) -> dict:
    """The named entries of a params section, each as its dataclass fields (every setting, set or
    default), in first-named order without repeats."""
    return {name: dataclasses.asdict(section[name]) for name in dict.fromkeys(names)}


def check_slice(stage: str, record: dict) -> None:
    """Refuse (:class:`ParamsError`) unless ``stage``'s slice file holds ``record``, the entries these
    params give it: the file DVC tracked for the stage must be the one it runs with."""
    path = slice_file(stage)
    if not path.is_file() or read_json(path) != as_read_back(record):
        raise ParamsError(f"{path} is missing or older than params.yaml's entries that {stage} reads: run the "
                          "param_slices stage first (dvc repro runs it)")
