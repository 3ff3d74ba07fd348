"""The evidence lower bound, assembled in one place for every model.

    ELBO(x) = E_q[log p(x|z)] - KL(q(z|x) || p(z))          (Kingma & Welling 2014, eq. 3)

The KL is analytic when ``torch.distributions`` has one registered for the
pair (q, p) and otherwise the single-sample Monte Carlo estimate
log q(z|x) - log p(z) at the drawn z.  Models add their own objective terms
(total correlation, sparsity, ...) on top; they never rewrite this.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch
from torch.distributions import Distribution, kl_divergence

from priorlab.config.models import LOSS_SCALINGS


@dataclass
class ElboTerms:
    """Per-observation terms of one batch, each of shape ``[batch]``, with the q(z|x) and p(z) they
    came from (models read them for their extra terms and updates, never from attributes).

    ``extra`` are added to the loss; ``logs`` are detached diagnostics, only logged;
    ``deferred_logs`` are functions returning more of them, called only when the logs are read (a
    training step whose logs nobody reads launches none of their work).
    """

    log_lik: torch.Tensor
    kl: torch.Tensor
    z: torch.Tensor
    q: Distribution | None = None
    p: Distribution | None = None
    extra: dict[str, torch.Tensor] = field(default_factory=dict)
    logs: dict[str, torch.Tensor] = field(default_factory=dict)
    deferred_logs: list[Callable[[], dict[str, torch.Tensor]]] = field(default_factory=list)

    @property
    def elbo(self) -> torch.Tensor:
        return self.log_lik - self.kl


def kl_term(q: Distribution, p: Distribution, z: torch.Tensor) -> torch.Tensor:
    """KL(q || p) per observation: analytic if registered, else log q(z) - log p(z)."""
    try:
        return kl_divergence(q, p)
    except NotImplementedError:
        return q.log_prob(z) - p.log_prob(z)


def elbo_terms(x: torch.Tensor, q: Distribution, p: Distribution, decode, likelihood,
               kl: torch.Tensor | None = None) -> ElboTerms:
    """Single-sample reparameterised ELBO terms of a batch ``x``.  ``kl``: a model's own KL term
    per observation in place of KL(q || p) (e.g. VSC's released-code variant, whose KL is taken on
    other slabs than the ones it samples from)."""
    z = q.rsample()
    log_lik = likelihood.log_prob(x, decode(z))
    return ElboTerms(log_lik=log_lik, kl=kl_term(q, p, z) if kl is None else kl, z=z, q=q, p=p)


@dataclass(frozen=True)
class LossScaling:
    """How the per-observation ELBO terms are weighted in the loss (the ELBO itself, as logged and
    evaluated, is unchanged).

    ``paper``: weights 1 — the negative ELBO per observation, β·KL (every model's default).
    ``released_code`` (paper 003's authors' ``model/models.py``): the Gaussian reconstruction as an
    MSE *mean* over the G features (``reconstruction_loss``, ``nn.MSELoss``: log-likelihood weight
    1/G; the multinomial one summed over G, weight 1) and the KL as a mean over the batch *and* the K
    latents (``kld_z``: weight 1/K, i.e. an effective β/K); the model reads ``name`` for the rest of
    the variant (paper 003: the SSL penalty per batch, σ_j by the code's objective).
    """

    name: str = "paper"
    log_lik: float = 1.0
    kl: float = 1.0

    def __post_init__(self) -> None:
        if self.name not in LOSS_SCALINGS:
            raise ValueError(f"loss scaling must be one of {LOSS_SCALINGS}, got {self.name!r}")
        if not (self.log_lik > 0 and self.kl > 0):
            raise ValueError(f"loss scaling weights must be positive, got {self.log_lik}, {self.kl}")

    @classmethod
    def named(cls, name: str, n_features: int, latent_dim: int, feature_mean: bool = True) -> "LossScaling":
        """``paper`` or ``released_code`` for G = ``n_features`` observed features and K = ``latent_dim``
        latents; ``feature_mean``: the reconstruction is a mean over features (the code's Gaussian
        loss) rather than a sum (its categorical loss)."""
        if name == "paper":
            return cls()
        if name != "released_code":
            raise ValueError(f"loss scaling must be one of {LOSS_SCALINGS}, got {name!r}")
        return cls(name, 1.0 / n_features if feature_mean else 1.0, 1.0 / latent_dim)


PAPER_SCALING = LossScaling()


def objective(terms: ElboTerms, beta: float = 1.0, kl_weight: float = 1.0,
              scaling: LossScaling = PAPER_SCALING) -> torch.Tensor:
    """Loss to minimise: -(s_ll·E[log p(x|z)] - β·w·s_kl·KL) + Σ extra terms, averaged over the batch.

    ``β`` is the β-VAE weight (Higgins et al. 2017); ``w`` the KL annealing weight of the current
    step; ``s_ll``, ``s_kl`` the :class:`LossScaling` weights (1 for the negative ELBO).
    """
    if scaling == PAPER_SCALING:  # the default adds no weighting ops to the step
        loss = -(terms.log_lik - beta * kl_weight * terms.kl)
    else:
        loss = -(scaling.log_lik * terms.log_lik - beta * kl_weight * scaling.kl * terms.kl)
    for value in terms.extra.values():
        loss = loss + value
    return loss.mean()
