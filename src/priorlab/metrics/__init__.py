"""Evaluation metrics, faithful to disentanglement_lib where it defines them.

Codes are ``[N, D]`` arrays (one row per data point), factors ``[N, K]``
integer label arrays; functions return Python floats or dicts.  Functions that
sample take an explicit ``random_state`` (seed or ``np.random.RandomState``).
"""

from __future__ import annotations

from .active_units import active_dims
from .beta_vae import beta_vae_score
from .clustering import cluster_accuracy
from .correlation import correlation_contrast, correlation_matrix, order_latents_by_source
from .dci import completeness, dci, dci_regression, disentanglement, importance_matrix
from .discretise import discretise, factor_entropy, mutual_information
from .factor_vae import factor_vae_score
from .mig import mig
from .modularity import modularity, modularity_explicitness
from .presence import presence_aware_dci, presence_aware_factors, presence_aware_mig
from .probe import probe_accuracy
from .ranking import ndcg_at_k, recall_at_k
from .sap import sap, sap_score_matrix
from .support import support_f1


def versions() -> dict:
    """Versions of the numerical libraries the metric values depend on."""
    import numpy
    import scipy
    import sklearn

    return {"numpy": numpy.__version__, "scipy": scipy.__version__, "scikit-learn": sklearn.__version__}


__all__ = [
    "active_dims", "beta_vae_score", "cluster_accuracy", "completeness", "correlation_contrast",
    "correlation_matrix", "dci", "dci_regression", "discretise", "disentanglement", "factor_entropy", "factor_vae_score",
    "importance_matrix", "mig", "modularity", "modularity_explicitness", "mutual_information",
    "ndcg_at_k", "order_latents_by_source", "presence_aware_dci", "presence_aware_factors", "presence_aware_mig",
    "probe_accuracy", "recall_at_k", "sap", "sap_score_matrix",
    "support_f1", "versions",
]
