"""Observation models p(x | z): the one place reconstruction terms are computed.

A likelihood turns the decoder output into a ``torch.distributions``
distribution over the whole observation (features summed via ``Independent``).
Kinds are registered in :data:`LIKELIHOODS` by name (``setups.<name>.likelihood``);
a new one is a :class:`Likelihood` subclass plus :func:`register_likelihood`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Protocol

import torch
from torch import nn
from torch.distributions import Bernoulli, Distribution, Independent, Normal

from priorlab.device import value_checks_enabled
from priorlab.noise_prior import calibrate_inverse_gamma_scale, inverse_gamma_map_variance


class LossWeights(Protocol):
    """The loss weights a likelihood's own terms read (``models.elbo.LossScaling`` is one: named here so
    that this module, below the models, imports nothing of them)."""

    name: str
    log_lik: float
    kl: float


@dataclass(frozen=True)
class LikelihoodSpec:
    """What a likelihood builder may use: the observation shape and the setup's σ settings."""

    obs_shape: tuple[int, ...]
    obs_std: float = 0.1
    learn_obs_std: bool = False


class Likelihood(nn.Module):
    """Base class: the decoder emits ``params_per_feature`` values per observed feature
    (per channel of an image, per entry of a vector).

    Declared capabilities (class flags, read by the model, never probed): ``binds_data`` — the
    model passes the prepared training rows to :meth:`bind_data` before every phase;
    ``updates_after_step`` — the model calls :meth:`step_update` after every optimiser step."""

    params_per_feature: int = 1
    binds_data: bool = False
    updates_after_step: bool = False
    adds_loss_terms: bool = False

    def distribution(self, decoder_out: torch.Tensor) -> Distribution:
        raise NotImplementedError

    def log_prob(self, x: torch.Tensor, decoder_out: torch.Tensor) -> torch.Tensor:
        """log p(x | z) per observation, summed over features: shape ``[batch]``."""
        return self.distribution(decoder_out).log_prob(x)

    def mean(self, decoder_out: torch.Tensor) -> torch.Tensor:
        return self.distribution(decoder_out).mean

    def bind_data(self, x_train: torch.Tensor) -> None:
        """Data-dependent settings from the prepared training observations (none by default)."""

    def step_update(self, x: torch.Tensor, decoder_out: torch.Tensor, n_data: int, scaling: LossWeights) -> None:
        """Closed-form updates after an optimiser step from a batch ``x`` and the decoder output at
        the step's codes; ``n_data`` is the training-set size N (none by default)."""

    def loss_terms(self, x: torch.Tensor, scaling: LossWeights) -> dict[str, torch.Tensor]:
        """Per-observation terms this likelihood adds to the loss (its parameters' prior), each
        ``[batch]``; read when ``adds_loss_terms`` (none by default)."""
        return {}


class BernoulliLikelihood(Likelihood):
    """Pixels in [0, 1] with Bernoulli logits (the continuous relaxation for grey values)."""

    def distribution(self, decoder_out: torch.Tensor) -> Distribution:
        return Independent(Bernoulli(logits=decoder_out, validate_args=False), decoder_out.dim() - 1)

    def log_prob(self, x: torch.Tensor, decoder_out: torch.Tensor) -> torch.Tensor:
        # -BCE with logits, numerically stable and valid for non-binary targets
        ll = -nn.functional.binary_cross_entropy_with_logits(decoder_out, x, reduction="none")
        return ll.flatten(1).sum(1)


class GaussianLikelihood(Likelihood):
    """N(x; mean(z), σ²) with σ fixed, or learned (one σ per feature, shared over data)."""

    def __init__(self, obs_shape: tuple[int, ...], std: float = 0.1, learn_std: bool = False):
        super().__init__()
        log_std = torch.full(tuple(obs_shape), math.log(std))
        if learn_std:
            self.log_std = nn.Parameter(log_std)
        else:
            self.register_buffer("log_std", log_std)

    def distribution(self, decoder_out: torch.Tensor) -> Distribution:
        scale = self.log_std.exp().expand_as(decoder_out)
        return Independent(Normal(decoder_out, scale, validate_args=False), decoder_out.dim() - 1, validate_args=False)


class DecodedVarianceGaussian(Likelihood):
    """N(x; μ(z), σ²(z)) per feature, both from the decoder (paper 002, App. A.1 / D.1: the network
    "outputs the mean μ_i and log variance log(σ_i²)"; the log likelihood is that Gaussian's density).

    The decoder emits two maps per observed channel (or two values per vector entry): the first half of
    its output along dim 1 is the mean, the second the log variance.  ``mean_link``: ``identity`` (the
    text: the network outputs the mean) or ``sigmoid`` (the authors' released code, whose decoder squashes
    the mean into (0, 1)).  ``variance_floor`` is added to σ² = exp(log σ²), as the released code adds 1e-6:
    the text gives none, and without one the density is unbounded on a feature the data hold constant
    (an image's background), so its likelihood could rise without limit."""

    params_per_feature = 2

    def __init__(self, mean_link: str = "identity", variance_floor: float = 1e-6):
        super().__init__()
        if mean_link not in ("identity", "sigmoid"):
            raise ValueError(f"mean_link must be identity or sigmoid, got {mean_link!r}")
        if not variance_floor > 0:
            raise ValueError(f"variance_floor must be positive, got {variance_floor}")
        self.mean_link, self.variance_floor = mean_link, float(variance_floor)

    def mean_and_variance(self, decoder_out: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(μ, σ²) of every feature, each shaped like the observation."""
        mean, log_var = decoder_out.chunk(2, dim=1)
        if self.mean_link == "sigmoid":
            mean = torch.sigmoid(mean)
        return mean, log_var.exp() + self.variance_floor

    def distribution(self, decoder_out: torch.Tensor) -> Distribution:
        mean, var = self.mean_and_variance(decoder_out)
        return Independent(Normal(mean, var.sqrt(), validate_args=False), mean.dim() - 1, validate_args=False)

    def log_prob(self, x: torch.Tensor, decoder_out: torch.Tensor) -> torch.Tensor:
        mean, var = self.mean_and_variance(decoder_out)
        ll = -0.5 * (math.log(2 * math.pi) + var.log() + (x - mean) ** 2 / var)
        return ll.flatten(1).sum(1)

    def mean(self, decoder_out: torch.Tensor) -> torch.Tensor:
        return self.mean_and_variance(decoder_out)[0]


LIKELIHOODS: dict[str, Callable[[LikelihoodSpec], Likelihood]] = {}
"""Likelihood name → builder from a :class:`LikelihoodSpec`."""


def register_likelihood(name: str, builder: Callable[[LikelihoodSpec], Likelihood]) -> None:
    if name in LIKELIHOODS:
        raise ValueError(f"likelihood {name!r} is registered already")
    LIKELIHOODS[name] = builder


register_likelihood("bernoulli", lambda spec: BernoulliLikelihood())
register_likelihood("gaussian", lambda spec: GaussianLikelihood(spec.obs_shape, spec.obs_std, spec.learn_obs_std))
register_likelihood("gaussian_decoded_variance", lambda spec: DecodedVarianceGaussian("identity"))  # paper 002 A.1
register_likelihood("gaussian_decoded_variance_released", lambda spec: DecodedVarianceGaussian("sigmoid"))  # its code


def build_likelihood(kind: str, obs_shape, std: float = 0.1, learn_std: bool = False) -> Likelihood:
    try:
        builder = LIKELIHOODS[kind]
    except KeyError:
        raise ValueError(f"unknown likelihood {kind!r}; allowed: {', '.join(LIKELIHOODS)}") from None
    return builder(LikelihoodSpec(tuple(obs_shape), std, learn_std))


# --- sparse VAE (paper 003) observation models --------------------------------------------------

class MultinomialLikelihood(Likelihood):
    """Counts over G features: p(x | z) = Multinomial(n = Σ_j x_j, softmax(decoder_out)).

    ``log_prob`` includes the multinomial coefficient log n! − Σ_j log x_j!, per row (each row may
    have its own total n). ``mean`` returns the probabilities softmax(decoder_out) — the expected
    share of each feature, since the total count of a row is not known from the code alone; use
    :meth:`expected_counts` for n · p. ``distribution`` is the Multinomial with a single total count
    (default 1: one draw, mean = probabilities). The paper's encoder sees row-normalised counts;
    that is the model's business, not the likelihood's.
    """

    def distribution(self, decoder_out: torch.Tensor, total_count: int = 1) -> Distribution:
        from torch.distributions import Multinomial

        return Multinomial(total_count=int(total_count), logits=decoder_out, validate_args=False)

    def log_prob(self, x: torch.Tensor, decoder_out: torch.Tensor) -> torch.Tensor:
        if x.shape != decoder_out.shape or x.dim() != 2:
            raise ValueError(f"x and decoder_out must both be [batch, G], got {tuple(x.shape)} and {tuple(decoder_out.shape)}")
        x = x.to(decoder_out.dtype)
        log_p = torch.log_softmax(decoder_out, dim=-1)
        weighted = torch.where(x > 0, x * log_p, torch.zeros_like(log_p)).sum(-1)  # 0·log 0 = 0
        log_coef = torch.lgamma(x.sum(-1) + 1) - torch.lgamma(x + 1).sum(-1)
        return log_coef + weighted

    def mean(self, decoder_out: torch.Tensor) -> torch.Tensor:
        return torch.softmax(decoder_out, dim=-1)

    def expected_counts(self, x: torch.Tensor, decoder_out: torch.Tensor) -> torch.Tensor:
        """n_i · p_ij with n_i the total count of row i of ``x``."""
        return x.sum(-1, keepdim=True).to(decoder_out.dtype) * self.mean(decoder_out)


class InverseGammaGaussianLikelihood(Likelihood):
    """N(x_j; mean_j(z), σ_j²) with σ_j² ~ Inverse-Gamma(ν/2, νξ/2) (paper 003, eq. 60, App. C.2).

    σ_j² (buffer ``sigma2``, one per feature) is a MAP point estimate, not a gradient parameter:
    :meth:`bind_data` calibrates ξ (the 5 % quantile of the per-feature sample variances is the
    prior's 90 % quantile) and initialises σ_j² to the sample variances (as the authors);
    :meth:`map_update` sets σ_j² = (νξ + Σ_i r_ij²) / (ν + n + 2) from residuals r = x − mean of the
    n rows given (pass the whole training set, or a batch for a stochastic version).

    After every optimiser step (:meth:`step_update`, on the batch's residuals at the step's codes):

    * ``paper`` scaling — the MAP of the whole data's posterior with Σ_batch r² scaled by N/B:
      σ_j² = (νξ + (N/B) Σ_b r_bj²) / (ν + N + 2), a stochastic estimate of the full-data MAP;
    * ``released_code`` scaling — the minimiser of the code's per-batch σ objective
      ½ mean_{b,j}(r_bj²/σ_j²) + [(B + ν + 2) Σ_j log σ_j + ½ νξ Σ_j σ_j⁻²] / B
      (``reconstruction_loss`` + ``sigma_loss`` of ``model/models.py``), which is
      σ_j² = (νξ + Σ_b r_bj² / G) / (B + ν + 2): about MSE_j / G, since the code's reconstruction is
      a mean over the G features. The code takes one Adam step on log σ_j towards it per batch.
    """

    binds_data = True
    updates_after_step = True

    def __init__(self, obs_shape: tuple[int, ...], nu: float = 3.0, init_std: float = 1.0,
                 sample_quantile: float = 0.05, prior_quantile: float = 0.9):
        super().__init__()
        if not (nu > 0 and init_std > 0):
            raise ValueError(f"nu and init_std must be positive, got {nu}, {init_std}")
        self.nu = float(nu)
        self.sample_quantile, self.prior_quantile = float(sample_quantile), float(prior_quantile)
        self.register_buffer("sigma2", torch.full(tuple(obs_shape), float(init_std) ** 2))
        self.register_buffer("xi", torch.tensor(float("nan")))  # set by bind_data

    def distribution(self, decoder_out: torch.Tensor) -> Distribution:
        scale = self.sigma2.sqrt().to(decoder_out.dtype).expand_as(decoder_out)
        return Independent(Normal(decoder_out, scale, validate_args=False), decoder_out.dim() - 1, validate_args=False)

    def bind_data(self, x_train: torch.Tensor) -> None:
        x = x_train.detach().double().reshape(x_train.shape[0], *self.sigma2.shape)
        self.xi.fill_(calibrate_inverse_gamma_scale(x.reshape(x.shape[0], -1), self.nu,
                                                    self.sample_quantile, self.prior_quantile))
        var = x.var(dim=0, unbiased=True).clamp_min(1e-6)
        self.sigma2.copy_(var.to(self.sigma2.dtype))

    @torch.no_grad()
    def step_update(self, x: torch.Tensor, decoder_out: torch.Tensor, n_data: int, scaling: LossWeights) -> None:
        resid = x.double() - decoder_out.detach().double()
        b, ss = x.shape[0], resid.pow(2).sum(0)
        xi = self.xi.double()  # stays on the device (a host read would wait for it)
        if scaling.name == "released_code":
            sigma2 = (self.nu * xi + ss / ss.numel()) / (b + self.nu + 2)
        else:
            n = float(n_data)
            sigma2 = (self.nu * xi + ss * (n / b)) / (self.nu + n + 2)
        self.sigma2.copy_(sigma2.to(self.sigma2.dtype))

    @torch.no_grad()
    def map_update(self, x: torch.Tensor, decoder_mean: torch.Tensor) -> torch.Tensor:
        """Closed-form MAP of every σ_j² given the residuals of the rows of ``x``; returns σ²."""
        if not torch.isfinite(self.xi):
            raise ValueError("InverseGammaGaussianLikelihood.map_update needs ξ: call bind_data(x_train) first")
        if x.shape != decoder_mean.shape or tuple(x.shape[1:]) != tuple(self.sigma2.shape):
            raise ValueError(f"x and decoder_mean must both be [n, {', '.join(map(str, self.sigma2.shape))}], "
                             f"got {tuple(x.shape)} and {tuple(decoder_mean.shape)}")
        resid = (x.double() - decoder_mean.detach().double())
        self.sigma2.copy_(inverse_gamma_map_variance(resid, self.nu, float(self.xi), dim=0).to(self.sigma2.dtype))
        return self.sigma2


class ReleasedCodeInverseGammaGaussian(Likelihood):
    """Paper 003's σ_j as the authors' released code treats it (``model/models.py``,
    ``model/model_trainer.py``, ``data/dataset.py``): log σ_j a gradient parameter, initialised at the
    feature's standard deviation (ddof 0; the code takes it over all rows, here the training rows),
    trained by the model's Adam, one step per batch, on the code's per-batch objective

        ½ mean_{b,j} r_bj² / σ_j²  +  [(B + ν + 2) Σ_j log σ_j + ½ νξ Σ_j σ_j⁻²] / B,

    ξ calibrated from the quantile of the per-feature stds, squared
    (:func:`~priorlab.noise_prior.calibrate_inverse_gamma_scale` with ``released_code``).  The first
    term is the ``released_code`` scaling's weighted Gaussian log-likelihood (weight s = 1/G) less its
    s Σ_j log σ_j, which :meth:`loss_terms` takes back out, adding the bracket / B.  Its stationary
    point is the closed form of :class:`InverseGammaGaussianLikelihood` under ``released_code``; the
    difference is the path: σ_j starts at the data's std (about √G above that point) and Adam moves
    log σ_j about lr per step towards it, so early steps weigh the KL and the SSL penalty more."""

    binds_data = True
    adds_loss_terms = True

    def __init__(self, obs_shape: tuple[int, ...], nu: float = 3.0, sample_quantile: float = 0.05,
                 prior_quantile: float = 0.9):
        super().__init__()
        if not nu > 0:
            raise ValueError(f"nu must be positive, got {nu}")
        self.nu = float(nu)
        self.sample_quantile, self.prior_quantile = float(sample_quantile), float(prior_quantile)
        self.log_sigma = nn.Parameter(torch.zeros(tuple(obs_shape)))
        self.register_buffer("xi", torch.tensor(float("nan")))  # set by bind_data

    @property
    def sigma2(self) -> torch.Tensor:
        """σ_j² (no gradient), as :class:`InverseGammaGaussianLikelihood` exposes it."""
        return self.log_sigma.detach().mul(2).exp()

    def distribution(self, decoder_out: torch.Tensor) -> Distribution:
        scale = self.log_sigma.exp().to(decoder_out.dtype).expand_as(decoder_out)
        return Independent(Normal(decoder_out, scale, validate_args=False), decoder_out.dim() - 1, validate_args=False)

    @torch.no_grad()
    def bind_data(self, x_train: torch.Tensor) -> None:
        x = x_train.detach().double().reshape(x_train.shape[0], *self.log_sigma.shape)
        self.xi.fill_(calibrate_inverse_gamma_scale(x.reshape(x.shape[0], -1), self.nu, self.sample_quantile,
                                                    self.prior_quantile, released_code=True))
        std = x.std(dim=0, unbiased=False).clamp_min(1e-3)  # the code's floor: std 1e-3
        self.log_sigma.copy_(std.log().to(self.log_sigma.dtype))

    def loss_terms(self, x: torch.Tensor, scaling: LossWeights) -> dict[str, torch.Tensor]:
        if value_checks_enabled() and not torch.isfinite(self.xi):  # deferred in training: a NaN loss stops it
            raise ValueError("ReleasedCodeInverseGammaGaussian needs ξ: call bind_data(x_train) first")
        b, log_sigma = x.shape[0], self.log_sigma.flatten()
        term = ((b + self.nu + 2) / b - scaling.log_lik) * log_sigma.sum() \
            + 0.5 * self.nu * self.xi.to(log_sigma.dtype) * torch.exp(-2 * log_sigma).sum() / b
        return {"sigma_prior": term.expand(b)}


def _build_gaussian_ig(spec: LikelihoodSpec) -> Likelihood:
    if spec.learn_obs_std:
        raise ValueError("likelihood 'gaussian_ig' updates σ_j in closed form (map_update); "
                         "set learn_obs_std: false")
    return InverseGammaGaussianLikelihood(spec.obs_shape, init_std=spec.obs_std)


register_likelihood("multinomial", lambda spec: MultinomialLikelihood())
register_likelihood("gaussian_ig", _build_gaussian_ig)
register_likelihood("gaussian_ig_released", lambda spec: ReleasedCodeInverseGammaGaussian(spec.obs_shape))
