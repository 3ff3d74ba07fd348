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
* They initialise θ ~ U(0, 1); here θ starts at ``theta_init`` (0.5, deterministic), and at
  ``"uniform"`` (drawn from the seeded global generator) in the ``released_code`` variant. θ only
  enters the first p* update.
* They learn log σ_j by Adam with the Inverse-Gamma log density as a penalty (the likelihood
  ``gaussian_ig_released``: :class:`~priorlab.likelihoods.ReleasedCodeInverseGammaGaussian`); the
  paper describes a MAP point estimate, in closed form here (``gaussian_ig``:
  :func:`inverse_gamma_map_variance`). Either way σ_j is a point estimate, not a posterior.
"""

from __future__ import annotations

import math
from typing import Sequence

import torch
from torch import nn

from priorlab.noise_prior import calibrate_inverse_gamma_scale, inverse_gamma_map_variance  # noqa: F401
from priorlab.noise_prior import check_positive as _check_positive

# --- decoder -----------------------------------------------------------------------------------

MIN_TRUNK_LAYERS = 2  # see MaskedDecoder: one bias-free layer makes the decoder homogeneous in z


class MaskedDecoder(nn.Module):
    """Sparse decoder of eq. 1: ``out[i, j] = head_j(trunk(w_j ⊙ z_i))``.

    ``W`` [G, K] is the per-feature mask (init N(0, 1), as the authors); ``trunk`` is an MLP
    ``K → hidden[0] → … → hidden[-1]`` with an activation after each layer and no bias in the first
    layer (the released code's ``generator``); the heads are per-feature affine maps
    ``hidden[-1] → params_per_feature`` stored stacked as ``head_weight`` [G, H, P] and
    ``head_bias`` [G, P].

    ``obs_shape``: G features as an int (a vector observation, as in the paper) or an observation
    shape ``(C, *S)`` whose G = C·∏S values are the features (an image's pixels, in the order of
    ``x.flatten(1)``; the benchmark runs the prior on images this way).  Output in the layout every
    likelihood reads (:class:`~priorlab.likelihoods.Likelihood`): ``[B, P·C, *S]``, the P parameter
    maps of the channels stacked along dim 1 — ``[B, G]`` for a vector and ``P == 1``.

    The trunk needs at least two layers (the released code: ``K → H → H``, then the heads). With
    one bias-free layer each output is c_j + v_jᵀ ReLU(A (w_j ⊙ z)), positively homogeneous in z
    (f(αz) − c = α (f(z) − c) for α > 0): it cannot represent 3z₁², 6 sin z₂ or 7 z₁z₂ of the
    synthetic benchmark (eq. 9) — fitted on the true z with the true mask it stops at held-out MSE
    1.6–2.0 where the two-layer trunk reaches 0.27–0.32 (noise variance 0.25;
    ``tests/test_sparse_vae.py``). The second layer's bias breaks the homogeneity; the first stays
    bias-free as in the code.

    Cost: the trunk sees B·G rows, so activations take B·G·H floats per layer (G times a plain
    MLP decoder's first layers).
    """

    def __init__(self, obs_shape: int | Sequence[int], latent_dim: int, hidden: Sequence[int],
                 params_per_feature: int = 1, activation: type[nn.Module] = nn.ReLU):
        super().__init__()
        self.obs_shape = (int(obs_shape),) if isinstance(obs_shape, int) else tuple(int(d) for d in obs_shape)
        if not self.obs_shape or min(self.obs_shape) < 1 or int(latent_dim) < 1:
            raise ValueError(f"the observation shape and latent_dim must be positive, got {list(self.obs_shape)}, "
                             f"{latent_dim}")
        n_features = math.prod(self.obs_shape)
        hidden = [int(h) for h in hidden]
        if len(hidden) < MIN_TRUNK_LAYERS or min(hidden) < 1:
            raise ValueError(f"hidden must list at least {MIN_TRUNK_LAYERS} positive sizes (a one-layer trunk "
                             f"without bias is positively homogeneous in z), got {hidden}")
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
        """[B, G, P] -> [B, P·C, *S]: parameter p of feature j at channel p·C + c, as the nets emit it."""
        c, *spatial = self.obs_shape
        if self.params_per_feature == 1:  # a view of the heads' output, whose strides the backward pass keeps
            return out.squeeze(-1).view(out.shape[0], c, *spatial)
        return out.transpose(1, 2).reshape(out.shape[0], self.params_per_feature * c, *spatial)

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
                 a: float = 1.0, b: float | None = None, theta_init: float | str = 0.5,
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
        if theta_init == "uniform":  # the released code: θ_k ~ U(0, 1) from the global (seeded) generator
            theta = torch.rand(self.latent_dim).clamp(eps, 1 - eps)
        elif isinstance(theta_init, (int, float)) and eps <= theta_init <= 1 - eps:
            theta = torch.full((self.latent_dim,), float(theta_init))
        else:
            raise ValueError(f"theta_init must lie in (0, 1) or be 'uniform', got {theta_init!r}")
        self.eps = float(eps)
        self.density_constants = bool(density_constants)
        self.register_buffer("p_star", torch.full((self.n_features, self.latent_dim), 0.5))
        self.register_buffer("theta", theta)

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

def inverse_gamma_log_posterior(sigma2: torch.Tensor, residuals: torch.Tensor, nu: float, xi: float,
                                dim: int = 0) -> torch.Tensor:
    """Unnormalised log p(σ² | r) = Σ_i log N(r_i; 0, σ²) + log IG(σ²; ν/2, νξ/2), up to constants:
    −(n/2 + ν/2 + 1) log σ² − (νξ + Σr²) / (2σ²). ``sigma2`` broadcasts against the reduced residuals."""
    n = residuals.shape[dim]
    ss = residuals.pow(2).sum(dim)
    return -(n / 2 + nu / 2 + 1) * torch.log(sigma2) - (nu * xi + ss) / (2 * sigma2)


# --- the model ---------------------------------------------------------------------------------

from priorlab.models.elbo import PAPER_SCALING, LossScaling, elbo_terms  # noqa: E402  (the blocks above need neither)
from priorlab.models.vae import VAE  # noqa: E402


class SparseVAE(VAE):
    """The sparse VAE (paper 003, eq. 1–4, Algorithm 1): a VAE whose decoder is a
    :class:`MaskedDecoder` with the SSL prior on its mask W.

    ``scaling`` (``loss_scaling`` in params, :class:`~priorlab.models.elbo.LossScaling`):

    * ``paper`` (default) — per-observation loss −log p(x|z) + β·KL + penalty(W) / N: the SSL prior
      is on W, a whole-data-set quantity, so its per-observation share is 1/N (N from
      :meth:`bind_data`); σ_j² (``gaussian_ig``) the stochastic MAP of the whole data's posterior.
    * ``released_code`` — the authors' ``model/models.py``: −(1/G)·log p(x|z) for a Gaussian
      (``nn.MSELoss``, a mean over features; the multinomial term is summed) + (β/K)·KL (``kld_z``, a
      mean over batch and latents) + penalty(W) / B (``mask_loss`` divides by the batch size), and
      σ_j² by the code's per-batch objective (see the likelihood).

    After every optimiser step (:meth:`update_after_step`): the SSL updates of p* and θ (Algorithm 1),
    then the likelihood's σ_j² update (:meth:`VAE.update_after_step`).

    ``encoder_input``: ``"raw"`` or ``"row_normalised"`` (:class:`VAE`). ``prior_cov``: Σ_z of the
    prior N(0, Σ_z) (None: I, B.1; a matrix: the KL of eq. 59, B.2).
    """

    def __init__(self, encoder, posterior, decoder: MaskedDecoder, likelihood, prior, ssl: SpikeSlabLasso,
                 beta: float = 1.0, encoder_input: str = "raw", prior_cov: torch.Tensor | None = None,
                 scaling: LossScaling = PAPER_SCALING):
        super().__init__(encoder, posterior, decoder, likelihood, prior, beta=beta, encoder_input=encoder_input,
                         scaling=scaling)
        if (ssl.n_features, ssl.latent_dim) != (decoder.n_features, decoder.latent_dim):
            raise ValueError("the SSL prior and the masked decoder disagree on (G, K)")
        self.ssl = ssl
        if prior_cov is not None:
            prior_cov = torch.as_tensor(prior_cov, dtype=torch.float32)
            gaussian_kl_general(torch.zeros(1, decoder.latent_dim), torch.zeros(1, decoder.latent_dim), prior_cov)
        self.register_buffer("prior_cov", prior_cov)

    def terms(self, x: torch.Tensor, labels: torch.Tensor | None = None):
        if self.prior_cov is None:
            return super().terms(x, labels)

        q = self.posterior(x)
        base = q.base_dist  # GaussianPosterior: Independent(Normal(μ, σ))
        kl = gaussian_kl_general(base.loc, 2 * base.scale.log(), self.prior_cov.to(base.loc.dtype))
        return self.with_extra_terms(x, elbo_terms(x, q, self.prior_distribution(x, labels), self.decode,
                                                   self.likelihood, kl=kl), labels)

    def extra_terms(self, x, terms, labels=None) -> dict[str, torch.Tensor]:
        """The SSL penalty's share per observation: 1/N of eq. 55's term (``paper``), 1/B (``released_code``)."""
        n = self._n_data
        if n < 1:
            raise RuntimeError("SparseVAE: call bind_data(data) before training (N scales the SSL penalty)")
        share = x.shape[0] if self.scaling.name == "released_code" else n
        penalty = self.ssl.penalty(self.decoder.W) / share
        return {"ssl_penalty": penalty.expand(x.shape[0])}

    def not_vectorised(self) -> str | None:
        if self.prior_cov is not None:
            return "the KL for a general prior covariance (eq. 59) checks its Cholesky factor on the host"
        return None

    @torch.no_grad()
    def update_after_step(self, batch, carry, step: int) -> None:
        """Algorithm 1's closed-form updates after the gradient step: p*, θ; then σ² (gaussian_ig)."""
        self.ssl.update(self.decoder.W)
        super().update_after_step(batch, carry, step)

    def active_columns(self, threshold: float = 0.5) -> torch.Tensor:
        """Columns k of W with some p*_jk > ``threshold`` (the paper's 'active factors')."""
        return (self.ssl.p_star > threshold).any(0)
