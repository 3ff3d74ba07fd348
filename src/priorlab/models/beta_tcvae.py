"""β-TCVAE (Chen, Li, Grosse & Duvenaud 2018): the KL split into index-code MI, total correlation
and dimension-wise KL, each weighted (α, β, γ; the paper's eq. 4 with α = γ = 1 by default).

    loss = -E log p(x|z) + α·MI + β·TC + γ·DWKL
         = -(E log p(x|z) - KL) + (α - 1)·MI + (β - 1)·TC + (γ - 1)·DWKL

The second line is how it is built here: ``models/elbo.py`` supplies the ELBO with the analytic
Gaussian KL and :meth:`BetaTCVAE.extra_terms` adds the weighted differences, estimated per
sample from the minibatch (``mws_decomposition``: minibatch-weighted sampling, the paper's
estimator, or ``"mss"``).  Since MI + TC + DWKL = log q(z|x) - log p(z) exactly, the objective
equals Chen et al.'s (which uses that MC KL in place of the analytic one) in expectation; with
α = β = γ = 1 it is the ELBO.  The estimators need the training-set size N: it comes with
:meth:`BetaTCVAE.bind_data` (a buffer, so evaluation uses the same N); MWS gradients do not
depend on N (it shifts TC by the constant ``(D - 1) log(B N)``).  The prior is the setup's
``prior`` (N(0, I) by default; any prior with a ``log_prob``, e.g. ISA's Lp-nested one).
"""

from __future__ import annotations

import torch
from torch.distributions import Distribution

from priorlab.models.elbo import ElboTerms
from priorlab.models.total_correlation import mws_decomposition
from priorlab.models.vae import VAE

__all__ = ["BetaTCVAE"]


class BetaTCVAE(VAE):
    """VAE with a Gaussian posterior, the configured prior and the weighted TC decomposition."""

    def __init__(self, encoder, posterior, decoder, likelihood, prior, *, tc_weight: float = 6.0,
                 mi_weight: float = 1.0, dimwise_weight: float = 1.0, estimator: str = "mws"):
        super().__init__(encoder, posterior, decoder, likelihood, prior, beta=1.0)
        if estimator not in ("mws", "mss"):
            raise ValueError(f"estimator must be 'mws' or 'mss', got {estimator!r}")
        for name, w in (("tc_weight", tc_weight), ("mi_weight", mi_weight), ("dimwise_weight", dimwise_weight)):
            if not w >= 0:
                raise ValueError(f"{name} must be >= 0, got {w!r}")
        self.tc_weight, self.mi_weight, self.dimwise_weight = float(tc_weight), float(mi_weight), float(dimwise_weight)
        self.estimator = estimator
        # not persistent: bound before every phase (the N(0, I) pretrained nets lack it)
        self.register_buffer("dataset_size", torch.tensor(0, dtype=torch.long), persistent=False)
        self._dataset_size = 0  # its Python copy, read every step (a buffer read waits for the device)

    def bind_data(self, data) -> None:
        """N of the aggregate posterior q(z) = (1/N) Σ_n q(z|x_n): the training-set size."""
        super().bind_data(data)
        self.set_dataset_size(self._n_data)

    def set_dataset_size(self, n: int) -> None:
        if n < 1:
            raise ValueError(f"dataset size must be >= 1, got {n}")
        self.dataset_size.fill_(int(n))
        self._dataset_size = int(n)

    def decomposition(self, q: Distribution, z: torch.Tensor) -> dict[str, torch.Tensor]:
        """Per-sample MI, TC, DWKL of the batch (``mws_decomposition``; N = max(set size, B))."""
        base = q.base_dist
        n = max(self._dataset_size, z.shape[0])
        return mws_decomposition(z, base.loc, 2.0 * torch.log(base.scale), n, estimator=self.estimator,
                                 log_pz=self.prior_distribution(None).log_prob(z))

    def extra_terms(self, x: torch.Tensor, terms: ElboTerms, labels: torch.Tensor | None = None
                    ) -> dict[str, torch.Tensor]:
        d = self.decomposition(terms.q, terms.z)
        extra = (self.mi_weight - 1.0) * d["mutual_info"] + (self.tc_weight - 1.0) * d["total_correlation"] \
            + (self.dimwise_weight - 1.0) * d["dimwise_kl"]
        # logged (detached) estimates; the loss term is the weighted difference only
        terms.logs.update({k: d[k].detach() for k in ("mutual_info", "total_correlation", "dimwise_kl")})
        return {"tc_penalty": extra}
