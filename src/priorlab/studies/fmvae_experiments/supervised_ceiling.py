"""The supervised ceiling of a semi-supervised factor (issue 10; paper 001 sec. 4.2), the
``supervised_ceiling`` stage.

Paper 001 clamps factor 0 of the factorial mixture prior to a labelled attribute on a fraction of
the training points (eq. 8) and the ``fmvae_experiments`` stage measures the held-out accuracy of
its cluster assignment.  Whether that accuracy is good depends on how separable the attribute is at
the data's resolution, so it is judged against a ceiling: the setup's own encoder (same layers,
its last linear layer emitting class logits: a linear softmax head) trained with cross-entropy on
*all* training labels until the held-out accuracy stops improving (:func:`should_stop`).
dSprites setups are also measured at other procedural resolutions (the same factor rows rendered
by :func:`priorlab.data.dsprites.render_dsprites`).

Stopping rule (issue 26): every ``eval_every`` steps the accuracy on ``n_val`` validation points
(training points held out by a seeded permutation; the classifier trains on the other labels) is
recorded; the run stops at the plateau — after at least ``min_steps`` steps, the last
``plateau_fraction`` of the evaluations bring no gain over the best before them — or at
``max_steps``, in which case the ceiling did not plateau and claims against it are untestable.  The reported ceiling is the accuracy on the first ``n_eval`` test points of the
weights with the best validation accuracy: the points the semi-supervised runs are scored on.  At the
native resolution ``replicates`` classifiers (seeds ``seed + k``) measure the ceiling: its value is
their mean, it plateaued when every replicate did, and each keeps which test points it got right
(:func:`priorlab.io.pack_flags`), so that the relative claim pairs them with the semi-supervised
runs' points (:func:`priorlab.studies.intervals.paired_ratio`).

Each classifier (:class:`~priorlab.models.classifier.Classifier`) trains through the shared trainer
(:func:`priorlab.train.fit`): the stopping rule is its :class:`~priorlab.train.Monitor`
(:class:`ValidationPlateau`), its checkpoint (every evaluation, under ``.checkpoints/``) resumes a
killed stage exactly, and its batches are drawn uniformly with replacement, as by the loop it replaced
(the same numbers, bit for bit).
"""

from __future__ import annotations

import copy
import dataclasses
import shutil
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn

from priorlab import paths
from priorlab.config import OptimParams, ParamsError
from priorlab.config.slices import check_slice, entries
from priorlab.io import pack_flags, write_json, write_json_folder
from priorlab.models.classifier import Classifier
from priorlab.models.protocol import TrainingSet
from priorlab.train import Monitor, fit

if TYPE_CHECKING:
    from priorlab.config import Params, SupervisedCeilingParams

NAME = "supervised_ceiling"
MODELS = paths.MODELS / NAME  # the classifiers and the record (DVC cache)
OUT_FILE = MODELS / "ceilings.json"  # the record: every entry with its validation history
METRICS_DIR = paths.METRICS / "fmvae_experiments" / NAME  # headline numbers, a file per classifier (git)
RELATIVE_GOAL = 0.95  # issue 10: semi-supervised accuracy >= 95 % of the supervised ceiling


def should_stop(history: list[float], fraction: float, min_evals: int) -> bool:
    """The plateau rule: after at least ``min_evals`` evaluations, no validation gain over the last
    ``fraction`` of them (their best ≤ the best before them)."""
    if len(history) < max(min_evals, 2):
        return False
    tail = max(1, int(np.ceil(fraction * len(history))))
    return max(history[-tail:]) <= max(history[:-tail])


class ValidationPlateau(Monitor):
    """The stopping rule of the ceiling as the trainer's :class:`~priorlab.train.Monitor`: every
    ``eval_every`` steps (and at the last) the accuracy on the validation rows; the weights of the best
    one kept; stop when :func:`should_stop` says so."""

    def __init__(self, val: tuple[torch.Tensor, torch.Tensor], prepare, cfg: SupervisedCeilingParams):
        self.val, self.prepare = val, prepare
        self.every, self.fraction = cfg.eval_every, cfg.plateau_fraction
        self.min_evals = -(-cfg.min_steps // cfg.eval_every)
        self.history: list[float] = []
        self.best, self.best_step, self.best_state, self.stopped = -1.0, 0, None, False

    def observe(self, model: Classifier, step: int) -> bool:
        self.history.append(float(model.correct(*self.val, self.prepare).double().mean()))
        if self.history[-1] > self.best:
            self.best, self.best_step, self.best_state = self.history[-1], step, copy.deepcopy(model.net.state_dict())
        self.stopped = should_stop(self.history, self.fraction, self.min_evals)
        return self.stopped

    def state_dict(self) -> dict:
        return {"history": list(self.history), "best": self.best, "best_step": self.best_step,
                "best_state": self.best_state, "stopped": self.stopped}

    def load_state_dict(self, state: dict) -> None:
        self.history, self.best, self.best_step = list(state["history"]), state["best"], state["best_step"]
        self.best_state, self.stopped = state["best_state"], state["stopped"]


def train_classifier(net: nn.Module, prepare, train: tuple[torch.Tensor, torch.Tensor],
                     val: tuple[torch.Tensor, torch.Tensor], test: tuple[torch.Tensor, torch.Tensor],
                     cfg: SupervisedCeilingParams, seed: int, checkpoint: Path | None = None,
                     fingerprint: str = "") -> dict[str, Any]:
    """Cross-entropy training of ``net`` (logits) by the shared trainer (:func:`priorlab.train.fit`:
    Adam, mini-batches drawn uniformly with replacement from ``seed``) until :class:`ValidationPlateau`
    stops it or ``cfg.max_steps``; test accuracy of the best-validation weights, which ``net`` is left
    with.  ``checkpoint`` (with the run's ``fingerprint``): resumable state every ``cfg.eval_every``
    steps (default: none kept past the call)."""
    model = Classifier(net)
    monitor = ValidationPlateau(val, prepare, cfg)
    opt = OptimParams(steps=cfg.max_steps, batch_size=cfg.batch_size, lr=cfg.lr, seed=seed,
                      log_every=cfg.eval_every, checkpoint_every=cfg.eval_every if checkpoint else 10**9)
    with tempfile.TemporaryDirectory() as scratch:
        result = fit(model, TrainingSet(train[0], prepare, train[1]), opt,
                     checkpoint=checkpoint or Path(scratch) / "classifier.pt", live_dir=None,
                     fingerprint=fingerprint or "classifier", progress=False, monitor=monitor, replacement=True)
    net.load_state_dict(monitor.best_state)
    hits = model.correct(*test, prepare).numpy()
    model.train()
    return {"accuracy": float(hits.mean()), "val_accuracy": monitor.best, "best_step": monitor.best_step,
            "steps": result.steps, "stopped": "plateau" if monitor.stopped else "max_steps",
            "val_history": [round(a, 4) for a in monitor.history], "correct": pack_flags(hits)}


def ceiling_of(params: Params, setup_name: str, factor: str, resolution: int | None = None, replicate: int = 0
               ) -> tuple[dict[str, Any], nn.Module]:
    """The ceiling of ``factor`` on ``setup_name``'s data (``resolution``: dSprites re-rendered) by the
    classifier of seed ``supervised_ceiling.seed + replicate``, and that classifier (its best-validation
    weights)."""
    from priorlab.data.dsprites import (
        render_dsprites)  # lazy: +3 modules, ~30 ms at import priorlab.studies.fmvae_experiments.supervised_ceiling
    from priorlab.models.fmvae import data_factor_labels  # lazy: torch._dynamo + sympy, ~1.4 s at import
    from priorlab.nets import (
        build_encoder)  # lazy: +5 modules, ~17 ms at import priorlab.studies.fmvae_experiments.supervised_ceiling
    from priorlab.phases import (
        fingerprint, load_setup_data)  # lazy: +26 modules, ~52 ms at import priorlab.studies.fmvae_experiments.supervised_ceiling

    cfg, setup = params.supervised_ceiling, params.setup(setup_name)
    data = load_setup_data(params, setup_name)
    xs = {s: data.x(s) for s in ("train", "test")}
    if resolution is not None:
        xs = {s: torch.from_numpy(render_dsprites(data.factors(s), resolution)[:, None]) for s in xs}
    ys = {s: torch.as_tensor(data_factor_labels(data, factor, s)) for s in xs}
    n_eval = params.evaluate.n_eval
    if cfg.n_val >= len(ys["train"]):
        raise ParamsError(f"supervised_ceiling.n_val {cfg.n_val} leaves no training points of setup {setup_name!r} "
                          f"({len(ys['train'])})")
    seed = cfg.seed + replicate
    perm = torch.from_numpy(np.random.RandomState(seed).permutation(len(ys["train"])))
    fit, held = perm[cfg.n_val :], perm[: cfg.n_val]
    torch.manual_seed(seed)  # weight initialisation
    n_classes = int(max(ys["train"].max(), ys["test"].max())) + 1
    net = build_encoder(setup.encoder, tuple(xs["train"].shape[1:]), n_classes, setup.hidden, setup.channels)
    name = f"{setup_name}-{factor}-{int(xs['train'].shape[-1])}-r{replicate}"
    out = train_classifier(net, data.prepare, (xs["train"][fit], ys["train"][fit]),
                           (xs["train"][held], ys["train"][held]), (xs["test"][:n_eval], ys["test"][:n_eval]), cfg, seed,
                           checkpoint=paths.checkpoint_file(NAME, name),
                           fingerprint=fingerprint(NAME, cfg, setup.record(), factor, resolution, n_eval, seed))
    return {"setup": setup_name, "factor": factor, "resolution": int(xs["train"].shape[-1]), "classes": n_classes,
            "n_train": len(fit), "n_val": cfg.n_val, "n_test": n_eval, "encoder": setup.encoder, "seed": seed,
            **out}, net


def pooled(replicates: list[dict[str, Any]]) -> dict[str, Any]:
    """One ceiling from its replicate classifiers: their mean test accuracy, plateaued only when every
    replicate did (else ``stopped`` is ``max_steps``), each replicate's record under ``replicates``."""
    first = replicates[0]
    keep = ("setup", "factor", "resolution", "classes", "n_train", "n_val", "n_test", "encoder")
    return {**{k: first[k] for k in keep}, "accuracy": float(np.mean([r["accuracy"] for r in replicates])),
            "stopped": "plateau" if all(r["stopped"] == "plateau" for r in replicates) else "max_steps",
            "replicates": [{k: v for k, v in r.items() if k not in keep} for r in replicates]}


def relative_verdict(acc: float | None, ceiling: float | None, goal: float = RELATIVE_GOAL) -> dict[str, Any]:
    """The issue-10 criterion: ``acc`` as a share of the ``ceiling``; reached when share ≥ ``goal``."""
    if acc is None or ceiling is None:
        return {"share": None, "relative_goal": goal, "relative_reached": None}
    if not ceiling > 0:
        raise ValueError(f"a supervised ceiling must be > 0, got {ceiling}")
    share = acc / ceiling
    return {"share": share, "relative_goal": goal, "relative_reached": bool(share >= goal)}


def param_slice(params: Params) -> dict:
    """What ``supervised_ceiling`` reads of ``setups`` and ``datasets``: its targets' setups (nets) and
    their data sets."""
    targets = list(params.supervised_ceiling.targets)
    return {"setups": entries(params.setups, targets),
            "datasets": entries(params.datasets, [params.setup(t).dataset for t in targets])}


def run_supervised_ceiling(params: Params) -> dict[str, Any]:
    """``supervised_ceiling``: every ``targets`` entry at its data's resolution (and dSprites at the
    extra ``resolutions``) into ``models/supervised_ceiling/ceilings.json`` and each classifier into
    ``models/supervised_ceiling/<setup>-<factor>-<resolution>.pt`` (DVC cache); the headline numbers into
    ``metrics/fmvae_experiments/supervised_ceiling/<setup>-<factor>-<resolution>.json`` (:func:`headline`)."""
    from priorlab.phases import (
        save_model)  # lazy: +26 modules, ~52 ms at import priorlab.studies.fmvae_experiments.supervised_ceiling

    cfg = params.supervised_ceiling
    check_slice(NAME, param_slice(params))
    shutil.rmtree(MODELS, ignore_errors=True)  # only this run's classifiers
    out: dict[str, Any] = {"rule": f"stop at the plateau: after ≥ {cfg.min_steps} steps, no validation gain over the "
                                   f"last {cfg.plateau_fraction:.0%} of the evaluations (every {cfg.eval_every} "
                                   f"steps); at most {cfg.max_steps} steps (then not plateaued)",
                           "targets": {}}
    for setup, factor in cfg.targets.items():
        data = params.dataset_of(setup)
        extra = [r for r in cfg.resolutions if r != data.resolution] if data.kind == "dsprites" else []
        entries = {}
        for res in [None, *extra]:
            reps = []
            for k in range(cfg.replicates if res is None else 1):
                t0 = time.perf_counter()  # wall time goes to the log, not the output (byte-identical reruns)
                r, net = ceiling_of(params, setup, factor, res, k)
                save_model(MODELS / f"{setup}-{factor}-{r['resolution']}{f'-r{k}' if k else ''}.pt", net,
                           {"setup": setup, "factor": factor, "resolution": r["resolution"], "classes": r["classes"],
                            "seed": r["seed"]})
                print(f"{setup}:{factor} at {r['resolution']} px, seed {r['seed']}: accuracy {r['accuracy']:.3f} "
                      f"({time.perf_counter() - t0:.0f} s)", flush=True)
                reps.append(r)
            entries[str(reps[0]["resolution"])] = pooled(reps)
        out["targets"][f"{setup}:{factor}"] = {"native": str(next(iter(entries.values()))["resolution"]),
                                               "resolutions": entries}
    write_json(OUT_FILE, out)
    write_json_folder(METRICS_DIR, headline(out))
    return out


def headline(ceilings: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """A :func:`run_supervised_ceiling` result's ``dvc metrics`` files: per ceiling
    (``<setup>-<factor>-<resolution>``) its test accuracy (the replicates' mean) and their lowest and
    highest, the most steps one took, and whether every replicate stopped at the plateau (1) or not (0);
    each replicate's record is in ``ceilings.json``."""
    out = {}
    for target, entry in ceilings["targets"].items():
        for res, r in entry["resolutions"].items():
            accs = [x["accuracy"] for x in r["replicates"]]
            out[f"{target.replace(':', '-')}-{res}"] = {
                "accuracy": r["accuracy"], "accuracy_min": min(accs), "accuracy_max": max(accs),
                "steps_max": max(x["steps"] for x in r["replicates"]), "plateau": int(r["stopped"] == "plateau")}
    return out


def ceiling_for(ceilings: dict[str, Any], setup: str, factor: str) -> dict[str, Any] | None:
    """The entry of ``setup``/``factor`` in a :func:`run_supervised_ceiling` result (None if absent)."""
    return ceilings.get("targets", {}).get(f"{setup}:{factor}")


def ceiling_setup(params: Params, setup: str) -> str:
    """The ``supervised_ceiling.targets`` setup that measures ``setup``'s ceiling: itself, or the target
    it is a pretraining replicate of (equal but for ``seed``: the same data and encoder, and the
    ceiling trains from scratch, so a replicate's ceiling is its original's)."""
    targets = params.supervised_ceiling.targets
    if setup in targets:
        return setup
    own = params.setup(setup)
    return next((t for t in targets if t in params.setups and dataclasses.replace(params.setup(t), seed=own.seed) == own),
                setup)


__all__ = ["RELATIVE_GOAL", "accuracy", "ceiling_for", "ceiling_of", "correct", "pooled", "ceiling_setup", "relative_verdict", "run_supervised_ceiling",
           "should_stop", "train_classifier"]
