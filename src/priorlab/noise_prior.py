"""The Inverse-Gamma prior on each feature's observation variance, σ_j² ~ IG(ν/2, νξ/2) (paper 003,
eq. 60 and App. C.2): the calibration of its scale ξ from the data and the closed-form MAP of σ_j²
given residuals.  Used by the ``gaussian_ig`` likelihood (:mod:`priorlab.likelihoods`) and the sparse
VAE (:mod:`priorlab.models.sparse_vae`)."""

from __future__ import annotations

import math

import numpy as np
import torch


def check_positive(name: str, value: float) -> float:
    """``value`` as a float, or ``ValueError`` naming ``name`` unless it is positive and finite."""
    value = float(value)
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a positive finite number, got {value}")
    return value


def calibrate_inverse_gamma_scale(x, nu: float = 3.0, sample_quantile: float = 0.05,
                                  prior_quantile: float = 0.9, min_variance: float = 1e-6,
                                  released_code: bool = False) -> float:
    """ξ of σ_j² ~ IG(ν/2, νξ/2) (eq. 60) such that the ``sample_quantile`` of the per-feature
    sample variances (ddof = 1) equals the ``prior_quantile`` of the prior (App. C.2).
    ``released_code``: as ``data/dataset.py`` of the authors' code, the quantile of the per-feature
    standard deviations (ddof = 0), squared (a quantile interpolated between stds, not variances).

    IG(α, βξ) quantiles are linear in the scale, so ξ = 2 v_q / (ν · invgamma.ppf(prior_quantile, ν/2)).
    Equivalently (the authors' form) ξ = v_q · χ²_ν.ppf(1 − prior_quantile) / ν. A quantile v_q below
    ``min_variance`` (constant features) is raised to it (the authors use std 1e-3, i.e. 1e-6).
    ``x``: [N, G] array or tensor (features flattened from dim 1).
    """
    from scipy.stats import invgamma

    nu = check_positive("nu", nu)
    for name, q in (("sample_quantile", sample_quantile), ("prior_quantile", prior_quantile)):
        if not 0.0 < q < 1.0:
            raise ValueError(f"{name} must lie in (0, 1), got {q}")
    arr = x.detach().cpu().double().numpy() if isinstance(x, torch.Tensor) else np.asarray(x, dtype=np.float64)
    if arr.ndim < 2 or arr.shape[0] < 2:
        raise ValueError(f"x must be [N >= 2, features...], got shape {arr.shape}")
    arr = arr.reshape(arr.shape[0], -1)
    if not np.all(np.isfinite(arr)):
        raise ValueError("x must be finite to calibrate the noise prior")
    if released_code:
        v_q = max(float(np.quantile(arr.std(axis=0, ddof=0), sample_quantile)) ** 2, float(min_variance))
    else:
        v_q = max(float(np.quantile(arr.var(axis=0, ddof=1), sample_quantile)), float(min_variance))
    return 2.0 * v_q / (nu * float(invgamma.ppf(prior_quantile, nu / 2.0)))


def inverse_gamma_map_variance(residuals: torch.Tensor, nu: float, xi: float, dim: int = 0) -> torch.Tensor:
    """Closed-form MAP of σ² given Gaussian residuals r_1..r_n (over ``dim``) and σ² ~ IG(ν/2, νξ/2).

    The posterior is IG(ν/2 + n/2, νξ/2 + Σr²/2); its mode b/(a+1) is
    σ²_MAP = (νξ + Σ_i r_i²) / (ν + n + 2).
    (The same point minimises the authors' penalty (n + ν + 2) log σ + (νξ + Σr²) / (2σ²).)
    """
    nu, xi = check_positive("nu", nu), check_positive("xi", xi)
    n = residuals.shape[dim]
    return (nu * xi + residuals.pow(2).sum(dim)) / (nu + n + 2)
