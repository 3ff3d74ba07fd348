"""Everything the ``evaluate`` stage measures for one trained model.

Model-side: test ELBO with its reconstruction and KL terms, the
importance-weighted bound L_k, the number of active latent dimensions
(Burda et al. 2016: Var_x E_q[z_d | x] > threshold).  Representation-side,
when the data set has ground-truth factors: the disentanglement metrics of
:mod:`priorlab.metrics` on the encoder mean, with disentanglement_lib's
sample sizes (smaller only in the ``tiny`` profile).

Device: the model-side work (the ELBO terms, L_k, the encodings the metrics score, the model's
extras) runs where the model is — :func:`evaluate_model` moves it to ``device`` when given (the
``device`` of the params: CUDA when there is one) and the test rows with it; the codes come back
as numpy arrays and the metric algorithms stay numpy / scikit-learn.  On the CPU nothing moves.
"""

from __future__ import annotations

import dataclasses
import platform
import zlib
from typing import Any

import numpy as np
import torch

from priorlab.config import EvaluateParams
from priorlab.data.base import GroundTruthData
from priorlab.data.store import Dataset
from priorlab.device import model_device
from priorlab.metric_registry import METRICS, SampledFactors
from priorlab.models.estimates import encode_means, evaluate_elbo
from priorlab.models.protocol import ElboModel, Model


def representation_function(model, prepare, batch_size: int = 500, kind: str = "mean", seed: int = 0):
    """``represent(observations) -> codes`` (numpy in, numpy out): the posterior mean, or one
    posterior sample per observation (``kind="sample"``, seeded, reproducible call by call).  The
    observations are encoded where the model is; the global random state of the CPU (and of the
    model's CUDA device) is left as it was."""
    generator = torch.Generator().manual_seed(seed)

    @torch.no_grad()
    def represent(observations: np.ndarray) -> np.ndarray:
        x = prepare(torch.as_tensor(np.asarray(observations)))
        if kind == "mean":
            return encode_means(model, x, batch_size)
        if not isinstance(model, ElboModel):
            raise ValueError(f"evaluate.representation: sample needs a model with a posterior, not {type(model).__name__}")
        device = model_device(model)
        state = torch.get_rng_state()
        cuda_state = torch.cuda.get_rng_state(device) if device.type == "cuda" else None
        torch.manual_seed(int(torch.randint(2**31 - 1, (1,), generator=generator)))
        try:
            out = [model.posterior(x[s : s + batch_size].to(device)).sample().cpu() for s in range(0, len(x), batch_size)]
        finally:
            torch.set_rng_state(state)
            if cuda_state is not None:
                torch.cuda.set_rng_state(cuda_state, device)
        return torch.cat(out).double().numpy()

    return represent


def posterior_function(model, prepare, batch_size: int = 500):
    """``posterior(observations) -> (means, log-variances)`` of a model whose q(z|x) is a factorised
    Gaussian (``Normal``, or ``Independent`` over one), numpy in and out; None for other posteriors."""
    from torch.distributions import Independent, Normal

    if not isinstance(model, ElboModel):
        return None

    @torch.no_grad()
    def posterior(observations: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        x = prepare(torch.as_tensor(np.asarray(observations)))
        device = model_device(model)
        mus, logvars = [], []
        for s in range(0, len(x), batch_size):
            q = model.posterior(x[s : s + batch_size].to(device))
            base = q.base_dist if isinstance(q, Independent) else q
            if not isinstance(base, Normal):
                raise ValueError(f"mig_chen needs a Gaussian posterior; {type(model).__name__}'s is "
                                 f"{type(base).__name__}")
            mus.append(base.loc.cpu().double())
            logvars.append(2 * base.scale.cpu().double().log())
        return torch.cat(mus).numpy(), torch.cat(logvars).numpy()

    return posterior


def disentanglement_scores(
    data: GroundTruthData, represent, params: EvaluateParams, random_state: np.random.RandomState,
    wanted: list[str] | None = None, posterior=None,
) -> dict[str, Any]:
    """The metrics ``wanted`` (default ``params.metrics``) of :data:`~priorlab.metric_registry.METRICS`
    that need ground-truth factors (and, ``posterior`` given, the posterior), in registry order, on
    points sampled once from ``data``.  Each metric draws what else it samples from its own random
    state (:func:`metric_random_state`), so its value does not depend on which other metrics ran."""
    wanted = set(params.metrics if wanted is None else wanted)
    chosen = [m for m in METRICS.values() if m.name in wanted and m.needs <= {"ground_truth", "posterior"}]
    out: dict[str, Any] = {}
    if not chosen:
        return out
    f_train, x_train = data.sample(params.metric_num_train, random_state)
    f_test, x_test = data.sample(params.metric_num_test, random_state)
    sampled = SampledFactors(data, represent, params, random_state, f_train, represent(x_train), f_test,
                             represent(x_test), x_train, posterior)
    base = int(random_state.randint(2**31 - 1))
    for metric in chosen:
        own = dataclasses.replace(sampled, random_state=metric_random_state(base, metric.name))
        out.update(metric.compute(own))
    return out


def metric_random_state(base: int, name: str) -> np.random.RandomState:
    """The random state of metric ``name`` in an evaluation seeded with ``base``: a function of the two
    alone (not of the other metrics computed, nor of their order)."""
    return np.random.RandomState([base, zlib.crc32(name.encode())])


def evaluate_model(
    model: Model, dataset: Dataset, data: GroundTruthData | None, params: EvaluateParams, profile: str,
    metric_names: list[str] | None = None, device: torch.device | str | None = None,
) -> dict[str, Any]:
    """All metrics of one model (disentanglement: ``metric_names``, default ``params.metrics``), with
    the settings and library versions that produced them.  The ELBO terms and the importance-weighted
    bound are measured for models with that capability (:class:`~priorlab.models.protocol.ElboModel`).

    ``device``: where the model-side work runs (the model is moved there and stays); default: where
    the model is.  The test rows are prepared on the CPU, then moved there once."""
    from priorlab import metrics  # lazy: sklearn + scipy + pandas, ~1.5 s at import priorlab.evaluation

    metric_names = list(params.metrics if metric_names is None else metric_names)
    if device is not None:
        model.to(device)
    device = model_device(model)
    torch.manual_seed(params.seed)
    x_test = dataset.prepare(dataset.x("test")[: params.n_eval]).to(device)
    model.eval()
    result: dict[str, Any] = {}
    if isinstance(model, ElboModel):
        result["test"] = evaluate_elbo(model, x_test, params.iw_samples, params.batch_size)
    codes = encode_means(model, x_test, params.batch_size)
    result["active_dims"] = metrics.active_dims(codes, params.active_threshold)
    result["latent_dim"] = int(codes.shape[1])
    extras = model.evaluation_extras(dataset, x_test, params.batch_size)  # model-kind specific (e.g. paper 001's)
    if extras:
        result["model_extras"] = extras
    if data is not None and metric_names:
        rs = np.random.RandomState(params.seed)
        represent = representation_function(model, dataset.prepare, params.batch_size, params.representation,
                                            params.seed)
        posterior = posterior_function(model, dataset.prepare, params.batch_size) \
            if any("posterior" in METRICS[m].needs for m in metric_names) else None
        result["disentanglement"] = disentanglement_scores(data, represent, params, rs, metric_names, posterior)
    result["settings"] = {
        "profile": profile,
        "n_eval": int(len(x_test)),
        "iw_samples": params.iw_samples,
        "active_threshold": params.active_threshold,
        "metric_num_train": params.metric_num_train,
        "metric_num_test": params.metric_num_test,
        "dci_backend": params.dci_backend,
        "n_bins": params.n_bins,
        "metrics": metric_names,
        "representation": params.representation,
        "seed": params.seed,
    }
    if device.type != "cpu":  # where the model-side numbers were computed (CPU files stay as they were)
        result["settings"]["device"] = torch.cuda.get_device_name(device) if device.type == "cuda" else str(device)
    if model.evaluation_notes:  # model-specific caveats on what the numbers mean
        result["notes"] = model.evaluation_notes
    result["versions"] = {**metrics.versions(), "torch": torch.__version__, "python": platform.python_version()}
    return result
