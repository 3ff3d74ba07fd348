"""What a profile *runs*, read from its params and its built models, for the papers' fidelity tables
(``profiles/paper_settings.yaml``, ``tests/test_paper_settings.py``): a setting's name in the params is
not enough (issue 43).  A baseline that warm-starts from a pretraining trains for the pretraining's
steps too, and a net's size is what the built module holds, not what its option is called."""

from __future__ import annotations

from priorlab.config import Params
from priorlab.phases import new_model, pretrain_spec
from priorlab.priors.factorial_mixture import robbins_monro_step_size


def effective_steps(params: Params, run: str) -> dict[str, int]:
    """The optimiser steps that train ``run``'s nets: its setup's pretraining when the run starts from it
    (``warm_start: pretrain`` on a setup with ``pretraining``), then its own joint training."""
    entry = params.run(run)
    spec = params.model(entry.model)
    pretrain = 0
    if spec.warm_start == "pretrain" and params.setup(entry.setup).pretraining:
        pretrain = pretrain_spec(params, entry.setup).phase("pretrain", params.pretrain).steps
    train = spec.phase("train", params.train).steps
    return {"pretrain": pretrain, "train": train, "total": pretrain + train}


def parameter_counts(params: Params, setup: str, model: str, obs_shape: tuple[int, ...]) -> dict[str, int]:
    """Trainable parameters of ``model`` built on ``setup``'s nets for observations of ``obs_shape``: per
    top-level module (``encoder``, ``decoder``, a discriminator, ...) and in ``total``."""
    built = new_model(params.setup(setup), params.model(model), tuple(obs_shape), seed=0)
    counts = {name: sum(p.numel() for p in child.parameters() if p.requires_grad)
              for name, child in built.named_children()}
    counts = {name: n for name, n in counts.items() if n}
    counts["total"] = sum(p.numel() for p in built.parameters() if p.requires_grad)
    return counts


def svi_step_size(params: Params, model: str, step: int = 1) -> float:
    """rho of the ``step``-th SVI step of a factorial mixture model's prior, from its schedule
    rho_tau = (tau0 + tau)^-kappa (sec. 2.4.3; the function the prior's updates call).  Step 1 is the
    first of the prior initialisation (its SVI count starts there)."""
    spec = params.model(model)
    return robbins_monro_step_size(step, spec.tau0, spec.kappa)
