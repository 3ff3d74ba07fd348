"""FactorVAE (Kim & Mnih 2018): a VAE whose total correlation is penalised through a discriminator.

    VAE loss  = -E log p(x|z) + KL(q(z|x) || p(z)) + γ · TC(z),  TC(z) ≈ E_q(z) [D_0(z) - D_1(z)]
    D loss    = -½ E_q(z) log σ(D)_0(z) - ½ E_q̄(z) log σ(D)_1(z̃)

(Kim & Mnih eq. 2-3 and Alg. 2; the density-ratio trick: D(z) = log-softmax over {"from q(z)",
"from Π_j q(z_j)"}; the optimal discriminator has logit difference log q(z) - log Π_j q(z_j), so
its mean under q(z) is TC = KL(q(z) || Π_j q(z_j)).)  As in disentanglement_lib
(``methods/unsupervised/vae.py``, ``FactorVAE``): the samples of Π_j q(z_j) are the batch's codes
with every dimension permuted independently (``shuffle_codes``), the discriminator sees the same
batch as the VAE, is an MLP of 6 × 1000 LeakyReLU(0.2) units with 2 logits, and both losses are
minimised in one step with their own Adam settings (VAE: β = (0.9, 0.999); discriminator: lr 1e-4,
β = (0.5, 0.9)).  Each loss updates only its own parameters: the VAE loss never the discriminator,
the discriminator loss (on detached codes) never the VAE.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from priorlab.models.elbo import ElboTerms, objective
from priorlab.models.protocol import Batch, StepContext
from priorlab.models.vae import VAE

__all__ = ["Discriminator", "FactorVAE", "permute_dims"]


def permute_dims(z: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """Samples of Π_j q(z_j): each column of ``z`` [B, D] permuted independently over the batch
    (Kim & Mnih Alg. 1; disentanglement_lib's ``shuffle_codes``)."""
    b, d = z.shape
    # a fill of an empty tensor (torch.rand's numbers): a Tensor method, which the vectorised replicates'
    # noise override also sees in compiled code (priorlab.train.replicates)
    idx = torch.argsort(torch.empty(b, d, device=z.device).uniform_(generator=generator), dim=0)
    return torch.gather(z, 0, idx)


class Discriminator(nn.Module):
    """MLP on z with LeakyReLU(0.2) hidden layers and 2 logits (0: "from q(z)", 1: "permuted")."""

    def __init__(self, latent_dim: int, hidden: list[int]):
        super().__init__()
        layers: list[nn.Module] = []
        width = latent_dim
        for h in hidden:
            layers += [nn.Linear(width, h), nn.LeakyReLU(0.2)]
            width = h
        layers.append(nn.Linear(width, 2))
        self.net = nn.Sequential(*layers)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.net(z)

    def tc_estimate(self, z: torch.Tensor) -> torch.Tensor:
        """Per-sample density-ratio estimate log q(z)/Π_j q(z_j) ≈ D_0(z) - D_1(z), differentiable in
        ``z`` only: the discriminator's weights enter as constants (the VAE loss never trains them)."""
        fixed = {k: v.detach() for k, v in self.named_parameters()}
        logits = torch.func.functional_call(self, fixed, (z,))
        return logits[:, 0] - logits[:, 1]

    def loss(self, z: torch.Tensor, z_perm: torch.Tensor) -> torch.Tensor:
        """Cross-entropy of Kim & Mnih Alg. 2: ½ on each class (disentanglement_lib's ``discr_loss``)."""
        return 0.5 * (F.cross_entropy(self(z), torch.zeros(len(z), dtype=torch.long, device=z.device))
                      + F.cross_entropy(self(z_perm), torch.ones(len(z_perm), dtype=torch.long, device=z.device)))


class FactorVAE(VAE):
    """VAE (β = 1 on the KL by default) + γ·TC through a jointly trained discriminator."""

    finite_keys = ("loss", "discriminator_loss")

    def __init__(self, encoder, posterior, decoder, likelihood, prior, latent_dim: int, *, gamma: float = 40.0,
                 beta: float = 1.0, discriminator_hidden: list[int] | None = None,
                 vae_betas: tuple[float, float] = (0.9, 0.999), discriminator_lr: float = 1e-4, discriminator_betas: tuple[float, float] = (0.5, 0.9)):
        super().__init__(encoder, posterior, decoder, likelihood, prior, beta=beta)
        if not gamma >= 0:
            raise ValueError(f"gamma must be >= 0, got {gamma!r}")
        if not discriminator_lr > 0:
            raise ValueError(f"discriminator_lr must be > 0, got {discriminator_lr!r}")
        hidden = [1000] * 6 if discriminator_hidden is None else list(discriminator_hidden)
        self.discriminator = Discriminator(latent_dim, hidden)
        self.gamma = float(gamma)
        self.vae_betas, self.discriminator_betas = tuple(vae_betas), tuple(discriminator_betas)
        self.discriminator_lr = float(discriminator_lr)

    def extra_terms(self, x: torch.Tensor, terms: ElboTerms, labels: torch.Tensor | None = None
                    ) -> dict[str, torch.Tensor]:
        """γ · D_0(z) - D_1(z) per sample (the discriminator's TC estimate at the sampled z)."""
        tc = self.discriminator.tc_estimate(terms.z)
        terms.logs["tc_estimate"] = tc.detach()
        return {"tc_penalty": self.gamma * tc}

    def vae_parameters(self) -> list[nn.Parameter]:
        own = {id(p) for p in self.discriminator.parameters()}
        return [p for p in self.parameters() if p.requires_grad and id(p) not in own]

    def param_groups(self, lr: float) -> list[dict]:
        """VAE groups (nets at ``lr``, prior groups as declared) with the VAE's Adam betas, and the
        discriminator at its own lr and betas."""
        own = {id(p) for p in self.discriminator.parameters()}
        vae = [{**g, "params": [p for p in g["params"] if id(p) not in own], "betas": self.vae_betas}
               for g in super().param_groups(lr)]
        return [*vae, {"params": list(self.discriminator.parameters()), "lr": self.discriminator_lr,
                       "betas": self.discriminator_betas, "name": "discriminator"}]

    def step_loss(self, batch: Batch, ctx: StepContext
                  ) -> tuple[torch.Tensor, dict[str, torch.Tensor], dict[str, torch.Tensor]]:
        """The VAE loss plus the discriminator's loss on the detached codes and their permutation: each
        parameter's gradient of the sum is the one :meth:`train_step` takes from its own loss, since the
        TC term holds the discriminator's weights fixed and the discriminator sees detached codes."""
        loss, logs, terms = self.loss_terms(batch, ctx)
        z = terms.z.detach()
        d_loss = self.discriminator.loss(z, permute_dims(z))
        logs["discriminator_loss"] = d_loss.detach()
        return loss + d_loss, logs, self.step_carry(batch, terms)

    def train_step(self, batch: Batch, step: int, ctx: StepContext) -> dict[str, torch.Tensor]:
        """One joint step: gradients of the VAE loss w.r.t. the VAE's parameters only, of the
        discriminator loss (codes detached, permuted) w.r.t. the discriminator's only; one Adam step."""
        terms = self(batch.x, batch.labels)
        loss = objective(terms, self.beta, ctx.kl_weight, self.scaling)
        z = terms.z.detach()
        d_loss = self.discriminator.loss(z, permute_dims(z))
        logs = self.step_logs(loss, terms) if ctx.wants_logs else {"loss": loss.detach()}
        logs["discriminator_loss"] = d_loss.detach()  # both losses in the trainer's non-finite record
        vae_params, d_params = self.vae_parameters(), list(self.discriminator.parameters())
        ctx.optimizer.zero_grad(set_to_none=True)
        for p, g in zip(vae_params, torch.autograd.grad(loss, vae_params, allow_unused=True)):
            p.grad = g
        for p, g in zip(d_params, torch.autograd.grad(d_loss, d_params)):
            p.grad = g
        ctx.optimizer.step()
        self.after_step(batch, terms, step)
        return logs

