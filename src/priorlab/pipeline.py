"""The work of each DVC stage, as library functions the thin ``stages/*.py`` scripts call.

data → pretrain → prior_init → train → evaluate → figures → report.  Every
function takes validated :class:`~priorlab.config.Params`, reads the
outputs of the stages before it (paths in :mod:`priorlab.paths`) and writes
its own outputs atomically.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path


from priorlab import paths
from priorlab.config import ModelParams, OptimParams, Params, ParamsError
from priorlab.data.store import Dataset, build_arrays, ground_truth, write_dataset
from priorlab.io import as_read_back, load_torch, read_json, tree_digest, write_json, write_json_folder
from priorlab.metric_registry import headline
from priorlab.models import build_model
from priorlab.models.protocol import Model
from priorlab.phases import (fingerprint, fit_phase, fit_replicates_phase, load_model, load_setup_data, new_model,
                             pretrain_spec, resolve_device, save_model, start_model)
from priorlab.studies.cells import Cell
from priorlab.train.replicates import vectorisable


def _run_parts(params: Params, run: str) -> tuple[str, str, int]:
    r = params.run(run)
    return r.setup, r.model, r.seed


def _asdict(obj) -> dict:
    return dataclasses.asdict(obj)


# --------------------------------------------------------------------------- data


def run_data(params: Params, dataset: str) -> dict:
    """``data@<dataset>``: synthesise the arrays and write them with a manifest."""
    p = params.datasets[dataset] if dataset in params.datasets else params.dataset_of(dataset)
    return write_dataset(paths.data_dir(dataset), p, build_arrays(p))


# --------------------------------------------------------------------------- models on disk


def _new_model(params: Params, setup: str, model: ModelParams, obs_shape, seed: int) -> Model:
    return new_model(params.setup(setup), model, obs_shape, seed)


def _fit_phase(params: Params, model: Model, data: Dataset, opt: OptimParams, phase: str, run: str, fp: str,
               live_dir: Path) -> dict:
    return fit_phase(model, data, opt, checkpoint=paths.checkpoint_file(phase, run), live_dir=live_dir,
                     fingerprint=fp, device=resolve_device(params.device),
                     desc=f"{phase}@{run}",  # the stage's name: a divergence's error line says which run
                     curves=phase)  # the curves keep the phase's name (`dvc plots diff` compares them across runs)


# --------------------------------------------------------------------------- pretrain


def run_pretrain(params: Params, setup: str) -> dict:
    """``pretrain@<setup>``: the setup's nets under the N(0, I) prior (paper 001, §2.4).

    A setup with ``pretraining: false`` trains nothing: the stage records that, and its runs
    start from scratch (``warm_start: scratch``, checked when the params are read).
    """
    data = load_setup_data(params, setup)
    if not params.setup(setup).pretraining:
        meta = {"phase": "pretrain", "setup": setup, "skipped": True, "data_sha256": data.manifest["sha256"]}
        write_json(paths.pretrain_dir(setup) / "meta.json", meta)
        write_json(paths.pretrain_live_dir(setup) / "skipped.json", meta)  # the stage's curves output
        return meta
    spec = pretrain_spec(params, setup)
    opt = spec.phase("pretrain", params.pretrain)  # its own length / settings (e.g. VSC's spike pre-training)
    opt = OptimParams(**{**_asdict(opt), "seed": opt.seed + params.setup(setup).seed})  # the setup's replicate
    fp = fingerprint("pretrain", params.setup(setup).record(), spec.fields(), _asdict(opt), data.manifest["sha256"])
    model = _new_model(params, setup, spec, data.obs_shape, opt.seed)
    model.set_phase("pretrain")
    logs = _fit_phase(params, model, data, opt, "pretrain", setup, fp, paths.pretrain_live_dir(setup))
    meta = {"phase": "pretrain", "setup": setup, "fingerprint": fp, "data_sha256": data.manifest["sha256"], **logs}
    save_model(paths.pretrain_dir(setup) / "model.pt", model, meta)
    return meta


# --------------------------------------------------------------------------- prior_init


def runs_of_setup(params: Params, setup: str) -> list[str]:
    """The runs trained from ``setup``'s nets, in ``runs:`` order."""
    params.setup(setup)
    return [name for name, r in params.runs.items() if r.setup == setup]


def setup_runs_record(params: Params, setup: str) -> dict:
    """Everything ``prior_init@<setup>`` reads from ``setups``, ``models``, ``runs`` and ``train``: the
    setup's settings, the training seed, and each of its runs with its model's settings."""
    runs = {}
    for run in runs_of_setup(params, setup):
        _, model_name, seed = _run_parts(params, run)
        runs[run] = {"model": model_name, "seed": seed, "settings": params.model(model_name).fields()}
    record = {"setup": setup, "settings": params.setup(setup).record(), "train_seed": params.train.seed, "runs": runs}
    return as_read_back(record)


def run_code(params: Params) -> dict:
    """``code``: the digest of the library (:func:`priorlab.io.tree_digest` of ``src/priorlab``) in
    ``models/code.json``.  Every other stage depends on that file rather than on the folder, so plain DVC
    hashes the library's files once per ``dvc status`` / ``dvc repro`` instead of once per stage (about
    7 ms each of 330); an edit of the library reruns this stage, whose new digest stales every stage as
    before.  Reads no params (``run_stage`` validates them, as for every stage)."""
    record = code_record()
    write_json(paths.code_digest_file(), record)
    return record


def code_record(root: str | Path = ".") -> dict:
    """What ``code`` writes for the project at ``root``: the library's path and the digest of its files."""
    return {"package": paths.LIBRARY.as_posix(), "files": tree_digest(Path(root) / paths.LIBRARY)}


def run_setup_runs(params: Params) -> dict:
    """``setup_runs``: one file per setup (``models/setup_runs/<setup>.json``) holding its slice of the
    params (:func:`setup_runs_record`).  ``prior_init@<setup>`` depends on its own file, not on the whole
    ``models`` and ``runs`` sections: a new run or a changed model reruns only the setups it belongs to,
    and ``dvc.lock`` records those sections once instead of once per setup (it grows linearly with
    the runs)."""
    records = {setup: setup_runs_record(params, setup) for setup in params.setups}
    write_json_folder(paths.setup_runs_root(), records)
    return records


def run_prior_init(params: Params, setup: str) -> dict:
    """``prior_init@<setup>``: for every run of the setup, start from the pretrained nets and fit
    the prior with them frozen (paper 001, §2.4: the GMM initialisation of the mixture prior).

    One stage per setup rather than per run: the data and the pretrained nets are loaded once, and
    fixed priors (N(0, I)), which have nothing to fit, cost no process of their own — the stage only
    assembles their model.  Each run's model is written to its own folder, which is all that run's
    ``train`` stage depends on, so a run is retrained only when its own initial state changed
    (the files of unchanged runs are rewritten byte for byte).  ``warm_start: scratch`` models start
    from fresh weights instead.
    """
    recorded = paths.setup_runs_file(setup)
    if not recorded.is_file() or read_json(recorded) != setup_runs_record(params, setup):
        raise ParamsError(f"{recorded} is missing or older than params.yaml's runs of setup {setup!r}: "
                          "run the setup_runs stage first (dvc repro runs it)")
    data = load_setup_data(params, setup)
    pre = load_torch(paths.pretrain_dir(setup) / "model.pt") if params.setup(setup).pretraining else None
    written = {}
    for run in runs_of_setup(params, setup):
        written[run] = _prior_init_run(params, run, data, pre)
    write_json(paths.prior_init_root(setup) / "runs.json", {"setup": setup, "runs": sorted(written)})
    return written


def _prior_init_run(params: Params, run: str, data: Dataset, pre: dict | None) -> dict:
    setup, model_name, seed = _run_parts(params, run)
    spec = params.model(model_name)
    try:
        model, init_logs = start_model(params.setup(setup), spec, data, pre, params.train.seed + seed,
                                       resolve_device(params.device))
    except ValueError as exc:
        raise ParamsError(f"setup {setup!r}, model {model_name!r}: {exc}") from None
    meta = {
        "phase": "prior_init",
        "run": run,
        "warm_start": spec.warm_start,
        "pretrain_fingerprint": (pre or {}).get("meta", {}).get("fingerprint") if spec.warm_start == "pretrain" else None,
        "prior_init": init_logs,
    }
    save_model(paths.prior_init_dir(run, setup) / "model.pt", model, meta)
    return meta


# --------------------------------------------------------------------------- train


def run_train(params: Params, run: str) -> dict:
    """``train@<run>``: joint training of nets and prior from the prior_init state."""
    data = load_setup_data(params, params.run(run).setup)
    model, opt, fp = _train_start(params, run, data)
    logs = _fit_phase(params, model, data, opt, "train", run, fp, paths.train_live_dir(run, params.run(run).group))
    return _save_trained(params, run, model, fp, logs)


def _train_start(params: Params, run: str, data: Dataset) -> tuple[Model, OptimParams, str]:
    """A run's model from its prior_init state, in the train phase, with its options (the model's own
    length and optimiser settings, the run's seed offset) and the run's fingerprint."""
    setup, model_name, seed = _run_parts(params, run)
    model, init_meta = load_model(params, setup, model_name, paths.prior_init_dir(run, setup) / "model.pt", data.obs_shape)
    spec = params.model(model_name)
    opt = spec.phase("train", params.train)  # a model may set its own length and optimiser settings
    opt = OptimParams(**{**_asdict(opt), "seed": opt.seed + seed})
    fp = fingerprint("train", run, spec.fields(), _asdict(opt), init_meta)
    model.set_phase("train")
    return model, opt, fp


def _save_trained(params: Params, run: str, model: Model, fp: str, logs: dict) -> dict:
    """``train@<run>``'s model file, with its meta (returned)."""
    meta = {"phase": "train", "run": run, "fingerprint": fp, **logs}
    save_model(paths.train_dir(run, params.run(run).group) / "model.pt", model, meta)
    return meta


def run_train_arm(params: Params, runs: str | list[str]) -> list[dict]:
    """``train@<run>`` for each of ``runs`` (a list, or names joined by commas) in one vectorised
    process (:mod:`priorlab.train.replicates`): the seeds of one arm — one model entry, setups that
    differ at most in their seed (each run starts from its own prior_init state).  Each run's model,
    meta and curves go where :func:`run_train` writes them, equal to its output up to float rounding
    (the fingerprint is the same).  A run that diverges leaves its checkpoint and no model; the others
    are saved, then its error is raised."""
    runs = [r for r in runs.split(",") if r] if isinstance(runs, str) else list(runs)
    if not runs:
        raise ParamsError("train arm: no runs given")
    parts = [_run_parts(params, r) for r in runs]
    names = {m for _, m, _ in parts}
    if len(names) != 1:
        raise ParamsError(f"train arm: runs of one model only, got {sorted(names)}")
    nets = {_nets_record(params, s) for s, _, _ in parts}
    if len(nets) != 1:
        raise ParamsError(f"train arm: the runs' setups differ in more than their seed ({sorted({s for s, _, _ in parts})})")
    data = load_setup_data(params, parts[0][0])
    models, opts, fps = zip(*(_train_start(params, run, data) for run in runs))  # as run_train's, fingerprints too
    results = fit_replicates_phase(list(models), data, list(opts), checkpoints=[paths.checkpoint_file("train", r) for r in runs],
                                   live_dirs=[paths.train_live_dir(r, params.run(r).group) for r in runs], fingerprints=list(fps),
                                   device=resolve_device(params.device), desc=f"train@{runs[0]}+{len(runs) - 1}",
                                   curves="train")
    metas, failed = [], []
    for run, model, fp, logs in zip(runs, models, fps, results):
        if isinstance(logs, Exception):
            failed.append(logs)
            continue
        metas.append(_save_trained(params, run, model, fp, logs))
    if failed:
        raise failed[0]  # a TrainingDiverged (a UserError: one line, exit 2)
    return metas


def train_arms(params: Params, runs: str | list[str]) -> list[list[str]]:
    """How ``runs`` (``train@`` stages ready to run; a list, or names joined by commas) train under
    ``replicates`` (:class:`~priorlab.config.ReplicatesParams`): the groups of two or more that train in
    one vectorised process (:func:`run_train_arm`) — runs of one model whose setups differ at most in
    their seed, of a kind whose replicates vectorise (:func:`priorlab.train.replicates.vectorisable`), the
    model not in ``replicates.separate`` — in the order given; the others are left out (a process each).
    None under ``mode: separate``, or ``auto`` where ``device`` is not CUDA."""
    runs = [r for r in runs.split(",") if r] if isinstance(runs, str) else list(runs)
    mode = params.replicates.mode
    if mode == "auto":
        mode = "vectorised" if params.device != "cpu" and resolve_device(params.device).type == "cuda" else "separate"
    if mode == "separate":
        return []
    groups: dict[tuple[str, str], list[str]] = {}
    for run in runs:
        setup, model, _ = _run_parts(params, run)
        if model not in params.replicates.separate:
            groups.setdefault((model, _nets_record(params, setup)), []).append(run)
    arms = []
    for (model, _), members in groups.items():
        if len(members) < 2:
            continue
        setup = params.run(members[0]).setup
        if vectorisable(build_model(params.setup(setup), params.model(model), load_setup_data(params, setup).obs_shape)) is None:
            arms.append(members)
    return arms


def _nets_record(params: Params, setup: str) -> str:
    """A setup's settings but its seed, as text (the runs of an arm share them)."""
    record = {k: v for k, v in params.setup(setup).record().items() if k != "seed"}
    return json.dumps(record, sort_keys=True, default=str)


# --------------------------------------------------------------------------- evaluate


def run_evaluate(params: Params, run: str) -> dict:
    """``evaluate@<run>``: test ELBO and its terms, L_k, active dims, disentanglement metrics."""
    from priorlab.evaluation import evaluate_model  # lazy: +2 modules, ~7 ms at import priorlab.pipeline

    setup, model_name, seed = _run_parts(params, run)
    data = load_setup_data(params, setup)
    model, _ = load_model(params, setup, model_name, paths.train_dir(run, params.run(run).group) / "model.pt", data.obs_shape)
    s = params.setup(setup)
    result = evaluate_model(
        model,
        data,
        ground_truth(params.datasets[s.dataset]),
        params.evaluate,
        profile=params.profile,
        metric_names=params.evaluate.metrics_for(params.run(run).group),
        device=resolve_device(params.device),  # model-side work on the GPU when there is one; metrics numpy
    )
    result = {"run": run, "group": params.run(run).group, "setup": setup, "model": model_name, "seed": seed,
              "model_params": params.model(model_name).record(), "setup_params": s.record(), **result}
    write_json(paths.evaluation_file(run, params.run(run).group), result)
    write_json(paths.metrics_file(run, params.run(run).group), headline(result))
    return result


# --------------------------------------------------------------------------- figures / report


def run_figures(params: Params) -> list[Path]:
    """``figures``: for every run but the diagnosis arms, the figures of :data:`priorlab.plots.registry.RUN_FIGURES` that
    apply to its observation kind and model (training curves always; reconstructions and traversals
    of images).  One stage for all runs: a figure takes about a second, a process start as long."""
    from priorlab.plots.registry import (  # lazy: matplotlib, ~160 ms at import priorlab.pipeline
        RUN_FIGURES, RunFigureInputs)

    drawn: list[Path] = []
    data_of: dict[str, Dataset] = {}
    for run in params.reported_runs():
        setup, model_name, _ = _run_parts(params, run)
        if setup not in data_of:
            data_of[setup] = load_setup_data(params, setup)
        data = data_of[setup]
        model, _ = load_model(params, setup, model_name, paths.train_dir(run, params.run(run).group) / "model.pt",
                              data.obs_shape)
        fp = params.figures
        out = paths.figures_dir(run)
        live = [paths.train_live_dir(run, params.run(run).group)]
        if params.setup(setup).pretraining:
            live.insert(0, paths.pretrain_live_dir(setup))
        inputs = RunFigureInputs(model, data.prepare(data.x("test")[: fp.n_reconstructions]), live, fp, run)
        drawn += [fig.draw(inputs, out / f"{fig.name}.png") for fig in RUN_FIGURES
                  if fig.applies(model, data.observation_kind)]
    return drawn


def run_report(params: Params) -> Path:
    """``report``: the results tables of every run but the diagnosis arms in ``reports/README.md``."""
    from priorlab.report import write_report  # lazy: pandas, ~222 ms at import priorlab.pipeline

    return write_report(params, [read_json(paths.evaluation_file(name, r.group)) for name, r in params.reported_runs().items()],
                        paths.REPORTS / "README.md")


# --------------------------------------------------------------------------- study cells


def study_cells(params: Params) -> list[Cell]:
    """Every study's cells at these params, as each study declares them (none for a study the profile
    switches off): what a scheduler spreading the pipeline over machines balances."""
    from priorlab.studies.isa_experiments.fit import (  # lazy: +4 modules, ~20 ms at import priorlab.pipeline
        cells as isa_cells)
    from priorlab.studies.mssc_experiments.fit import (  # lazy: +2 modules, ~8 ms at import priorlab.pipeline
        cells as mssc_cells)
    from priorlab.studies.sparse_vae_experiments.fit import (  # lazy: +2 modules, ~7 ms at import priorlab.pipeline
        cells as sparse_vae_cells)
    from priorlab.studies.sparse_vae_experiments.real import (  # lazy: +3 modules, ~13 ms at import priorlab.pipeline
        cells as sparse_vae_real_cells)

    return [*isa_cells(params), *sparse_vae_cells(params), *mssc_cells(params), *sparse_vae_real_cells(params)]
