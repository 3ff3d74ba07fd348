"""Variational Sparse Coding (Tonolini, Jensen & Murray-Smith 2019, paper 002) as a ``VAE``.

* Recognition model (eq. 2, A.2): the encoder body outputs ``μ``, ``log σ²`` and ``v`` per latent;
  ``log γ = -ReLU(-v)``; ``q(z|x) = Π_j γ_j N(μ_j, σ_j²) + (1 - γ_j) δ_0`` under the spike warm-up
  of eq. 7 (slab mean ``λμ``, variance ``λσ² + 1 - λ``).  Training draws are the relaxed
  reparameterised draws of B.1-B.2 with sigmoid sharpness ``c``.
* Prior (eq. 3, A.3): learned pseudo-inputs ``x_u`` pass through the *same* encoder (and warm-up);
  a one-layer selector ``C_ω(x)`` weights the U components per observation.  The prior returned by
  :meth:`VSC.prior_distribution` is a :class:`SelectedPseudoInputPrior`, whose KL from the
  spike-and-slab posterior is registered with ``torch.distributions`` as the selection-weighted
  closed-form KL (eq. 6 with correct variances), so ``models/elbo.py`` stays the one ELBO.
* Sparsity (eq. 4): the extra term ``J · KL(Bern ḡ || Bern α)``, ``ḡ`` the mean spike probability
  of the selected pseudo-input component.
* Schedules (eq. 7, Alg. 1, B.2): ``set_phase("pretrain")`` fixes ``λ = 0`` and ``c = c_start``
  (the spike pre-training is the pipeline's pretrain stage); in ``train``, ``before_step(step)``
  ramps ``λ`` linearly 0 → 1 over ``warmup_ramp_steps`` and ``c`` from ``c_start`` to ``c_end``
  over ``sharpness_ramp_steps`` (``c_start == c_end``: the released code's fixed ``c``).
  ``λ`` and ``c`` are buffers, so a trained model is evaluated with the values it ended with.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.distributions import Distribution, Independent, constraints
from torch.distributions.kl import register_kl

from priorlab.device import float_like
from priorlab.models.elbo import ElboTerms, elbo_terms
from priorlab.models.vae import VAE
from priorlab.priors.base import Prior
from priorlab.priors.spike_slab import (
    SpikeSlabNormal,
    pseudo_input_mixture_kl,
    pseudo_input_mixture_kl_code,
    sharpen_spikes,
    selected_prior_gamma,
    selector_weights_code,
    selector_weights_paper,
    sparsity_kl,
    spike_slab_warmup,
)

__all__ = ["PseudoInputPrior", "SelectedPseudoInputPrior", "SpikeSlabPosterior", "VSC", "ramp"]


def spike_diagnostics(gamma: torch.Tensor, weights: torch.Tensor, varies: float = 0.1) -> dict[str, torch.Tensor]:
    """Per-batch spike statistics logged during training, to see when the spikes escape the collapse:
    input-dependent dims (std of γ over the batch > ``varies``), distinct on/off patterns (γ > 1/2),
    mean active dims per input, and the mean entropy (nats) of the normalised selection weights."""
    on = gamma > 0.5
    w = weights / weights.sum(-1, keepdim=True)
    return {
        "spike_input_dependent": (gamma.std(0) > varies).sum().to(gamma.dtype),
        "spike_patterns": distinct_rows(on).to(torch.get_default_dtype()),
        "spike_active_per_input": on.sum(-1).to(gamma.dtype).mean(),
        "selector_entropy": -(w * torch.log(w.clamp_min(1e-30))).sum(-1).mean(),
    }


def distinct_rows(on: torch.Tensor) -> torch.Tensor:
    """Number of distinct rows of a boolean ``[B, J]`` matrix, as a 0-d long tensor on its device.

    ``torch.unique(on, dim=0)`` has a data-dependent size, so reading it waits for the device; here
    rows i and k agree when their matching entries, counted by two matrix products, number J (exact
    in float32 for J < 2^24), and the distinct rows are those equal to no earlier row."""
    if on.dim() != 2:
        raise ValueError(f"need a [B, J] matrix, got shape {tuple(on.shape)}")
    a = on.to(torch.float32)
    same = a @ a.T + (1.0 - a) @ (1.0 - a).T == on.shape[1]
    return (~torch.tril(same, diagonal=-1).any(1)).sum()


def ramp(step: int, steps: int, start: float, end: float) -> float:
    """Linear schedule: ``start`` at step 0, ``end`` from step ``steps`` on (``end`` if ``steps <= 0``)."""
    if steps <= 0:
        return float(end)
    t = min(max(step, 0), steps) / steps
    return float(start + t * (end - start))


class SpikeSlabPosterior(nn.Module):
    """Head ``[μ, log σ², v] → Independent(SpikeSlabNormal)`` with ``log γ = -ReLU(-v)`` (A.2) and
    the spike warm-up of eq. 7 (``lam`` and ``sharpness`` are buffers set by the model's schedules)."""

    params_per_dim = 3

    def __init__(self, latent_dim: int, warmup_variant: str = "paper", sharpness: float = 50.0,
                 min_logvar: float = -12.0, max_logvar: float = 8.0):
        super().__init__()
        if warmup_variant not in ("paper", "code"):
            raise ValueError(f"warmup_variant must be 'paper' or 'code', got {warmup_variant!r}")
        self.latent_dim, self.warmup_variant = latent_dim, warmup_variant
        self.min_logvar, self.max_logvar = min_logvar, max_logvar
        self.register_buffer("lam", torch.tensor(1.0))
        self.register_buffer("sharpness", torch.tensor(float(sharpness)))
        self._lam, self._sharpness = 1.0, float_like(sharpness, self.sharpness.dtype)  # Python copies (no reads)

    def set_schedule(self, lam: float, sharpness: float) -> None:
        """Set ``λ`` and ``c`` (buffers, saved with the model) and their Python copies.  The forward pass
        computes with the buffers and branches on the copy of ``λ`` (reading a device buffer would wait
        for the device); the copies also tell whether a value changed: a buffer already holding the
        value is left alone (no fill launched once a ramp has ended)."""
        lam_now, sharp_now = float_like(lam, self.lam.dtype), float_like(sharpness, self.sharpness.dtype)
        if lam_now != self._lam:
            self.lam.fill_(float(lam))
        if sharp_now != self._sharpness:
            self.sharpness.fill_(float(sharpness))
        self._lam, self._sharpness = lam_now, sharp_now

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        """Loading ``lam`` / ``sharpness`` refreshes their Python copies (from the loaded values)."""
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
        for name in ("lam", "sharpness"):
            if prefix + name in state_dict:
                setattr(self, "_" + name, float(state_dict[prefix + name]))

    def raw_parameters(self, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(log γ, slab mean, slab log-variance)`` before the warm-up, ``log γ = -ReLU(-v)`` (A.2)."""
        mu, logvar, v = features.chunk(3, dim=-1)
        return -torch.relu(-v), mu, logvar.clamp(self.min_logvar, self.max_logvar)

    def warm(self, mu: torch.Tensor, logvar: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Slab ``(mean, log-variance)`` under the current warm-up ``λ`` (eq. 7)."""
        if self._lam == 1.0:
            return mu, logvar
        loc, var = spike_slab_warmup(mu, logvar, self.lam, self.warmup_variant)  # the buffer: no host copy
        return loc, torch.log(var)

    def parameters_of(self, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(γ, slab mean, slab log-variance)`` after the warm-up, each ``[..., J]``."""
        log_gamma, mu, logvar = self.raw_parameters(features)
        return (torch.exp(log_gamma), *self.warm(mu, logvar))

    def distribution(self, gamma: torch.Tensor, loc: torch.Tensor, logvar: torch.Tensor) -> Distribution:
        """``Independent(SpikeSlabNormal)`` from the outputs of :meth:`parameters_of` (current sharpness)."""
        # γ = exp(-ReLU(-v)) lies in (0, 1] and the scale exp(log σ²/2) is positive by construction, so
        # the argument checks are skipped (a non-finite loss is caught by the trainer).  The sharpness is
        # the buffer (same value as its Python copy): a ramp changes a tensor, which compiled code takes
        # as an input instead of recompiling for each new number.
        return Independent(SpikeSlabNormal.from_logvar(gamma, loc, logvar, self.sharpness, validate_args=False), 1)

    def forward(self, features: torch.Tensor) -> Distribution:
        return self.distribution(*self.parameters_of(features))


class PseudoInputPrior(Prior):
    """Learned pseudo-inputs ``x_u`` ``[U, *obs_shape]`` and the selector ``C_ω`` (eq. 3, A.3).

    The selector is one linear layer on the flattened observation; its outputs are made positive
    with a sigmoid and normalised (``selector="paper"``: unit sum then ``S(a(u - b))``;
    ``"code"``: unit-sum weights, the released code's weighted average).  Pseudo-inputs start
    uniform in [0, 1] (the data range; ``init="uniform"``) or Xavier-uniform on the ``[U, D]`` matrix
    (``init="xavier"``: about ±0.08 at U = 10, D = 1024, as the released code), from torch's global
    RNG (seeded by the pipeline).
    """

    def __init__(self, obs_shape: tuple[int, ...], n_pseudo: int, selector: str = "paper",
                 scale: float = 60.0, shift: float = 0.5, init: str = "uniform"):
        super().__init__()
        if n_pseudo < 1:
            raise ValueError(f"n_pseudo must be >= 1, got {n_pseudo}")
        if selector not in ("paper", "code"):
            raise ValueError(f"selector must be 'paper' or 'code', got {selector!r}")
        if init not in ("uniform", "xavier"):
            raise ValueError(f"init must be 'uniform' or 'xavier', got {init!r}")
        self.selector_kind, self.scale, self.shift = selector, float(scale), float(shift)
        if init == "uniform":
            pseudo = torch.rand(n_pseudo, *obs_shape)
        else:
            pseudo = nn.init.xavier_uniform_(torch.empty(n_pseudo, math.prod(obs_shape))).view(n_pseudo, *obs_shape)
        self.pseudo_inputs = nn.Parameter(pseudo)
        self.selector = nn.Linear(math.prod(obs_shape), n_pseudo)

    def weights(self, x: torch.Tensor) -> torch.Tensor:
        """Selection weights ``[B, U]`` of each observation."""
        raw = self.selector(x.flatten(1))
        if self.selector_kind == "paper":
            return selector_weights_paper(raw, self.scale, self.shift)
        return selector_weights_code(raw)


class SelectedPseudoInputPrior(Distribution):
    """The per-observation prior of eq. 3: pseudo-input spike-and-slab components with weights.

    Parameters ``gamma_u``, ``loc_u``, ``logvar_u`` ``[U, J]`` and ``weights`` ``[B, U]``;
    ``batch_shape = [B]``, ``event_shape = [J]``.  Its KL from ``Independent(SpikeSlabNormal)`` is
    the weighted sum of closed-form KLs (A.3).  ``log_prob`` (for the importance-weighted bound) is
    the density of the mixture ``Σ_u w̃_u SS_u`` with weights normalised to unit sum, w.r.t.
    ``δ_0 + Lebesgue`` per coordinate; it is exactly the selected component when the weights are
    one-hot.  Since ``KL(q || Σ w̃ p_u) ≤ Σ w̃ KL(q || p_u)``, for unit-sum weights the training
    ELBO is a lower bound of the ELBO under this mixture.
    """

    arg_constraints = {}
    support = constraints.real_vector
    has_rsample = False

    def __init__(self, gamma_u: torch.Tensor, loc_u: torch.Tensor, logvar_u: torch.Tensor, weights: torch.Tensor):
        if gamma_u.dim() != 2 or loc_u.shape != gamma_u.shape or logvar_u.shape != gamma_u.shape:
            raise ValueError(f"gamma_u, loc_u, logvar_u must share a [U, J] shape, got {tuple(gamma_u.shape)}, "
                             f"{tuple(loc_u.shape)}, {tuple(logvar_u.shape)}")
        if weights.dim() != 2 or weights.shape[1] != gamma_u.shape[0]:
            raise ValueError(f"weights must be [B, U={gamma_u.shape[0]}], got {tuple(weights.shape)}")
        self.gamma_u, self.loc_u, self.logvar_u, self.weights = gamma_u, loc_u, logvar_u, weights
        super().__init__(batch_shape=weights.shape[:1], event_shape=gamma_u.shape[1:], validate_args=False)

    @property
    def selected_gamma(self) -> torch.Tensor:
        """Spike probabilities ``[B, J]`` of each observation's selected prior (for eq. 4)."""
        return selected_prior_gamma(self.gamma_u, self.weights)

    def components(self) -> SpikeSlabNormal:
        return SpikeSlabNormal.from_logvar(self.gamma_u, self.loc_u, self.logvar_u)

    def log_prob(self, value: torch.Tensor) -> torch.Tensor:
        """``log Σ_u w̃_bu Π_j SS_uj(z_bj)`` for ``value [..., B, J]``, returns ``[..., B]``."""
        comp = self.components()
        lp = comp.log_prob(value.unsqueeze(-2)).sum(-1)  # [..., B, U]
        w = self.weights / self.weights.sum(-1, keepdim=True)
        return torch.logsumexp(lp + torch.log(w), dim=-1)

    def sample(self, sample_shape=torch.Size(), generator: torch.Generator | None = None) -> torch.Tensor:
        """Exact draws: a component from the normalised weights, then its spike-and-slab draw."""
        with torch.no_grad():
            shape = torch.Size(sample_shape) + self.batch_shape
            w = self.weights / self.weights.sum(-1, keepdim=True)
            idx = torch.multinomial(w.expand(*shape, -1).reshape(-1, w.shape[-1]), 1, generator=generator)
            idx = idx.view(shape)
            comp = SpikeSlabNormal.from_logvar(self.gamma_u[idx], self.loc_u[idx], self.logvar_u[idx])
            return comp.sample(generator=generator)


@register_kl(Independent, SelectedPseudoInputPrior)
def _kl_spike_slab_selected(q: Independent, p: SelectedPseudoInputPrior) -> torch.Tensor:
    base = q.base_dist
    if not isinstance(base, SpikeSlabNormal) or q.reinterpreted_batch_ndims != 1:
        raise NotImplementedError
    return pseudo_input_mixture_kl(base.gamma, base.loc, base.logvar, p.gamma_u, p.loc_u, p.logvar_u, p.weights)


class VSC(VAE):
    """Variational Sparse Coding: spike-and-slab posterior, pseudo-input prior, sparsity term (eq. 4)."""

    evaluation_notes = (
        "VSC: the prior depends on x through the selector (eq. 3), so L_k estimates log of "
        "int p(x|z) p_sel(x)(z) dz, not the marginal likelihood of a fixed generative model; q.sample "
        "draws exact spike-and-slab codes (zeros included) and log-densities are w.r.t. delta_0 + Lebesgue; "
        "the ELBO uses the relaxed draws of training (B.1) with the selection-weighted KL (A.3)."
    )

    def __init__(self, encoder, posterior: SpikeSlabPosterior, decoder, likelihood, prior: PseudoInputPrior, *,
                 alpha: float, beta: float = 1.0, warmup_ramp_steps: int = 0, sharpness_start: float = 50.0,
                 sharpness_end: float = 200.0, sharpness_ramp_steps: int = 0, prior_spike_sharpening: float = 0.0,
                 kl_slabs: str = "warmed", bernoulli_kl: str = "clamped", encoder_input: str = "raw"):
        super().__init__(encoder, posterior, decoder, likelihood, prior, beta=beta, encoder_input=encoder_input)
        if not 0.0 < alpha < 1.0:
            raise ValueError(f"alpha must lie in (0, 1), got {alpha!r}")
        if sharpness_start <= 0 or sharpness_end <= 0:
            raise ValueError(f"sharpness must be > 0, got {sharpness_start!r}, {sharpness_end!r}")
        if prior_spike_sharpening < 0 or kl_slabs not in ("warmed", "unwarmed") or \
                bernoulli_kl not in ("clamped", "code"):
            raise ValueError(f"bad released-code option: prior_spike_sharpening={prior_spike_sharpening!r}, "
                             f"kl_slabs={kl_slabs!r}, bernoulli_kl={bernoulli_kl!r}")
        self.alpha = float(alpha)
        # the released code's choices (issue: VSC fidelity); all off = the paper's objective
        self.prior_spike_sharpening, self.kl_slabs, self.bernoulli_kl = float(prior_spike_sharpening), kl_slabs, \
            bernoulli_kl
        self.warmup_ramp_steps, self.sharpness_ramp_steps = int(warmup_ramp_steps), int(sharpness_ramp_steps)
        self.sharpness_start, self.sharpness_end = float(sharpness_start), float(sharpness_end)
        self.phase = "train"

    @property
    def latent_dim(self) -> int:
        return self.posterior_head.latent_dim

    # -- schedules -------------------------------------------------------------------------
    def set_schedule(self, lam: float, sharpness: float) -> None:
        self.posterior_head.set_schedule(lam, sharpness)

    def set_phase(self, phase: str) -> None:
        """``pretrain``: spike pre-training, λ = 0 and c = c_start (eq. 7); ``train``: schedules from step 0."""
        self.phase = phase
        if phase == "pretrain":
            self.set_schedule(0.0, self.sharpness_start)
        elif phase == "train":
            self.before_step(0)

    def before_step(self, step: int) -> None:
        """Alg. 1 / B.2 schedules in the train phase: λ ramps 0 → 1, c ramps c_start → c_end."""
        if self.phase != "train":
            return
        lam = ramp(step, self.warmup_ramp_steps, 0.0, 1.0)
        c = ramp(step, self.sharpness_ramp_steps, self.sharpness_start, self.sharpness_end)
        self.set_schedule(lam, c)

    # -- prior and extra terms ----------------------------------------------------------------
    def prior_distribution(self, x: torch.Tensor | None = None, labels: torch.Tensor | None = None
                           ) -> SelectedPseudoInputPrior:
        if x is None:
            raise ValueError("the VSC prior is selected per observation: prior_distribution needs x")
        gamma_u, loc_u, logvar_u = self.posterior_head.parameters_of(self.encoder(self.prior.pseudo_inputs))
        return SelectedPseudoInputPrior(gamma_u, loc_u, logvar_u, self.prior.weights(self.encoder_view(x)))

    def terms(self, x: torch.Tensor, labels: torch.Tensor | None = None) -> ElboTerms:
        """The ELBO terms of ``models/elbo.py``.  Speed only (same maths, row-wise nets): data and
        pseudo-inputs share one encoder and head pass (a separate pseudo-input pass measured slower at
        2 threads on the MLP and conv benchmark nets: 1.35x vs 1.13x the VAE step on conv)."""
        n = x.shape[0]
        pseudo = self.prior.pseudo_inputs.to(x.dtype)
        view = self.encoder_view(x)  # pseudo-inputs live in the encoder's input space
        feats = self.encoder(torch.cat([view, pseudo]))
        head = self.posterior_head
        log_gamma, mu, logvar = head.raw_parameters(feats)  # one head pass for both (row-wise maths)
        gamma = torch.exp(log_gamma)
        loc, wlogvar = head.warm(mu, logvar)
        q = head.distribution(gamma[:n], loc[:n], wlogvar[:n])  # the warmed slabs: training draws (eq. 7)
        weights = self.prior.weights(view)
        if self.paper_objective:
            p = SelectedPseudoInputPrior(gamma[n:], loc[n:], wlogvar[n:], weights)
            terms = elbo_terms(x, q, p, self.decode, self.likelihood)
        else:
            kmu, klv = (mu, logvar) if self.kl_slabs == "unwarmed" else (loc, wlogvar)
            log_gamma_u = log_gamma[n:]
            if self.prior_spike_sharpening > 0:
                log_gamma_u = sharpen_spikes(log_gamma_u, self.prior_spike_sharpening)
            p = SelectedPseudoInputPrior(torch.exp(log_gamma_u), kmu[n:], klv[n:], weights)
            if self.bernoulli_kl == "code":
                kl = pseudo_input_mixture_kl_code(log_gamma[:n], kmu[:n], klv[:n], log_gamma_u, kmu[n:], klv[n:],
                                                  weights)
            else:
                kl = pseudo_input_mixture_kl(gamma[:n], kmu[:n], klv[:n], p.gamma_u, kmu[n:], klv[n:], weights)
            terms = elbo_terms(x, q, p, self.decode, self.likelihood, kl=kl)
        terms = self.with_extra_terms(x, terms, labels)
        g, w = gamma[:n].detach(), weights.detach()
        terms.deferred_logs.append(lambda: spike_diagnostics(g, w))  # computed when the logs are read
        return terms

    @property
    def paper_objective(self) -> bool:
        """True unless a released-code option changes the objective (see ``VSCParams``)."""
        return self.prior_spike_sharpening == 0 and self.kl_slabs == "warmed" and self.bernoulli_kl == "clamped"

    def extra_terms(self, x: torch.Tensor, terms: ElboTerms, labels: torch.Tensor | None = None
                    ) -> dict[str, torch.Tensor]:
        """Eq. 4's sparsity penalty ``J · KL(Bern ḡ_u* || Bern α)`` per observation."""
        return {"sparsity": sparsity_kl(terms.p.selected_gamma, self.alpha, float(self.latent_dim),
                                        bernoulli=self.bernoulli_kl)}

    @torch.no_grad()
    def spike_probabilities(self, x: torch.Tensor) -> torch.Tensor:
        """γ of q(z|x), ``[B, J]`` (the feature activations of sec. 4.3)."""
        return self.posterior(x).base_dist.gamma

    def load_pretrained(self, state: dict[str, torch.Tensor]) -> None:
        """Take the whole spike-pretrained VSC (nets, pseudo-inputs, selector); λ, c are reset by ``set_phase``."""
        hint = "VSC needs a VSC pretrain model (setups.<name>.pretrain_model of kind vsc)"
        try:
            missing, unexpected = self.load_state_dict(state, strict=False)
        except RuntimeError as exc:  # shape mismatch, e.g. a Gaussian head of 2 J outputs
            raise ValueError(f"{hint}: {str(exc).splitlines()[-1].strip()}") from None
        if missing or unexpected:
            raise ValueError(f"{hint}: missing {missing[:3]}, unexpected {unexpected[:3]}")
