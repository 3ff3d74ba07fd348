"""The latent-variable model every method shares: encoder + prior + decoder + likelihood.

Models differ by their prior, their encoder family and extra objective
terms; subclasses override :meth:`VAE.extra_terms` (and, for priors that are
fitted to encoded data, :meth:`VAE.init_prior`) and never the ELBO.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.distributions import Distribution

from priorlab.config.models import ENCODER_INPUTS
from priorlab.likelihoods import Likelihood
from priorlab.models.elbo import PAPER_SCALING, ElboTerms, LossScaling, elbo_terms, objective
from priorlab.models.protocol import Batch, ElboModel, Generative, LossStep, Model, StepContext, logs_to_floats
from priorlab.priors.base import Prior


class VAE(Model, ElboModel, Generative, LossStep):
    """VAE (Kingma & Welling 2014) and β-VAE (Higgins et al. 2017, eq. 4) with β = ``beta`` ≥ 0.

    ``encoder_input``: ``raw``, or ``row_normalised`` — the encoder sees x / Σ_j x_j while the
    likelihood scores x (counts; paper 003's released code feeds every model of a comparison these
    rows; the paper does not say). ``scaling``: the weights of the ELBO terms in the loss
    (:class:`~priorlab.models.elbo.LossScaling`; the negative ELBO by default)."""

    def __init__(
        self,
        encoder: nn.Module,
        posterior: nn.Module,
        decoder: nn.Module,
        likelihood: Likelihood,
        prior: Prior,
        beta: float = 1.0,
        encoder_input: str = "raw",
        scaling: LossScaling = PAPER_SCALING,
    ):
        super().__init__()
        if not beta >= 0:
            raise ValueError(f"beta must be >= 0, got {beta!r}")
        if encoder_input not in ENCODER_INPUTS:
            raise ValueError(f"encoder_input must be one of {ENCODER_INPUTS}, got {encoder_input!r}")
        self.encoder, self.posterior_head = encoder, posterior
        self.decoder, self.likelihood, self.prior = decoder, likelihood, prior
        self.beta, self.encoder_input, self.scaling = beta, encoder_input, scaling
        self._n_data = 0  # N of the training set, from bind_data (a Python int: read every step)

    # -- data -------------------------------------------------------------------------
    def bind_data(self, data) -> None:
        """N of the training set; the prepared training rows to a likelihood that ``binds_data``."""
        x = data.x("train")
        self._n_data = len(x)
        if self.likelihood.binds_data:
            self.likelihood.bind_data(data.prepare(x))

    # -- the generative and recognition models --------------------------------------
    def encoder_view(self, x: torch.Tensor) -> torch.Tensor:
        """What the recognition nets see of ``x``: x, or x / Σ_j x_j (``encoder_input: row_normalised``)."""
        if self.encoder_input == "row_normalised":
            return x / x.sum(-1, keepdim=True).clamp_min(1.0)
        return x

    def posterior(self, x: torch.Tensor) -> Distribution:
        """q(z | x), the encoder applied to :meth:`encoder_view` of x."""
        return self.posterior_head(self.encoder(self.encoder_view(x)))

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        """Decoder output (likelihood parameters) for codes ``z``."""
        return self.decoder(z)

    def decode_mean(self, z: torch.Tensor) -> torch.Tensor:
        return self.likelihood.mean(self.decode(z))

    def prior_distribution(self, x: torch.Tensor | None = None, labels: torch.Tensor | None = None) -> Distribution:
        return self.prior(x)

    @torch.no_grad()
    def represent(self, x: torch.Tensor) -> torch.Tensor:
        """The representation used by the metrics: the posterior mean."""
        return self.posterior(x).mean

    @torch.no_grad()
    def reconstruct(self, x: torch.Tensor) -> torch.Tensor:
        return self.decode_mean(self.represent(x))

    # -- objective --------------------------------------------------------------------
    compilable = True

    def forward(self, x: torch.Tensor, labels: torch.Tensor | None = None) -> ElboTerms:
        """The differentiable part of a training step, :meth:`terms`; :meth:`train_step` calls it as
        ``self(x, labels)`` so that ``nn.Module.compile`` (the ``compile`` option) compiles it."""
        return self.terms(x, labels)

    def terms(self, x: torch.Tensor, labels: torch.Tensor | None = None) -> ElboTerms:
        q = self.posterior(x)
        return self.with_extra_terms(x, elbo_terms(x, q, self.prior_distribution(x, labels), self.decode,
                                                   self.likelihood), labels)

    def with_extra_terms(self, x: torch.Tensor, terms: ElboTerms, labels: torch.Tensor | None = None) -> ElboTerms:
        """``terms`` with the model's :meth:`extra_terms` and the likelihood's own loss terms (where it
        ``adds_loss_terms``: e.g. its σ prior) in ``extra``."""
        terms.extra.update(self.extra_terms(x, terms, labels))
        if self.likelihood.adds_loss_terms:
            terms.extra.update(self.likelihood.loss_terms(x, self.scaling))
        return terms

    def extra_terms(self, x: torch.Tensor, terms: ElboTerms, labels: torch.Tensor | None = None
                    ) -> dict[str, torch.Tensor]:
        """Model-specific additions to the per-observation loss (none for the VAE)."""
        return {}

    def loss(self, x: torch.Tensor, kl_weight: float = 1.0, labels: torch.Tensor | None = None
             ) -> tuple[torch.Tensor, dict[str, float]]:
        """Minibatch loss and the logged terms (means over the batch) as numbers, read back in one
        transfer (the training step itself keeps them on the device: :meth:`train_step`)."""
        terms = self.terms(x, labels)
        loss = objective(terms, self.beta, kl_weight, self.scaling)
        return loss, logs_to_floats(self.step_logs(loss, terms))

    @staticmethod
    def step_logs(loss: torch.Tensor, terms: ElboTerms) -> dict[str, torch.Tensor]:
        """The logged terms of a batch as detached 0-d tensors where they were computed (no host read):
        the loss, the means of the ELBO, its terms, the extra loss terms and the diagnostics (the
        deferred ones computed now)."""
        logs = {"loss": loss.detach(), "elbo": terms.elbo.mean().detach(), "log_lik": terms.log_lik.mean().detach(),
                "kl": terms.kl.mean().detach()}
        logs.update({k: v.mean().detach() for k, v in terms.extra.items()})
        logs.update({k: v.mean().detach() for k, v in terms.logs.items()})
        for deferred in terms.deferred_logs:
            logs.update({k: v.mean().detach() for k, v in deferred().items()})
        return logs

    # -- training ---------------------------------------------------------------------
    def param_groups(self, lr: float) -> list[dict]:
        """The nets (encoder, decoder, likelihood) at ``lr``; the prior's groups as it declares them."""
        prior = {id(p) for p in self.prior.parameters()}
        nets = [p for p in self.parameters() if p.requires_grad and id(p) not in prior]
        return [{"params": nets, "lr": lr, "name": "nets"}, *self.prior.param_groups(lr)]

    def train_step(self, batch: Batch, step: int, ctx: StepContext) -> dict[str, torch.Tensor]:
        """Loss → backward → optimiser step, then :meth:`after_step` with the batch's terms.

        Nothing is read back to the host: the logged terms are returned as device tensors (only the
        loss when ``ctx.wants_logs`` is false), and a non-finite loss is left to the trainer's
        record of ``finite_keys`` (a step does not wait to look at it)."""
        loss, logs, terms = self.loss_terms(batch, ctx)
        ctx.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        ctx.optimizer.step()
        self.after_step(batch, terms, step)
        return logs

    def loss_terms(self, batch: Batch, ctx: StepContext) -> tuple[torch.Tensor, dict[str, torch.Tensor], ElboTerms]:
        """The step's loss (eq. 3's negative ELBO, β-weighted, plus the extra terms), its logged values
        and the batch's terms (:meth:`after_step` reads them)."""
        terms = self(batch.x, batch.labels)
        loss = objective(terms, self.beta, ctx.kl_weight, self.scaling)
        return loss, (self.step_logs(loss, terms) if ctx.wants_logs else {"loss": loss.detach()}), terms

    def step_loss(self, batch: Batch, ctx: StepContext
                  ) -> tuple[torch.Tensor, dict[str, torch.Tensor], dict[str, torch.Tensor]]:
        loss, logs, terms = self.loss_terms(batch, ctx)
        return loss, logs, self.step_carry(batch, terms)

    def step_carry(self, batch: Batch, terms: ElboTerms) -> dict[str, torch.Tensor]:
        """What :meth:`update_after_step` reads of a step's terms, detached: the codes ``z`` when the
        likelihood updates after the step (its σ² from the decoder output at them), else nothing."""
        return {"z": terms.z.detach()} if self.likelihood.updates_after_step else {}

    def after_step(self, batch: Batch, terms: ElboTerms, step: int) -> None:
        """:meth:`update_after_step` with the step's carry (:meth:`step_carry`): the one update a
        standalone step (:meth:`train_step`) and a vectorised member run."""
        self.update_after_step(batch, self.step_carry(batch, terms), step)

    def update_after_step(self, batch: Batch, carry: dict[str, torch.Tensor], step: int) -> None:
        """Updates after the optimiser step (e.g. SVI on a prior): here the likelihood's closed-form
        update, when it declares one (``updates_after_step``), from the decoder output at the step's
        codes with the new weights.  Subclasses call it first (or say why not)."""
        if self.likelihood.updates_after_step:
            if self._n_data < 1:
                raise RuntimeError(f"{type(self).__name__}: call bind_data(data) before training "
                                   "(N enters the likelihood's update)")
            with torch.no_grad():
                self.likelihood.step_update(batch.x, self.decode(carry["z"]), self._n_data, self.scaling)

    # -- training phases ----------------------------------------------------------------
    def load_pretrained(self, state: dict[str, torch.Tensor]) -> None:
        """Take the pretrained encoder / decoder / likelihood weights (every key outside ``prior.``)."""
        own = {k: v for k, v in state.items() if not k.startswith("prior.")}
        missing, unexpected = self.load_state_dict(own, strict=False)
        missing = [k for k in missing if not k.startswith("prior.")]
        if missing or unexpected:
            raise ValueError(f"pretrained nets do not fit this model (missing {missing[:3]}, unexpected {unexpected[:3]})")
