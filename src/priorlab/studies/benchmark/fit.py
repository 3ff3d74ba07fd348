"""The cells of the cross-prior benchmark: ``benchmark_plan`` writes what each cell reads, then a
``benchmark_fit`` stage per (setup, prior) (``matrix`` over ``benchmark.setups`` × ``benchmark.priors``)
trains that prior on that setup at every seed from scratch with ``benchmark.train`` by the shared trainer
(checkpoints, exact resume) and scores it with ``benchmark.evaluate`` plus :mod:`.scores`.

The plan (``models/benchmark_plan/<setup>-<prior>.json``, :func:`plan_record`) holds the cell's whole
input: the setup's settings, its data set's manifest (params and array sha256), the model's settings,
the training and scoring settings, and the reused models' sha256.  A cell depends on its plan file, not
on the sections of ``params.yaml`` it comes from, so a new setup, data set, model or run elsewhere leaves
every cell up to date (as ``setup_runs`` does for ``prior_init``).

Seed ``s`` initialises a model's weights and its batches from ``s`` (``new_model(..., s)``, the trainer's
seed ``s``), as paper 004's ``isa_fit`` cells do; so a (setup, model settings, seed) that paper 004's
study trains with the same ``train`` is the same model, and the cell reads it from that study's output
(:func:`reused_model`; its row's ``origin`` names the stage) instead of training it again.

A prior whose model cannot be built on a setup (the sparse VAE's trunk needs two layers; an ISA layout
holds a fixed number of latents) gets one row saying so, ``not_run`` with the builder's reason, and no
numbers; so does a cell whose measured training cost is above ``benchmark.max_train_s``
(:func:`.speed.cap_reason`, decided in its plan: the reason states the measured step and the cost).

Writes ``models/benchmark/<setup>/<prior>/`` (DVC cache): ``rows.json`` (every seed's row: scores, origin,
settings) and ``<seed>/model.pt`` for the models it trained.  Rows carry no wall times: the outputs are
a function of the plan and the code alone.
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch

from priorlab import paths
from priorlab.config import IsaStudyParams, ModelParams, Params, ParamsError
from priorlab.device import model_device
from priorlab.io import as_read_back, load_torch, read_json, sha256_file, write_json
from priorlab.metric_registry import headline
from priorlab.metrics import probe_accuracy
from priorlab.studies.benchmark import NAME
from priorlab.studies.benchmark.scores import smiley_contrast, zero_share
from priorlab.studies.benchmark.speed import cap_reason, read_speed


def cell_name(setup: str, prior: str) -> str:
    """The ``benchmark_fit`` matrix entry of a setup and a prior (DVC: ``benchmark_fit@<setup>-<prior>``)."""
    return f"{setup}-{prior}"


def cell_dir(setup: str, prior: str) -> Path:
    return paths.MODELS / NAME / setup / prior


def plan_dir() -> Path:
    return paths.MODELS / f"{NAME}_plan"


def plan_file(setup: str, prior: str) -> Path:
    return plan_dir() / f"{cell_name(setup, prior)}.json"


def prior_spec(params: Params, prior: str, setup: str) -> ModelParams:
    """The ``models`` entry of a benchmark prior on ``setup`` (its ``setup_models`` entry there, if any),
    from scratch, its grid's field at ``strength`` if set."""
    entry = params.benchmark.priors[prior]
    spec = params.model(entry.model_for(setup))
    changes: dict[str, Any] = {"warm_start": "scratch"}
    if entry.strength is not None:
        changes[IsaStudyParams.GRID[spec.kind]] = float(entry.strength)
    return dataclasses.replace(spec, **changes)


def reused_model(params: Params, setup: str, spec: ModelParams, seed: int) -> tuple[str, Path] | None:
    """The ``isa_fit`` stage and model file of paper 004's study that trained ``spec`` on ``setup`` at
    ``seed`` with the benchmark's ``train`` settings — the same model the benchmark would train — or None."""
    from priorlab.studies.isa_experiments.fit import (  # lazy: +8 modules, ~18 ms at import studies.benchmark.fit
        cell_dir as isa_cell_dir, cell_name, study_runs)

    study = params.isa_study
    if study.setup != setup or seed not in study.seeds or study.train != params.benchmark.train:
        return None
    for run in study_runs(params):
        if run.seed == seed and run.spec.record() == spec.record():
            return f"isa_fit@{cell_name(run.model, run.seed)}", isa_cell_dir(run.model, run.seed) / f"{run.strength:g}" / "model.pt"
    return None


def train(params: Params, prior: str, setup: str, spec: ModelParams, seed: int, data, device: torch.device):
    """A benchmark model from scratch: weights from ``seed``, the prior initialised (paper 001's GMM
    fit for the factorial mixture, nothing for fixed priors), then ``benchmark.train`` at ``seed``."""
    from priorlab.phases import (  # lazy: +23 modules, ~59 ms at import priorlab.studies.benchmark.fit
        fingerprint, fit_phase, start_model)

    opt = dataclasses.replace(params.benchmark.train, seed=seed)
    model, _ = start_model(params.setup(setup), spec, data, None, seed, device)
    model.set_phase("train")
    fp = fingerprint(NAME, params.setup(setup).record(), spec.record(), dataclasses.asdict(opt),
                     data.manifest.get("arrays", {}))
    fit_phase(model, data, opt, checkpoint=paths.CHECKPOINTS / NAME / f"{prior}-{setup}-{seed}.pt", live_dir=None,
              fingerprint=fp, device=device, desc=f"{NAME}/{prior}/{setup}/{seed}")
    return model


def score(params: Params, model, data, gt, device: torch.device) -> dict[str, Any]:
    """Every benchmark score of one model: the evaluate record's headline numbers (test ELBO, its terms,
    log p(x) by importance weighting, active dimensions, the disentanglement metrics where the data set
    has factors), the per-observation sparsity, and where the data allow the linear-probe accuracy on
    the labels and paper 002's correlation contrast (Smiley)."""
    from priorlab.evaluation import evaluate_model  # lazy: +20 modules, ~45 ms at import priorlab.studies.benchmark.fit
    from priorlab.models.estimates import (  # lazy: +14 modules, ~28 ms at import priorlab.studies.benchmark.fit
        encode_means)

    bench = params.benchmark
    ev = bench.evaluate
    record = evaluate_model(model, data, gt, ev, profile=params.profile, device=device)
    out: dict[str, Any] = dict(headline(record))
    at = model_device(model)  # evaluate_model left it on ``device``
    codes = encode_means(model, data.prepare(data.x("test")[: ev.n_eval]).to(at), ev.batch_size)
    out["sparsity"] = zero_share(codes, bench.sparsity_threshold)
    labels = data.labels("test")
    if labels is not None:
        n = min(ev.metric_num_train, len(data.arrays["x_train"]))
        train_codes = encode_means(model, data.prepare(data.x("train")[:n]).to(at), ev.batch_size)
        out["probe"] = probe_accuracy(train_codes, data.labels("train")[:n], codes, labels[: len(codes)],
                                      random_state=ev.seed)
    if "presence_test" in data.arrays:
        out["contrast"] = smiley_contrast(codes, data.arrays["presence_test"][: len(codes)].astype(bool),
                                          data.arrays["sources_test"][: len(codes)], ev.active_threshold)
    out["settings"] = record["settings"]
    return {k: (float(v) if isinstance(v, (np.floating, np.integer)) else v) for k, v in out.items()}


def plan_record(params: Params, setup: str, prior: str) -> dict[str, Any]:
    """Everything cell ``(setup, prior)`` reads: the setup, its data set's manifest (params and the arrays'
    sha256), the model's settings, ``benchmark``'s training and scoring settings, and for each seed the
    ``isa_fit`` model it reads instead of training (its stage and the file's sha256), or None."""
    from priorlab.data.store import MANIFEST_FILE  # lazy: +5 modules, ~17 ms at import priorlab.studies.benchmark.fit

    bench = params.benchmark
    spec = prior_spec(params, prior, setup)
    manifest = paths.data_dir(params.setup(setup).dataset) / MANIFEST_FILE
    if not manifest.is_file():
        raise ParamsError(f"{manifest} is missing: data@{params.setup(setup).dataset} has not run (dvc repro runs it)")
    reuse = {}
    for seed in bench.seeds:
        source = reused_model(params, setup, spec, seed)
        if source is not None and not source[1].is_file():
            raise ParamsError(f"{source[1]} is missing: {source[0]} has not run (dvc repro benchmark runs it)")
        reuse[str(seed)] = None if source is None else {"stage": source[0], "path": str(source[1]),
                                                         "sha256": sha256_file(source[1])}
    entry = bench.priors[prior]
    record = {
        "setup": setup, "setup_params": params.setup(setup).record(), "data": read_json(manifest),
        "prior": prior, "label": bench.label(prior), "model": entry.model_for(setup), "strength": entry.strength,
        "model_params": spec.record(), "train": dataclasses.asdict(bench.train),
        "evaluate": dataclasses.asdict(bench.evaluate), "sparsity_threshold": bench.sparsity_threshold,
        "seeds": list(bench.seeds), "reuse": reuse, "profile": params.profile}
    capped = cap_reason(params, setup, prior, sum(source is None for source in reuse.values()), read_speed(params))
    if capped is not None:  # only then: a cell that runs has the same plan whatever the measured speed
        record["not_run"] = capped
    return as_read_back(record)


def cell_rows(params: Params, setup: str, prior: str, out: Path, device: torch.device,
              capped: str | None = None) -> list[dict[str, Any]]:
    """The rows of one prior on one setup, a row per seed (trained models saved under ``out``), or one
    ``not_run`` row when its model cannot be built there or its plan leaves it out (``capped``: the reason)."""
    from priorlab.data.store import ground_truth  # lazy: +5 modules, ~17 ms at import priorlab.studies.benchmark.fit
    from priorlab.models import build_model  # lazy: +13 modules, ~31 ms at import priorlab.studies.benchmark.fit
    from priorlab.phases import (  # lazy: +23 modules, ~59 ms at import priorlab.studies.benchmark.fit
        load_setup_data, save_model)

    bench = params.benchmark
    spec = prior_spec(params, prior, setup)
    base = {"setup": setup, "prior": prior, "label": bench.label(prior), "model": bench.priors[prior].model_for(setup),
            "kind": spec.kind, "strength": bench.priors[prior].strength, "model_params": spec.record(),
            "setup_params": params.setup(setup).record()}
    data = load_setup_data(params, setup)
    try:
        build_model(params.setup(setup), spec, data.obs_shape)
    except (ValueError, ParamsError) as exc:  # the kind's builder refuses these nets or observations
        print(f"{prior} on {setup}: not run ({exc})", flush=True)
        return [{**base, "seed": None, "origin": "not_run", "reason": str(exc)}]
    if capped is not None:
        print(f"{prior} on {setup}: not run ({capped})", flush=True)
        return [{**base, "seed": None, "origin": "not_run", "reason": capped}]
    gt = ground_truth(params.dataset_of(setup))
    rows = []
    for seed in bench.seeds:
        source = reused_model(params, setup, spec, seed)
        if source is not None:
            model = build_model(params.setup(setup), spec, data.obs_shape)
            model.load_state_dict(load_torch(source[1])["state_dict"])
            origin = source[0]
        else:
            model = train(params, prior, setup, spec, seed, data, device)
            save_model(out / str(seed) / "model.pt", model, {"prior": prior, "setup": setup, "seed": seed,
                                                              "model": spec.record()})
            origin = "trained"
        model.eval()
        row = {**base, "seed": seed, "origin": origin, **score(params, model, data, gt, device)}
        model.to("cpu")
        rows.append(row)
        print(f"{prior} on {setup}, seed {seed} ({origin}): ELBO {row.get('elbo', float('nan')):.1f}, "
              f"MIG {row.get('mig', float('nan')):.3f}, zeros per input {row['sparsity']:.2f}", flush=True)
    return rows


def run_benchmark_fit(params: Params, setup: str, prior: str) -> Path:
    """``benchmark_fit@<setup>-<prior>``: train (or read) and score the prior on the setup at every seed;
    write its folder atomically (a killed stage leaves none; its checkpoints let a rerun resume)."""
    from priorlab.phases import resolve_device  # lazy: +23 modules, ~59 ms at import priorlab.studies.benchmark.fit

    bench = params.benchmark
    if setup not in bench.setups or prior not in bench.priors:
        raise ParamsError(f"the benchmark has no cell {cell_name(setup, prior)!r} (setups {bench.setups}, priors "
                          f"{sorted(bench.priors)})")
    plan = plan_file(setup, prior)
    record = plan_record(params, setup, prior)
    if not plan.is_file() or read_json(plan) != record:
        raise ParamsError(f"{plan} is missing or older than params.yaml or its inputs: run the benchmark_plan stage "
                          "first (dvc repro runs it)")
    out = cell_dir(setup, prior)
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    device = resolve_device(params.device)
    rows = cell_rows(params, setup, prior, tmp, device, capped=record.get("not_run"))
    write_json(tmp / "rows.json", {"device": str(device), "rows": rows})
    shutil.rmtree(out, ignore_errors=True)
    tmp.replace(out)
    return out
