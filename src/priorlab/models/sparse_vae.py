"""Building blocks of the sparse VAE (paper 003: Moran, Sridhar, Wang & Blei, TMLR 2022).

* :class:`MaskedDecoder` — eq. 1: feature j of observation i is the j-th head of a shared
  network applied to the masked code ``w_j ⊙ z_i``. Batched: one trunk pass over all B·G masked
  codes and one einsum with the stacked per-feature heads ([G, H, P]); no loop over features.
* :class:`SpikeSlabLasso` — the SSL prior on the mask W (eqs. 2–4) with the updates of
  Algorithm 1 / eqs. 57–58 (p*, θ) and the penalty Σ λ*(w)|w| of eq. 55.
* :func:`gaussian_kl_general` — KL(N(μ, diag σ²) ‖ N(0, Σ)) of App. B.2, eq. 59.
* The per-feature noise prior σ_j² ~ Inverse-Gamma(ν/2, νξ/2) of App. C.2, eq. 60:
  :func:`calibrate_inverse_gamma_scale` (ξ from the data) and :func:`inverse_gamma_map_variance`
  (the closed-form MAP of σ_j² given residuals).

How the released code differs, and which choice is taken here:

* The authors' p* drops the Laplace normalisers λ_s/2 of ψ_s (eq. 4) — their update is
  θe^{-λ1|w|} / (θe^{-λ1|w|} + (1-θ)e^{-λ0|w|}). That form is the default here (it is the one the
  paper's experiments ran with); ``density_constants=True`` gives eq. 57 with the full densities,
  which multiplies the spike's odds by λ0/λ1 (= 10 at the defaults).
* They initialise θ ~ U(0, 1); here θ starts at ``theta_init`` (0.5), deterministic. θ only enters
  the first p* update.
* They learn log σ_j by Adam with the Inverse-Gamma log density as a penalty; the MAP of that
  same objective is in closed form (:func:`inverse_gamma_map_variance`), which is what the paper
  describes (a MAP point estimate). Either way σ_j is a point estimate, not a posterior.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import torch
from torch import nn


def _check_positive(name: str, value: float) -> float:
    value = float(value)
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a positive finite number, got {value}")
    return value


# --- decoder -----------------------------------------------------------------------------------

class MaskedDecoder(nn.Module):
    """Sparse decoder of eq. 1: ``out[i, j] = head_j(trunk(w_j ⊙ z_i))``.

    ``W`` [G, K] is the per-feature mask (init N(0, 1), as the authors); ``trunk`` is an MLP
    ``K → hidden[0] → … → hidden[-1]`` with an activation after each layer and no bias in the first
    layer (so a zeroed mask column removes its factor exactly); the heads are per-feature affine
    maps ``hidden[-1] → params_per_feature`` stored stacked as ``head_weight`` [G, H, P] and
    ``head_bias`` [G, P]. Output: [B, G] when ``params_per_feature == 1``, else [B, G, P].

    Cost: the trunk sees B·G rows, so activations take B·G·H floats per layer (G times a plain
    MLP decoder's first layers).
    """

    def __init__(self, n_features: int, latent_dim: int, hidden: Sequence[int],
                 params_per_feature: int = 1, activation: type[nn.Module] = nn.ReLU):
        super().__init__()
        if int(n_features) < 1 or int(latent_dim) < 1:
            raise ValueError(f"n_features and latent_dim must be >= 1, got {n_features}, {latent_dim}")
        hidden = [int(h) for h in hidden]
        if not hidden or min(hidden) < 1:
            raise ValueError(f"hidden must be a non-empty list of positive sizes, got {hidden}")
        if int(params_per_feature) < 1:
            raise ValueError(f"params_per_feature must be >= 1, got {params_per_feature}")
        self.n_features, self.latent_dim = int(n_features), int(latent_dim)
        self.params_per_feature = int(params_per_feature)
        self.W = nn.Parameter(torch.randn(self.n_features, self.latent_dim))
        layers: list[nn.Module] = [nn.Linear(self.latent_dim, hidden[0], bias=False), activation()]
        for h_in, h_out in zip(hidden[:-1], hidden[1:]):
            layers += [nn.Linear(h_in, h_out), activation()]
        self.trunk = nn.Sequential(*layers)
        h_last = hidden[-1]
        bound = 1.0 / math.sqrt(h_last)  # nn.Linear's default init, per head
        self.head_weight = nn.Parameter(torch.empty(self.n_features, h_last, self.params_per_feature).uniform_(-bound, bound))
        self.head_bias = nn.Parameter(torch.empty(self.n_features, self.params_per_feature).uniform_(-bound, bound))

    def _check_z(self, z: torch.Tensor) -> None:
        if z.dim() != 2 or z.shape[1] != self.latent_dim:
            raise ValueError(f"z must have shape [batch, {self.latent_dim}], got {tuple(z.shape)}")

    def _shape_out(self, out: torch.Tensor) -> torch.Tensor:
        return out.squeeze(-1) if self.params_per_feature == 1 else out

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        self._check_z(z)
        b, g, k = z.shape[0], self.n_features, self.latent_dim
        masked = z.unsqueeze(1) * self.W.unsqueeze(0)                 # [B, G, K]: w_j ⊙ z_i
        h = self.trunk(masked.reshape(b * g, k)).reshape(b, g, -1)   # one pass over B·G rows
        out = torch.einsum("bgh,ghp->bgp", h, self.head_weight) + self.head_bias
        return self._shape_out(out)

    def reference_forward(self, z: torch.Tensor) -> torch.Tensor:
        """The released code's loop over features (G trunk passes); for tests only."""
        self._check_z(z)
        cols = []
        for j in range(self.n_features):
            h = self.trunk(z * self.W[j])
            cols.append(h @ self.head_weight[j] + self.head_bias[j])
        return self._shape_out(torch.stack(cols, dim=1))


# --- Spike-and-Slab Lasso ----------------------------------------------------------------------

class SpikeSlabLasso(nn.Module):
    """SSL prior on W (eqs. 2–4) with the EM-style updates of Algorithm 1.

    State (buffers, so they checkpoint): ``p_star`` [G, K] = E[γ_jk | w_jk, θ_k] (init 0.5) and
    ``theta`` [K] (the paper's η_k). After each optimiser step call :meth:`update` with the
    current W; add :meth:`penalty` (eq. 55's first term, negated) to the loss to minimise.
    Hyper-parameters: λ0 (spike) ≫ λ1 (slab), Beta(a, b) on θ with a = 1, b = G (App. C.2).
    """

    def __init__(self, n_features: int, latent_dim: int, lambda0: float = 10.0, lambda1: float = 1.0,
                 a: float = 1.0, b: float | None = None, theta_init: float = 0.5,
                 density_constants: bool = False, eps: float = 1e-10):
        super().__init__()
        if int(n_features) < 1 or int(latent_dim) < 1:
            raise ValueError(f"n_features and latent_dim must be >= 1, got {n_features}, {latent_dim}")
        self.n_features, self.latent_dim = int(n_features), int(latent_dim)
        self.lambda0 = _check_positive("lambda0", lambda0)
        self.lambda1 = _check_positive("lambda1", lambda1)
        self.a = _check_positive("a", a)
        self.b = _check_positive("b", self.n_features if b is None else b)
        if not 0.0 < eps < 0.5:
            raise ValueError(f"eps must lie in (0, 0.5), got {eps}")
        if not eps <= theta_init <= 1 - eps:
            raise ValueError(f"theta_init must lie in (0, 1), got {theta_init}")
        self.eps = float(eps)
        self.density_constants = bool(density_constants)
        self.register_buffer("p_star", torch.full((self.n_features, self.latent_dim), 0.5))
        self.register_buffer("theta", torch.full((self.latent_dim,), float(theta_init)))

    def _check_w(self, W: torch.Tensor) -> None:
        if tuple(W.shape) != (self.n_features, self.latent_dim):
            raise ValueError(f"W must have shape {(self.n_features, self.latent_dim)}, got {tuple(W.shape)}")

    def inclusion_probability(self, W: torch.Tensor, theta: torch.Tensor | None = None) -> torch.Tensor:
        """p*_jk (eq. 57) in log-odds form, stable for any |w|:
        ``sigmoid(logit θ_k + (λ0 − λ1)|w_jk| [+ log λ1/λ0 with density_constants])``."""
        self._check_w(W)
        theta = self.theta if theta is None else theta
        theta = theta.to(W.dtype).clamp(self.eps, 1 - self.eps)
        log_odds = torch.log(theta) - torch.log1p(-theta) + (self.lambda0 - self.lambda1) * W.abs()
        if self.density_constants:
            log_odds = log_odds + math.log(self.lambda1 / self.lambda0)
        return torch.sigmoid(log_odds)

    @torch.no_grad()
    def update(self, W: torch.Tensor) -> None:
        """One step of Algorithm 1: p* from the current θ, then θ_k = (Σ_j p*_jk + a − 1) /
        (a + b + G − 2) (the mode of θ_k's Beta posterior), clamped to [eps, 1 − eps]."""
        W = W.detach()
        p_star = self.inclusion_probability(W)
        theta = (p_star.sum(0) + self.a - 1) / (self.a + self.b + self.n_features - 2)
        self.p_star.copy_(p_star.to(self.p_star.dtype))
        self.theta.copy_(theta.clamp(self.eps, 1 - self.eps).to(self.theta.dtype))

    def penalty_weights(self) -> torch.Tensor:
        """λ*_jk = λ1 p*_jk + λ0 (1 − p*_jk) (eq. 58), no gradient."""
        return (self.lambda1 * self.p_star + self.lambda0 * (1 - self.p_star)).detach()

    def penalty(self, W: torch.Tensor) -> torch.Tensor:
        """Σ_jk λ*_jk |w_jk| — the negative SSL log prior of W up to constants, for the whole data
        set (divide by N when the rest of the loss is a per-observation mean; the authors divide by
        the batch size)."""
        self._check_w(W)
        return (self.penalty_weights().to(W.dtype) * W.abs()).sum()


# --- KL for a general prior covariance (App. B.2) ----------------------------------------------

def gaussian_kl_general(mu: torch.Tensor, log_var: torch.Tensor, cov: torch.Tensor) -> torch.Tensor:
    """KL(N(μ, diag σ²) ‖ N(0, Σ)) per observation, eq. 59:
    ½ [tr(Σ⁻¹ diag σ²) + μᵀ Σ⁻¹ μ − K + log|Σ| − Σ_k log σ_k²].

    ``mu``, ``log_var``: [B, K]; ``cov``: [K, K] symmetric positive definite. Returns [B].
    """
    if mu.dim() != 2 or mu.shape != log_var.shape:
        raise ValueError(f"mu and log_var must both be [batch, K], got {tuple(mu.shape)} and {tuple(log_var.shape)}")
    k = mu.shape[1]
    if tuple(cov.shape) != (k, k):
        raise ValueError(f"cov must be [{k}, {k}], got {tuple(cov.shape)}")
    chol, info = torch.linalg.cholesky_ex(cov)
    if int(info) != 0:
        raise ValueError("cov must be symmetric positive definite (Cholesky failed)")
    cov_inv_diag = torch.cholesky_inverse(chol).diagonal()
    maha = torch.linalg.solve_triangular(chol, mu.T, upper=False).pow(2).sum(0)   # μᵀ Σ⁻¹ μ
    log_det = 2 * chol.diagonal().log().sum()
    trace = (log_var.exp() * cov_inv_diag).sum(1)
    return 0.5 * (trace + maha - k + log_det - log_var.sum(1))


# --- Inverse-Gamma noise prior (App. C.2) ------------------------------------------------------

def calibrate_inverse_gamma_scale(x, nu: float = 3.0, sample_quantile: float = 0.05,
                                  prior_quantile: float = 0.9, min_variance: float = 1e-6) -> float:
    """ξ of σ_j² ~ IG(ν/2, νξ/2) (eq. 60) such that the ``sample_quantile`` of the per-feature
    sample variances (ddof = 1) equals the ``prior_quantile`` of the prior (App. C.2).

    IG(α, βξ) quantiles are linear in the scale, so ξ = 2 v_q / (ν · invgamma.ppf(prior_quantile, ν/2)).
    Equivalently (the authors' form) ξ = v_q · χ²_ν.ppf(1 − prior_quantile) / ν. A quantile v_q below
    ``min_variance`` (constant features) is raised to it (the authors use std 1e-3, i.e. 1e-6).
    ``x``: [N, G] array or tensor (features flattened from dim 1).
    """
    from scipy.stats import invgamma

    nu = _check_positive("nu", nu)
    for name, q in (("sample_quantile", sample_quantile), ("prior_quantile", prior_quantile)):
        if not 0.0 < q < 1.0:
            raise ValueError(f"{name} must lie in (0, 1), got {q}")
    arr = x.detach().cpu().double().numpy() if isinstance(x, torch.Tensor) else np.asarray(x, dtype=np.float64)
    if arr.ndim < 2 or arr.shape[0] < 2:
        raise ValueError(f"x must be [N >= 2, features...], got shape {arr.shape}")
    arr = arr.reshape(arr.shape[0], -1)
    if not np.all(np.isfinite(arr)):
        raise ValueError("x must be finite to calibrate the noise prior")
    v_q = max(float(np.quantile(arr.var(axis=0, ddof=1), sample_quantile)), float(min_variance))
    return 2.0 * v_q / (nu * float(invgamma.ppf(prior_quantile, nu / 2.0)))


def inverse_gamma_map_variance(residuals: torch.Tensor, nu: float, xi: float, dim: int = 0) -> torch.Tensor:
    """Closed-form MAP of σ² given Gaussian residuals r_1..r_n (over ``dim``) and σ² ~ IG(ν/2, νξ/2).

    The posterior is IG(ν/2 + n/2, νξ/2 + Σr²/2); its mode b/(a+1) is
    σ²_MAP = (νξ + Σ_i r_i²) / (ν + n + 2).
    (The same point minimises the authors' penalty (n + ν + 2) log σ + (νξ + Σr²) / (2σ²).)
    """
    nu, xi = _check_positive("nu", nu), _check_positive("xi", xi)
    n = residuals.shape[dim]
    return (nu * xi + residuals.pow(2).sum(dim)) / (nu + n + 2)


def inverse_gamma_log_posterior(sigma2: torch.Tensor, residuals: torch.Tensor, nu: float, xi: float,
                                dim: int = 0) -> torch.Tensor:
    """Unnormalised log p(σ² | r) = Σ_i log N(r_i; 0, σ²) + log IG(σ²; ν/2, νξ/2), up to constants:
    −(n/2 + ν/2 + 1) log σ² − (νξ + Σr²) / (2σ²). ``sigma2`` broadcasts against the reduced residuals."""
    n = residuals.shape[dim]
    ss = residuals.pow(2).sum(dim)
    return -(n / 2 + nu / 2 + 1) * torch.log(sigma2) - (nu * xi + ss) / (2 * sigma2)


# --- the model ---------------------------------------------------------------------------------

from priorlab.models.vae import VAE  # noqa: E402  (the building blocks above do not need it)


class SparseVAE(VAE):
    """The sparse VAE (paper 003, eq. 1–4, Algorithm 1): a VAE whose decoder is a
    :class:`MaskedDecoder` with the SSL prior on its mask W.

    Per-observation loss = −log p(x|z) + β·KL + penalty(W) / N: the SSL prior is on W, a
    whole-data-set quantity, so its per-observation share is 1/N (N from :meth:`bind_data`).
    After every optimiser step (:meth:`after_step`): the SSL updates of p* and θ (Algorithm 1) and,
    with the ``gaussian_ig`` likelihood, the closed-form MAP of σ_j² — per step on the batch
    residuals at the step's z, with Σ_batch r² scaled by N/B (a stochastic estimate of the full
    data's MAP; the authors also update σ every step, by Adam on the same objective).

    ``encoder_input``: ``"raw"`` or ``"row_normalised"`` (counts: the encoder sees x / Σ_j x_j, the
    likelihood the counts, App. C.1). ``prior_cov``: Σ_z of the prior N(0, Σ_z) (None: I, B.1;
    a matrix: the KL of eq. 59, B.2).
    """

    ENCODER_INPUTS = ("raw", "row_normalised")

    def __init__(self, encoder, posterior, decoder: MaskedDecoder, likelihood, prior, ssl: SpikeSlabLasso,
                 beta: float = 1.0, encoder_input: str = "raw", prior_cov: torch.Tensor | None = None):
        super().__init__(encoder, posterior, decoder, likelihood, prior, beta=beta)
        if encoder_input not in self.ENCODER_INPUTS:
            raise ValueError(f"encoder_input must be one of {self.ENCODER_INPUTS}, got {encoder_input!r}")
        if (ssl.n_features, ssl.latent_dim) != (decoder.n_features, decoder.latent_dim):
            raise ValueError("the SSL prior and the masked decoder disagree on (G, K)")
        self.ssl, self.encoder_input = ssl, encoder_input
        if prior_cov is not None:
            prior_cov = torch.as_tensor(prior_cov, dtype=torch.float32)
            gaussian_kl_general(torch.zeros(1, decoder.latent_dim), torch.zeros(1, decoder.latent_dim), prior_cov)
        self.register_buffer("prior_cov", prior_cov)
        # bound before every phase; not persistent (the data decide it)
        self.register_buffer("dataset_size", torch.tensor(0, dtype=torch.long), persistent=False)
        self._dataset_size = 0  # its Python copy, read every step (a buffer read waits for the device)

    def bind_data(self, data) -> None:
        """N for the penalty's per-observation share; ξ and initial σ_j² of a ``gaussian_ig`` likelihood."""
        from priorlab.likelihoods import InverseGammaGaussianLikelihood

        x = data.x("train")
        self.dataset_size.fill_(len(x))
        self._dataset_size = len(x)
        if isinstance(self.likelihood, InverseGammaGaussianLikelihood):
            self.likelihood.bind_data(data.prepare(x))

    def posterior(self, x: torch.Tensor):
        if self.encoder_input == "row_normalised":
            x = x / x.sum(-1, keepdim=True).clamp_min(1.0)
        return super().posterior(x)

    def terms(self, x: torch.Tensor, labels: torch.Tensor | None = None):
        if self.prior_cov is None:
            return super().terms(x, labels)
        from priorlab.models.elbo import elbo_terms

        q = self.posterior(x)
        base = q.base_dist  # GaussianPosterior: Independent(Normal(μ, σ))
        kl = gaussian_kl_general(base.loc, 2 * base.scale.log(), self.prior_cov.to(base.loc.dtype))
        terms = elbo_terms(x, q, self.prior_distribution(x, labels), self.decode, self.likelihood, kl=kl)
        terms.extra.update(self.extra_terms(x, terms, labels))
        return terms

    def extra_terms(self, x, terms, labels=None) -> dict[str, torch.Tensor]:
        n = self._dataset_size
        if n < 1:
            raise RuntimeError("SparseVAE: call bind_data(data) before training (N scales the SSL penalty)")
        penalty = self.ssl.penalty(self.decoder.W) / n
        return {"ssl_penalty": penalty.expand(x.shape[0])}

    @torch.no_grad()
    def after_step(self, batch, terms, step: int) -> None:
        """Algorithm 1's closed-form updates after the gradient step: p*, θ; then σ² (gaussian_ig)."""
        from priorlab.likelihoods import InverseGammaGaussianLikelihood

        self.ssl.update(self.decoder.W)
        if isinstance(self.likelihood, InverseGammaGaussianLikelihood):
            resid = batch.x.double() - self.decode_mean(terms.z.detach()).double()
            n, b, lik = float(self._dataset_size), batch.x.shape[0], self.likelihood
            # ξ stays on the device (float64 like the residuals: the value a host read would give)
            sigma2 = (lik.nu * lik.xi.double() + resid.pow(2).sum(0) * (n / b)) / (lik.nu + n + 2)
            lik.sigma2.copy_(sigma2.to(lik.sigma2.dtype))

    def active_columns(self, threshold: float = 0.5) -> torch.Tensor:
        """Columns k of W with some p*_jk > ``threshold`` (the paper's 'active factors')."""
        return (self.ssl.p_star > threshold).any(0)
