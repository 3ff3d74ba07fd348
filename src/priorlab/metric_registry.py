"""The registry of evaluation metrics: one entry per metric, used by config validation, the
evaluate stage and the report.

An entry names the metric (the value listed in ``evaluate.metrics``), what it needs from the
run (``ground_truth``: a data set with a ``GroundTruthData`` sampler; ``labels``: class labels;
``elbo``: a model with ELBO terms), the function that computes it and the report columns it
fills (:class:`Column`: a dotted key of the run's evaluation record, its short name in the run's
``dvc metrics`` file, a report title).  Adding a metric is one entry here.

This module is light (no numpy, torch or scikit-learn at import): the functions import
:mod:`priorlab.metrics` when they run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, NamedTuple, Protocol

if TYPE_CHECKING:
    import numpy as np

    from priorlab.data.base import GroundTruthData


class MetricSettings(Protocol):
    """The evaluation settings the metric functions read (``config.EvaluateParams`` has them; named here
    so that this registry, which the config validates metric names against, imports nothing of the config)."""

    n_bins: int
    dci_backend: str
    n_jobs: int
    metric_batch_size: int
    metric_num_train: int
    metric_num_test: int


@dataclass(frozen=True)
class SampledFactors:
    """What the ground-truth metrics share: a GroundTruthData sampler, the representation
    function, the settings, one random state, and the points sampled once from it (in the
    reference library's order: train factors and observations, then test)."""

    data: GroundTruthData
    represent: Callable[[np.ndarray], np.ndarray]
    params: MetricSettings
    random_state: np.random.RandomState
    factors_train: np.ndarray
    codes_train: np.ndarray
    factors_test: np.ndarray
    codes_test: np.ndarray
    # metrics that need the posterior (``needs`` "posterior"): the training observations and a function
    # observations -> (means, log-variances) of a factorised Gaussian posterior; None for other models
    observations_train: np.ndarray | None = None
    posterior: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]] | None = None


class Column(NamedTuple):
    """A headline number: its dotted key in the evaluation record, its name in the run's metrics file
    (short, so ``dvc metrics show metrics/<group>`` fits a screen) and its report column title."""

    key: str
    name: str
    title: str


@dataclass(frozen=True)
class Metric:
    name: str
    needs: frozenset[str]
    compute: Callable[[SampledFactors], dict[str, Any]]
    columns: tuple[Column, ...]


def _mig(s: SampledFactors) -> dict[str, Any]:
    from priorlab import metrics  # lazy: sklearn + scipy + pandas, ~1.5 s at import priorlab.metric_registry

    return {"mig": metrics.mig(s.codes_train, s.factors_train, n_bins=s.params.n_bins)}


def _dci(s: SampledFactors) -> dict[str, Any]:
    from priorlab import metrics  # lazy: sklearn + scipy + pandas, ~1.5 s at import priorlab.metric_registry

    out = metrics.dci(s.codes_train, s.factors_train, s.codes_test, s.factors_test, random_state=s.random_state,
                      backend=s.params.dci_backend, n_jobs=s.params.n_jobs)
    return {"dci": {k: v for k, v in out.items() if k != "importance_matrix"}}


def _sap(s: SampledFactors) -> dict[str, Any]:
    from priorlab import metrics  # lazy: sklearn + scipy + pandas, ~1.5 s at import priorlab.metric_registry

    return {"sap": metrics.sap(s.codes_train, s.factors_train, s.codes_test, s.factors_test)}


def _modularity(s: SampledFactors) -> dict[str, Any]:
    from priorlab import metrics  # lazy: sklearn + scipy + pandas, ~1.5 s at import priorlab.metric_registry

    return {"modularity_explicitness": metrics.modularity_explicitness(
        s.codes_train, s.factors_train, s.codes_test, s.factors_test, n_bins=s.params.n_bins)}


def _beta_vae(s: SampledFactors) -> dict[str, Any]:
    from priorlab import metrics  # lazy: sklearn + scipy + pandas, ~1.5 s at import priorlab.metric_registry

    p = s.params
    return {"beta_vae_score": metrics.beta_vae_score(
        s.data, s.represent, s.random_state, batch_size=p.metric_batch_size, num_train=p.metric_num_train,
        num_eval=p.metric_num_test)}


def _factor_vae(s: SampledFactors) -> dict[str, Any]:
    from priorlab import metrics  # lazy: sklearn + scipy + pandas, ~1.5 s at import priorlab.metric_registry

    p = s.params
    return {"factor_vae_score": metrics.factor_vae_score(
        s.data, s.represent, s.random_state, batch_size=p.metric_batch_size, num_train=p.metric_num_train,
        num_eval=p.metric_num_test, num_variance_estimate=p.metric_num_train)}


def _mig_no_shape(s: SampledFactors) -> dict[str, Any]:
    """MIG averaged over every factor but ``shape`` (paper 004, as its authors report dSprites MIG)."""
    from priorlab import metrics  # lazy: sklearn + scipy + pandas, ~1.5 s at import priorlab.metric_registry

    names = list(s.data.factor_names)
    if "shape" not in names:
        raise ValueError(f"mig_no_shape needs a factor named 'shape'; this data set has {names}")
    keep = [i for i, n in enumerate(names) if n != "shape"]
    return {"mig_no_shape": metrics.mig(s.codes_train, s.factors_train[:, keep], n_bins=s.params.n_bins)}


def _mig_chen(s: SampledFactors) -> dict[str, Any]:
    """Chen et al.'s MIG (paper 004's metric, :mod:`priorlab.metrics.mig_chen`) on the
    ``metric_num_train`` sampled points, over all factors and without ``shape`` when there is one."""
    from priorlab.metrics.mig_chen import (
        gaps, mutual_information)  # lazy: torch + sklearn + scipy + pandas, ~4.2 s at import priorlab.metric_registry

    if s.posterior is None:
        raise ValueError("mig_chen needs a model with a factorised Gaussian posterior")
    mu, logvar = s.posterior(s.observations_train)
    out = mutual_information(mu, logvar, s.factors_train, n_samples=len(mu), random_state=s.random_state)
    result = {"mig": gaps(out)["mig"], "mi": out["mi"].tolist()}
    names = list(s.data.factor_names)
    if "shape" in names and len(names) > 1:
        result["mig_no_shape"] = gaps(out, exclude=(names.index("shape"),))["mig"]
    return {"mig_chen": result}


_GT = frozenset({"ground_truth"})
_GT_POSTERIOR = frozenset({"ground_truth", "posterior"})

METRICS: dict[str, Metric] = {
    m.name: m
    for m in (
        Metric("mig", _GT, _mig, (Column("disentanglement.mig", "mig", "MIG"),)),
        Metric("dci", _GT, _dci, (Column("disentanglement.dci.disentanglement", "dci_d", "DCI D"),
                                  Column("disentanglement.dci.completeness", "dci_c", "DCI C"),
                                  Column("disentanglement.dci.informativeness_test", "dci_i", "DCI I"))),
        Metric("sap", _GT, _sap, (Column("disentanglement.sap", "sap", "SAP"),)),
        Metric("modularity", _GT, _modularity,
               (Column("disentanglement.modularity_explicitness.modularity", "modularity", "modularity"),)),
        Metric("beta_vae", _GT, _beta_vae,
               (Column("disentanglement.beta_vae_score.eval_accuracy", "beta_vae", "β-VAE score"),)),
        Metric("factor_vae", _GT, _factor_vae,
               (Column("disentanglement.factor_vae_score.eval_accuracy", "factor_vae", "FactorVAE score"),)),
        Metric("mig_no_shape", _GT, _mig_no_shape,
               (Column("disentanglement.mig_no_shape", "mig_no_shape", "MIG w/o shape"),)),
        Metric("mig_chen", _GT_POSTERIOR, _mig_chen,
               (Column("disentanglement.mig_chen.mig", "mig_chen", "MIG (Chen)"),
                Column("disentanglement.mig_chen.mig_no_shape", "mig_chen_no_shape", "MIG w/o shape (Chen)"))),
    )
}
"""The selectable metrics (``evaluate.metrics``), computed in this order (it fixes the random
draws: the same selection always gives the same numbers)."""

DEFAULT_METRICS: tuple[str, ...] = ("mig", "dci", "sap", "modularity", "beta_vae", "factor_vae")
"""``evaluate.metrics`` when not set: the reference library's scores (any data set with factors)."""

MODEL_COLUMNS: tuple[Column, ...] = (
    Column("test.elbo", "elbo", "test ELBO"),
    Column("test.log_lik", "log_lik", "E log p(x|z)"),
    Column("test.kl", "kl", "KL"),
    Column("test.iw_log_likelihood", "iw_ll", "log p(x) (IW)"),
    Column("active_dims", "active_dims", "active dims"),
)
"""Headline numbers of what evaluate always measures (the ELBO terms for models that have them)."""


def columns() -> tuple[Column, ...]:
    """Every headline number, model-side first, then every metric's (in registry order)."""
    return MODEL_COLUMNS + tuple(c for m in METRICS.values() for c in m.columns)


def report_columns() -> dict[str, str]:
    """Dotted evaluation-record key → report column title."""
    return {c.key: c.title for c in columns()}


def lookup(record: dict[str, Any], dotted: str) -> Any:
    """The value at a dotted key of a nested record (``"test.elbo"``), None where a part is missing."""
    value: Any = record
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def headline(record: dict[str, Any]) -> dict[str, float]:
    """A run's ``dvc metrics`` file: the headline numbers its evaluation record holds, by short name
    (the record itself, with settings and every sub-score, is the evaluate stage's cached output)."""
    return {c.name: value for c in columns() if (value := lookup(record, c.key)) is not None}
