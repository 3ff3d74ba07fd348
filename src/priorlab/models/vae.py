"""The latent-variable model every method shares: encoder + prior + decoder + likelihood.

Models differ by their prior, their encoder family and extra objective
terms; subclasses override :meth:`VAE.extra_terms` (and, for priors that are
fitted to encoded data, :meth:`VAE.init_prior`) and never the ELBO.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.distributions import Distribution

from priorlab.likelihoods import Likelihood
from priorlab.models.elbo import ElboTerms, elbo_terms, objective


class VAE(nn.Module):
    """VAE (Kingma & Welling 2014) and β-VAE (Higgins et al. 2017, eq. 4) with β = ``beta``."""

    def __init__(
        self,
        encoder: nn.Module,
        posterior: nn.Module,
        decoder: nn.Module,
        likelihood: Likelihood,
        prior: nn.Module,
        beta: float = 1.0,
    ):
        super().__init__()
        self.encoder, self.posterior_head = encoder, posterior
        self.decoder, self.likelihood, self.prior = decoder, likelihood, prior
        self.beta = beta

    # -- the generative and recognition models --------------------------------------
    def posterior(self, x: torch.Tensor) -> Distribution:
        """q(z | x)."""
        return self.posterior_head(self.encoder(x))

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        """Decoder output (likelihood parameters) for codes ``z``."""
        return self.decoder(z)

    def prior_distribution(self, x: torch.Tensor | None = None) -> Distribution:
        return self.prior(x)

    @torch.no_grad()
    def represent(self, x: torch.Tensor) -> torch.Tensor:
        """The representation used by the metrics: the posterior mean."""
        return self.posterior(x).mean

    @torch.no_grad()
    def reconstruct(self, x: torch.Tensor) -> torch.Tensor:
        return self.likelihood.mean(self.decode(self.represent(x)))

    # -- objective --------------------------------------------------------------------
    def terms(self, x: torch.Tensor) -> ElboTerms:
        q = self.posterior(x)
        terms = elbo_terms(x, q, self.prior_distribution(x), self.decode, self.likelihood)
        terms.extra.update(self.extra_terms(x, q, terms))
        return terms

    def extra_terms(self, x: torch.Tensor, q: Distribution, terms: ElboTerms) -> dict[str, torch.Tensor]:
        """Model-specific additions to the per-observation loss (none for the VAE)."""
        return {}

    def loss(self, x: torch.Tensor, kl_weight: float = 1.0) -> tuple[torch.Tensor, dict[str, float]]:
        """Minibatch loss and the logged terms (means over the batch)."""
        terms = self.terms(x)
        loss = objective(terms, self.beta, kl_weight)
        logs = {"loss": loss.item(), "elbo": terms.elbo.mean().item(), "log_lik": terms.log_lik.mean().item(),
                "kl": terms.kl.mean().item()}
        logs.update({k: v.mean().item() for k, v in terms.extra.items()})
        return loss, logs

    # -- training phases ----------------------------------------------------------------
    def init_prior(self, batches, generator: torch.Generator) -> dict[str, float]:
        """Prior initialisation with the networks frozen (no-op for a fixed prior)."""
        return {}

    def load_pretrained(self, state: dict[str, torch.Tensor]) -> None:
        """Take the pretrained encoder / decoder / likelihood weights (every key outside ``prior.``)."""
        own = {k: v for k, v in state.items() if not k.startswith("prior.")}
        missing, unexpected = self.load_state_dict(own, strict=False)
        missing = [k for k in missing if not k.startswith("prior.")]
        if missing or unexpected:
            raise ValueError(f"pretrained nets do not fit this model (missing {missing[:3]}, unexpected {unexpected[:3]})")

    def set_phase(self, phase: str) -> None:
        """Called with "pretrain", "prior_init" or "train" before each phase (no-op here)."""
