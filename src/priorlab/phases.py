"""The training chain of one model on a loaded data set (paper 001, sec. 2.4): pretrain the setup's
nets, start the model from them and fit its prior with the nets frozen, then train jointly.

The pipeline's stages (:mod:`priorlab.pipeline`) run these phases one stage each, their inputs and
outputs on disk under :mod:`priorlab.paths` (read back by :func:`load_setup_data` and :func:`load_model`,
which the studies use too); the public API (:mod:`priorlab.estimator`) runs them in one call on the
user's arrays.  Both go through these functions: one code path.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import torch

from priorlab import paths
from priorlab.config import ModelParams, OptimParams, Params, ParamsError, SetupParams
from priorlab.data.store import Dataset, load_dataset
from priorlab.io import load_torch, save_torch
from priorlab.models import build_model
from priorlab.models.protocol import Model
from priorlab.train import fit, fit_prior
from priorlab.train.replicates import fit_replicates


def resolve_device(name: str) -> torch.device:
    """``auto`` (CUDA when there is one), ``cpu``, ``cuda`` or any torch device name."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ParamsError("device: cuda requested but no CUDA device is available (use device: auto or cpu)")
    return torch.device(name)


def fingerprint(*parts: Any) -> str:
    """Stable hash of JSON-serialisable configuration parts."""
    blob = json.dumps(parts, sort_keys=True, default=lambda o: getattr(o, "__dict__", str(o)))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def new_model(setup: SetupParams, spec: ModelParams, obs_shape, seed: int) -> Model:
    """The model of ``spec`` on the setup's nets, its weights initialised from ``seed``."""
    torch.manual_seed(seed)  # weight initialisation
    return build_model(setup, spec, obs_shape)


def save_model(path: str | Path, model: Model, meta: dict) -> None:
    """A model's weights and what produced them (atomic)."""
    save_torch(path, {"state_dict": model.state_dict(), "meta": meta})


def load_setup_data(params: Params, setup: str) -> Dataset:
    """The data set of a setup, as the ``data`` stage wrote it."""
    s = params.setup(setup)
    return load_dataset(paths.data_dir(s.dataset), normalise=params.datasets[s.dataset].normalise)


def pretrain_spec(params: Params, setup: str) -> ModelParams:
    """The model pretrained for a setup: its ``pretrain_model`` entry of ``models:``."""
    return params.model(params.setup(setup).pretrain_model)


def load_model(params: Params, setup: str, model_name: str, path: Path, obs_shape) -> tuple[Model, dict]:
    """A saved model of a setup (``model_name`` a ``models:`` entry, or ``pretrain``), in eval mode, with its meta."""
    blob = load_torch(path)
    spec = pretrain_spec(params, setup) if model_name == "pretrain" else params.model(model_name)
    model = build_model(params.setup(setup), spec, obs_shape)
    model.load_state_dict(blob["state_dict"])
    model.eval()
    return model, blob["meta"]


def fit_phase(model: Model, data: Dataset, opt: OptimParams, *, checkpoint: str | Path, live_dir: str | Path | None,
              fingerprint: str, device: torch.device, desc: str, progress: bool = True,
              curves: str | None = None) -> dict:
    """Pretraining or joint training of ``model`` on the training rows of ``data`` (resumable from
    ``checkpoint``; curves in ``live_dir`` named ``<curves>/<term>``); the model is left on the CPU.
    Returns the steps and the last logged values."""
    model.bind_data(data)
    result = fit(model, model.training_set(data), opt, checkpoint=checkpoint, live_dir=live_dir,
                 fingerprint=fingerprint, device=device, desc=desc, progress=progress, curves=curves)
    model.to("cpu")
    return {"steps": result.steps, "final": result.final_logs}


def fit_replicates_phase(models: list[Model], data: Dataset, opts: list[OptimParams], *, checkpoints: list[Path],
                         live_dirs: list[Path] | None, fingerprints: list[str], device: torch.device, desc: str,
                         progress: bool = True, curves: str | None = None) -> list[dict | Exception]:
    """:func:`fit_phase` of N replicates in one vectorised loop (:func:`priorlab.train.replicates.fit_replicates`):
    ``opts`` equal but for their seeds.  Returns per model its steps and last logged values, or the
    :class:`~priorlab.train.TrainingDiverged` that stopped it; the models are left on the CPU."""
    from dataclasses import replace

    if any(replace(o, seed=0) != replace(opts[0], seed=0) for o in opts):
        raise ParamsError(f"{desc}: replicates must train with the same settings but their seed")
    for m in models:
        m.bind_data(data)
    results = fit_replicates(models, models[0].training_set(data), opts[0], [o.seed for o in opts],
                             checkpoints=checkpoints, fingerprints=fingerprints, device=device, desc=desc,
                             progress=progress, live_dirs=live_dirs, curves=curves)
    for m in models:
        m.to("cpu")
    return [r.diverged if r.diverged is not None else {"steps": r.result.steps, "final": r.result.final_logs}
            for r in results]


def start_model(setup: SetupParams, spec: ModelParams, data: Dataset, pretrained: dict | None, seed: int,
                device: torch.device) -> tuple[Model, dict]:
    """The prior_init phase: a new model (weights from ``seed``) that takes the pretrained nets when
    ``spec.warm_start`` is ``pretrain`` (``pretrained``: a saved model, ``{"state_dict", "meta"}``), then
    fits its prior with every weight frozen (paper 001, sec. 2.4: the GMM initialisation of the mixture
    prior; nothing for fixed priors).  Returns the model (on the CPU) and the prior fit's logs.

    Raises ``ValueError`` when the model cannot take the pretrained nets."""
    model = new_model(setup, spec, data.obs_shape, seed)
    if spec.warm_start == "pretrain":
        if pretrained is None:
            raise ValueError(f"model kind {spec.kind!r} starts from a pretrained model (warm_start: pretrain), "
                             "but none was given")
        model.load_pretrained(pretrained["state_dict"])
    model.set_phase("prior_init")
    for p in model.parameters():
        p.requires_grad_(False)
    model.bind_data(data)
    logs = fit_prior(model, model.training_set(data), device=device, seed=seed)  # on the device when there is a prior to fit
    model.to("cpu")
    for p in model.parameters():
        p.requires_grad_(True)
    return model, logs
