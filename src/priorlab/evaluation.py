"""Everything the ``evaluate`` stage measures for one trained model.

Model-side: test ELBO with its reconstruction and KL terms, the
importance-weighted bound L_k, the number of active latent dimensions
(Burda et al. 2016: Var_x E_q[z_d | x] > threshold).  Representation-side,
when the data set has ground-truth factors: the disentanglement metrics of
:mod:`priorlab.metrics` on the encoder mean, with disentanglement_lib's
sample sizes (smaller only in the ``tiny`` profile).
"""

from __future__ import annotations

import platform
from typing import Any

import numpy as np
import torch

from priorlab.config import EvaluateParams
from priorlab.data.base import GroundTruthData
from priorlab.data.store import Dataset
from priorlab.models.estimates import encode_means, evaluate_elbo


def representation_function(model, prepare, batch_size: int = 500, kind: str = "mean", seed: int = 0):
    """``represent(observations) -> codes`` (numpy in, numpy out): the posterior mean, or one
    posterior sample per observation (``kind="sample"``, seeded, reproducible call by call)."""
    generator = torch.Generator().manual_seed(seed)

    @torch.no_grad()
    def represent(observations: np.ndarray) -> np.ndarray:
        x = prepare(torch.as_tensor(np.asarray(observations)))
        if kind == "mean":
            return encode_means(model, x, batch_size)
        state = torch.get_rng_state()
        torch.manual_seed(int(torch.randint(2**31 - 1, (1,), generator=generator)))
        try:
            out = [model.posterior(x[s : s + batch_size]).sample().cpu() for s in range(0, len(x), batch_size)]
        finally:
            torch.set_rng_state(state)
        return torch.cat(out).double().numpy()

    return represent


def disentanglement_scores(
    data: GroundTruthData, represent, params: EvaluateParams, random_state: np.random.RandomState,
    wanted: list[str] | None = None,
) -> dict[str, Any]:
    """The metrics ``wanted`` (default ``params.metrics``) of :mod:`priorlab.metrics`, sample sizes from ``params``."""
    from priorlab import metrics

    wanted = set(params.metrics if wanted is None else wanted)
    out: dict[str, Any] = {}
    if not wanted:
        return out
    n_train, n_test = params.metric_num_train, params.metric_num_test
    f_train, x_train = data.sample(n_train, random_state)
    f_test, x_test = data.sample(n_test, random_state)
    c_train, c_test = represent(x_train), represent(x_test)
    if "mig" in wanted:
        out["mig"] = metrics.mig(c_train, f_train, n_bins=params.n_bins)
    if "dci" in wanted:
        dci = metrics.dci(c_train, f_train, c_test, f_test, random_state=random_state, backend=params.dci_backend,
                          n_jobs=params.n_jobs)
        out["dci"] = {k: v for k, v in dci.items() if k != "importance_matrix"}
    if "sap" in wanted:
        out["sap"] = metrics.sap(c_train, f_train, c_test, f_test)
    if "modularity" in wanted:
        out["modularity_explicitness"] = metrics.modularity_explicitness(
            c_train, f_train, c_test, f_test, n_bins=params.n_bins
        )
    if "beta_vae" in wanted:
        out["beta_vae_score"] = metrics.beta_vae_score(
            data, represent, random_state, batch_size=params.metric_batch_size, num_train=n_train, num_eval=n_test
        )
    if "factor_vae" in wanted:
        out["factor_vae_score"] = metrics.factor_vae_score(
            data, represent, random_state, batch_size=params.metric_batch_size, num_train=n_train,
            num_eval=n_test, num_variance_estimate=n_train,
        )
    return out


def evaluate_model(
    model, dataset: Dataset, data: GroundTruthData | None, params: EvaluateParams, profile: str,
    metric_names: list[str] | None = None,
) -> dict[str, Any]:
    """All metrics of one model (disentanglement: ``metric_names``, default ``params.metrics``), with
    the settings and library versions that produced them."""
    from priorlab import metrics

    metric_names = list(params.metrics if metric_names is None else metric_names)
    torch.manual_seed(params.seed)
    x_test = dataset.prepare(dataset.x("test")[: params.n_eval])
    model.eval()
    result: dict[str, Any] = {"test": evaluate_elbo(model, x_test, params.iw_samples, params.batch_size)}
    codes = encode_means(model, x_test, params.batch_size)
    result["active_dims"] = metrics.active_dims(codes, params.active_threshold)
    result["latent_dim"] = int(codes.shape[1])
    extras = getattr(model, "evaluation_extras", None)  # model-kind specific measurements (e.g. paper 001's)
    if extras is not None:
        result["model_extras"] = extras(dataset, x_test, params.batch_size)
    if data is not None and metric_names:
        rs = np.random.RandomState(params.seed)
        represent = representation_function(model, dataset.prepare, params.batch_size, params.representation,
                                            params.seed)
        result["disentanglement"] = disentanglement_scores(data, represent, params, rs, metric_names)
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
    if getattr(model, "evaluation_notes", None):  # model-specific caveats on what the numbers mean
        result["notes"] = model.evaluation_notes
    result["versions"] = {**metrics.versions(), "torch": torch.__version__, "python": platform.python_version()}
    return result
