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


def objective(terms: ElboTerms, beta: float = 1.0, kl_weight: float = 1.0) -> torch.Tensor:
    """Loss to minimise: -(E[log p(x|z)] - β·w·KL) + Σ extra terms, averaged over the batch.

    ``β`` is the β-VAE weight (Higgins et al. 2017); ``w`` the KL annealing
    weight of the current step.
    """
    loss = -(terms.log_lik - beta * kl_weight * terms.kl)
    for value in terms.extra.values():
        loss = loss + value
    return loss.mean()
