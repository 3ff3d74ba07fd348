"""The work of each DVC stage, as library functions the thin ``stages/*.py`` scripts call.

data → pretrain → prior_init → train → evaluate → figures → report.  Every
function takes validated :class:`~priorlab.config.Params`, reads the
outputs of the stages before it (paths in :mod:`priorlab.paths`) and writes
its own outputs atomically.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import torch

from priorlab import paths
from priorlab.config import ModelParams, OptimParams, Params
from priorlab.data.store import Dataset, build_arrays, ground_truth, load_dataset, write_dataset
from priorlab.io import load_torch, read_json, save_torch, write_json
from priorlab.models import VAE, build_model
from priorlab.train import fit


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError("device: cuda requested but no CUDA device is available (use device: auto or cpu)")
    return torch.device(name)


def fingerprint(*parts: Any) -> str:
    """Stable hash of JSON-serialisable configuration parts."""
    blob = json.dumps(parts, sort_keys=True, default=lambda o: getattr(o, "__dict__", str(o)))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _run_parts(params: Params, run: str) -> tuple[str, str, int]:
    r = params.run(run)
    return r.setup, r.model, r.seed


def _asdict(obj) -> dict:
    return {k: getattr(obj, k) for k in obj.__dataclass_fields__}


# --------------------------------------------------------------------------- data


def run_data(params: Params, dataset: str) -> dict:
    """``data@<dataset>``: synthesise the arrays and write them with a manifest."""
    p = params.datasets[dataset] if dataset in params.datasets else params.dataset_of(dataset)
    return write_dataset(paths.data_dir(dataset), p, build_arrays(p))


def load_setup_data(params: Params, setup: str) -> Dataset:
    s = params.setup(setup)
    return load_dataset(paths.data_dir(s.dataset), normalise=params.datasets[s.dataset].normalise)


# --------------------------------------------------------------------------- models on disk


def _new_model(params: Params, setup: str, model: ModelParams, obs_shape, seed: int) -> VAE:
    torch.manual_seed(seed)  # weight initialisation
    return build_model(params.setup(setup), model, obs_shape)


def save_model(path: Path, model: VAE, meta: dict) -> None:
    save_torch(path, {"state_dict": model.state_dict(), "meta": meta})


def load_model(params: Params, setup: str, model_name: str, path: Path, obs_shape) -> tuple[VAE, dict]:
    blob = load_torch(path)
    spec = pretrain_spec(params, setup) if model_name == "pretrain" else params.model(model_name)
    model = build_model(params.setup(setup), spec, obs_shape)
    model.load_state_dict(blob["state_dict"])
    model.eval()
    return model, blob["meta"]


def training_inputs(model: VAE, data: Dataset):
    """(stored training rows, prepare) for the trainer; a model that needs more per batch than the
    images (labels for semi-supervision, paper 001 sec. 2.5) provides ``training_inputs(data)``."""
    hook = getattr(model, "training_inputs", None)
    return hook(data) if hook is not None else (data.x("train"), data.prepare)


def _fit_phase(params: Params, model: VAE, data: Dataset, opt: OptimParams, phase: str, run: str, fp: str) -> dict:
    if hasattr(model, "set_dataset_size"):  # aggregate-posterior estimators (β-TCVAE) need N
        model.set_dataset_size(len(data.x("train")))
    x_train, prepare = training_inputs(model, data)
    result = fit(
        model,
        x_train,
        opt,
        checkpoint=paths.checkpoint_file(phase, run),
        live_dir=paths.live_dir(phase, run),
        fingerprint=fp,
        prepare=prepare,
        device=resolve_device(params.device),
        desc=phase,
    )
    model.to("cpu")
    return {"steps": result.steps, "final": result.final_logs}


# --------------------------------------------------------------------------- pretrain


def pretrain_spec(params: Params, setup: str) -> ModelParams:
    """The model pretrained for a setup: its ``pretrain_model`` entry of ``models:``."""
    return params.model(params.setup(setup).pretrain_model)


def run_pretrain(params: Params, setup: str) -> dict:
    """``pretrain@<setup>``: the setup's nets under the N(0, I) prior (paper 001, §2.4)."""
    data = load_setup_data(params, setup)
    opt = params.pretrain
    spec = pretrain_spec(params, setup)
    fp = fingerprint("pretrain", _asdict(params.setup(setup)), _asdict(spec), _asdict(opt), data.manifest["sha256"])
    model = _new_model(params, setup, spec, data.obs_shape, opt.seed)
    model.set_phase("pretrain")
    logs = _fit_phase(params, model, data, opt, "pretrain", setup, fp)
    meta = {"phase": "pretrain", "setup": setup, "fingerprint": fp, "data_sha256": data.manifest["sha256"], **logs}
    save_model(paths.pretrain_dir(setup) / "model.pt", model, meta)
    return meta


# --------------------------------------------------------------------------- prior_init


def run_prior_init(params: Params, run: str) -> dict:
    """``prior_init@<run>``: start from the pretrained nets and fit the prior with them frozen.

    Fixed priors (N(0, I)) have nothing to fit: the stage then only assembles
    the model.  ``warm_start: scratch`` models start from fresh weights instead.
    """
    setup, model_name, seed = _run_parts(params, run)
    data = load_setup_data(params, setup)
    spec = params.model(model_name)
    model = _new_model(params, setup, spec, data.obs_shape, params.train.seed + seed)
    pre_meta: dict = {}
    if spec.warm_start == "pretrain":
        pre = load_torch(paths.pretrain_dir(setup) / "model.pt")
        pre_meta = pre["meta"]
        try:
            model.load_pretrained(pre["state_dict"])
        except ValueError as exc:
            raise ValueError(f"setup {setup!r}, model {model_name!r}: {exc}") from None
    model.set_phase("prior_init")
    for p in model.parameters():
        p.requires_grad_(False)
    generator = torch.Generator().manual_seed(params.train.seed + seed)
    x_train, prepare = training_inputs(model, data)
    batches = (prepare(x_train[i : i + 500]) for i in range(0, len(x_train), 500))
    init_logs = model.init_prior(batches, generator)
    for p in model.parameters():
        p.requires_grad_(True)
    meta = {
        "phase": "prior_init",
        "run": run,
        "warm_start": spec.warm_start,
        "pretrain_fingerprint": pre_meta.get("fingerprint"),
        "prior_init": init_logs,
    }
    save_model(paths.prior_init_dir(run) / "model.pt", model, meta)
    return meta


# --------------------------------------------------------------------------- train


def run_train(params: Params, run: str) -> dict:
    """``train@<run>``: joint training of nets and prior from the prior_init state."""
    setup, model_name, seed = _run_parts(params, run)
    data = load_setup_data(params, setup)
    model, init_meta = load_model(params, setup, model_name, paths.prior_init_dir(run) / "model.pt", data.obs_shape)
    opt = params.train
    steps = params.model(model_name).train_steps or opt.steps  # a model may set its own length
    opt = OptimParams(**{**_asdict(opt), "seed": opt.seed + seed, "steps": steps})
    fp = fingerprint("train", run, _asdict(params.model(model_name)), _asdict(opt), init_meta)
    model.set_phase("train")
    logs = _fit_phase(params, model, data, opt, "train", run, fp)
    meta = {"phase": "train", "run": run, "fingerprint": fp, **logs}
    save_model(paths.train_dir(run) / "model.pt", model, meta)
    return meta


# --------------------------------------------------------------------------- evaluate


def run_evaluate(params: Params, run: str) -> dict:
    """``evaluate@<run>``: test ELBO and its terms, L_k, active dims, disentanglement metrics."""
    from priorlab.evaluation import evaluate_model

    setup, model_name, seed = _run_parts(params, run)
    data = load_setup_data(params, setup)
    model, _ = load_model(params, setup, model_name, paths.train_dir(run) / "model.pt", data.obs_shape)
    s = params.setup(setup)
    result = evaluate_model(
        model,
        data,
        ground_truth(params.datasets[s.dataset]),
        params.evaluate,
        profile=params.profile,
        metric_names=params.evaluate.metrics_for(params.run(run).group),
    )
    result = {"run": run, "group": params.run(run).group, "setup": setup, "model": model_name, "seed": seed,
              "model_params": _asdict(params.model(model_name)), "setup_params": _asdict(s), **result}
    write_json(paths.metrics_file(run), result)
    return result


# --------------------------------------------------------------------------- figures / report


def run_figures(params: Params, run: str) -> list[Path]:
    """``figures@<run>``: training curves, reconstructions and latent traversals."""
    from priorlab.plots import curves, reconstructions, traversals

    setup, model_name, seed = _run_parts(params, run)
    data = load_setup_data(params, setup)
    model, _ = load_model(params, setup, model_name, paths.train_dir(run) / "model.pt", data.obs_shape)
    fp = params.figures
    out = paths.figures_dir(run)
    x = data.prepare(data.x("test")[: fp.n_reconstructions])
    written = [
        curves.plot_training_curves(
            [paths.live_dir("pretrain", setup), paths.live_dir("train", run)], out / "curves.png", title=run
        ),
        reconstructions.plot_reconstructions(model, x, out / "reconstructions.png", title=run),
        traversals.plot_traversals(
            model, x, out / "traversals.png", steps=fp.traversal_steps, span=fp.traversal_range,
            max_dims=fp.max_traversal_dims, title=run,
        ),
    ]
    return written


def run_report(params: Params) -> Path:
    """``report``: the results tables of every run in ``reports/README.md``."""
    from priorlab.report import write_report

    return write_report(params, [read_json(paths.metrics_file(r)) for r in params.runs], paths.REPORTS / "README.md")
