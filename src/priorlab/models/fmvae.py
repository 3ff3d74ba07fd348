"""The factorial mixture prior VAE (paper 001): encoder, decoder and q_lambda(xi) trained together.

Paquet, Ghaisas & Tieleman, "A Factorial Mixture Prior for Compositional Deep
Generative Models".  z = [z_1 .. z_I], factor i a K_i-component Gaussian mixture
with Normal-Gamma / Dirichlet hyperpriors, q_lambda(xi) held by
:class:`~priorlab.priors.factorial_mixture.FactorialMixturePrior`.

The ELBO stays the one of :mod:`priorlab.models.elbo`: the prior module returns
:class:`FactorialMixtureLatent`, p(z | q_lambda), for which an analytic
``kl_divergence(Independent(Normal), FactorialMixtureLatent)`` is registered:
KL[z] + KL[r] (lines 4b-4c) at the E-step optimum of gamma (eq. 5), one-hot
where a label clamps it (sec. 2.5).  Its ``log_prob`` is the predictive
Student-t mixture of sec. 2.6 (eq. 10), so the importance-weighted bound
estimates log p_Q(x).  Per mini-batch (sec. 2.4): (1) the E-step inside the
KL; (2) the Adam step on the nets; (3) ``after_step``: the SVI natural-gradient
step on lambda (eq. 13-14) with the batch's encodings from the forward pass
(the paper re-encodes after the Adam step; reusing the codes saves one encoder
pass).  Labels of the semi-supervised factor come with the batch.  Extra loss terms: the global KLs / N (4d-4e), the
optional KL[z] up-weighting (sec. 4.2) and Delta x the cross-entropy of eq. 8.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor
from torch.distributions import Distribution, Independent, Normal, constraints, register_kl

from priorlab.config import FactorialMixtureParams, ParamsError
from priorlab.device import deferred_value_checks
from priorlab.io import pack_flags
from priorlab.models.elbo import ElboTerms
from priorlab.models.posterior import GaussianPosterior
from priorlab.models.protocol import Batch, TrainingSet
from priorlab.models.vae import VAE
from priorlab.nets import build_nets
from priorlab.priors.factorial_mixture import FactorialMixturePrior

class FactorialMixtureLatent(Distribution):
    """p(z | q_lambda(xi)) of one mini-batch, with the clamped labels ``clamp`` [B, I] (-1 = free).

    ``log_prob`` is the predictive density of sec. 2.6 (Student-t mixtures, eq. 10);
    the KL from a diagonal Gaussian q(z|x) is registered analytically below.
    """

    arg_constraints: dict = {}
    support = constraints.real_vector
    has_rsample = False

    def __init__(self, prior: FactorialMixturePrior, clamp: Tensor | None = None):
        self.prior, self.clamp = prior, clamp
        self.last: tuple[Tensor, Tensor, Tensor] | None = None  # (KL[z], KL[r], gamma) of the last local_kl
        width = prior.num_factors * prior.latent_dim
        super().__init__(torch.Size(), torch.Size([width]), validate_args=False)

    def log_prob(self, value: Tensor) -> Tensor:
        return self.prior.predictive().log_prob(value).to(value.dtype)

    def sample(self, sample_shape=torch.Size(), generator: torch.Generator | None = None) -> Tensor:
        if generator is None:
            raise ValueError("sample needs an explicit torch.Generator")
        n = int(math.prod(torch.Size(sample_shape)))
        return self.prior.sample(max(n, 1), generator)[0][:n].reshape(*sample_shape, -1)

    def local_kl(self, mu: Tensor, var: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """(KL[z] [B, I], KL[r] [B, I], gamma [B, I, K]) at the E-step gamma (clamped rows one-hot)."""
        clamp = self.clamp if self.clamp is not None and self.clamp.shape[0] == mu.shape[0] else None
        self.last = self.prior.local_kl(mu, var, clamp)
        return self.last


@register_kl(Independent, FactorialMixtureLatent)
def _kl_gaussian_factorial_mixture(q: Independent, p: FactorialMixtureLatent) -> Tensor:
    """KL[z] + KL[r] of eq. 4b-4c / eq. 11 per observation (appendix C.2-C.3)."""
    if not isinstance(q.base_dist, Normal) or q.reinterpreted_batch_ndims != 1:
        raise NotImplementedError
    kz, kr, _ = p.local_kl(q.base_dist.loc, q.base_dist.scale.pow(2))
    return (kz + kr).sum(-1)


def data_factor_labels(data, name: str, split: str) -> np.ndarray:
    """Integer labels of the data factor ``name``: a ground-truth factor, or ``label`` for the class
    labels of a labelled data set (MNIST)."""
    names = list(data.factor_names)
    labels = data.labels(split)
    if name == "label" and labels is not None:
        return np.asarray(labels, dtype=np.int64)
    if name not in names:
        allowed = names + (["label"] if labels is not None else [])
        raise ParamsError(f"supervised_factor {name!r} is not a factor of data set {data.name!r}; allowed: {allowed}")
    return np.asarray(data.factors(split)[:, names.index(name)], dtype=np.int64)


def labelled_subset(labels: np.ndarray, fraction: float, seed: int) -> np.ndarray:
    """Labels with all but a seeded ``fraction`` of the rows set to -1 (the set Omega of sec. 2.5)."""
    n = len(labels)
    keep = np.zeros(n, dtype=bool)
    keep[np.random.RandomState(seed).permutation(n)[: int(round(fraction * n))]] = True
    return np.where(keep, labels, -1)


class FactorialMixtureVAE(VAE):
    """VAE with the factorial mixture prior; ``spec`` holds the kind's settings."""

    def __init__(self, encoder, posterior, decoder, likelihood, prior: FactorialMixturePrior,
                 spec: FactorialMixtureParams):
        super().__init__(encoder, posterior, decoder, likelihood, prior, beta=spec.beta)
        self.spec = spec
        self.register_buffer("n_data", torch.tensor(0, dtype=torch.long))  # N of the training set
        self.register_buffer("svi_count", torch.tensor(0, dtype=torch.long))  # tau of rho_tau
        self._n_data = self._svi_count = 0  # Python copies of the two, read every step instead of the buffers
        self.phase = "train"
        self._step = 0  # the train step, set by before_step (schedules of delta and the KL[z] weight)
        self._schedule = self._schedule_now()

    # -- schedules ------------------------------------------------------------------------
    @property
    def supervised(self) -> bool:
        return bool(self.spec.supervised_factor) and self.spec.labelled_fraction > 0

    def delta_now(self) -> float:
        """Delta of eq. 8 at the current train step (0 outside joint training or after ``delta_steps``)."""
        s = self.spec
        if self.phase != "train" or not self.supervised or s.delta <= 0:
            return 0.0
        return s.delta if s.delta_steps == 0 or self._step <= s.delta_steps else 0.0

    def kl_z_extra(self) -> float:
        """w - 1 for the KL[z] up-weighting w of the first ``kl_z_weight_steps`` train steps (sec. 4.2)."""
        s = self.spec
        on = self.phase == "train" and s.kl_z_weight_steps > 0 and self._step <= s.kl_z_weight_steps
        return s.kl_z_weight - 1.0 if on else 0.0

    def _schedule_now(self) -> tuple[float, float]:
        """(Delta, w - 1) now: the numbers the forward pass reads (a compiled pass guards on two floats
        that change at most twice, not on the step number, which would recompile it every step)."""
        return self.delta_now(), self.kl_z_extra()

    def set_phase(self, phase: str) -> None:
        self.phase = phase
        self._schedule = self._schedule_now()

    def before_step(self, step: int) -> None:
        self._step = step
        self._schedule = self._schedule_now()

    def forward(self, x: Tensor, labels: Tensor | None = None) -> ElboTerms:
        """:meth:`terms`, after the prior's caches are brought up to date with the last SVI step
        (eagerly: :meth:`FactorialMixturePrior.refresh`), which compiled code then reads as they are."""
        self.prior.refresh(global_kl=True)
        return self.terms(x, labels)

    def compile(self, *args, **kwargs) -> None:
        """``nn.Module.compile`` of the forward pass, and of the prior's updates between steps (SVI, the
        first-order update of section 2.5) and the caches refreshed after them
        (:meth:`FactorialMixturePrior.compile`)."""
        super().compile(*args, **kwargs)
        self.prior.compile(*args, **kwargs)

    # -- the prior of a batch -------------------------------------------------------------
    def clamp_of(self, labels: Tensor | None) -> Tensor | None:
        """[B, I] clamp (factor 0 = the labels, others free) from data-factor labels [B]."""
        if labels is None:
            return None
        free = torch.full((labels.shape[0], self.prior.num_factors - 1), -1, dtype=torch.long, device=labels.device)
        return torch.cat([labels.to(torch.long).unsqueeze(1), free], 1)  # no in-place write: mapped by vmap too

    def prior_distribution(self, x: Tensor | None = None, labels: Tensor | None = None) -> Distribution:
        return FactorialMixtureLatent(self.prior, self.clamp_of(labels))

    def n_train(self, batch: int) -> int:
        return self._n_data if self._n_data > 0 else batch

    def _set_n_data(self, n: int) -> None:
        self.n_data.fill_(int(n))
        self._n_data = int(n)

    def _count_svi_step(self) -> int:
        """tau += 1 (buffer and copy); returns the new tau."""
        self.svi_count += 1
        self._svi_count += 1
        return self._svi_count

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        """Loading ``n_data`` / ``svi_count`` refreshes their Python copies (from the loaded values)."""
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
        for name in ("n_data", "svi_count"):
            if prefix + name in state_dict:
                setattr(self, "_" + name, int(state_dict[prefix + name]))

    def extra_terms(self, x: Tensor, terms: ElboTerms, labels: Tensor | None = None) -> dict[str, Tensor]:
        mu, var = terms.q.mean, terms.q.variance
        kz, _, gamma = self._local_kl(terms, labels)
        B = mu.shape[0]
        out = {"kl_global": self.prior.global_kl_per_point(self.n_train(B)).to(mu.dtype).expand(B)}
        delta, extra = self._schedule
        if extra != 0.0:
            out["kl_z_upweight"] = extra * kz.sum(-1)
        clamp = self.clamp_of(labels)
        if delta > 0 and clamp is not None:
            out["semi_supervised_ce"] = delta * self.prior.cross_entropy(mu, var, clamp)
        return out

    def _local_kl(self, terms: ElboTerms, labels: Tensor | None) -> tuple[Tensor, Tensor, Tensor]:
        """(KL[z], KL[r], gamma) of the batch: those the analytic KL of this forward pass computed."""
        p = terms.p
        if isinstance(p, FactorialMixtureLatent) and p.last is not None and p.last[0].shape[0] == terms.z.shape[0]:
            return p.last
        return self.prior.local_kl(terms.q.mean, terms.q.variance, self.clamp_of(labels))

    def step_carry(self, batch: Batch, terms: ElboTerms) -> dict[str, Tensor]:
        """The VAE's carry and what SVI reads of the step: the codes' means and variances and the
        E-step gamma of this forward pass (eq. 5; clamped rows one-hot), detached."""
        gamma = self._local_kl(terms, batch.labels)[2]
        return {**super().step_carry(batch, terms), "mu": terms.q.mean.detach(), "var": terms.q.variance.detach(),
                "gamma": gamma.detach()}

    def mapped(self):
        """Inside, the prior computes its coefficients from its buffers at every read (no cache):
        :meth:`FactorialMixturePrior.uncached`."""
        return self.prior.uncached()

    # -- SVI (step 3 of sec. 2.4) ---------------------------------------------------------
    @torch.no_grad()
    def update_after_step(self, batch: Batch, carry: dict[str, Tensor], step: int) -> None:
        """SVI step on lambda with the batch's codes; first-order steps for factor 0 while Delta > 0."""
        super().update_after_step(batch, carry, step)
        if self.phase != "train":
            return
        mu, var, gamma = carry["mu"], carry["var"], carry["gamma"]
        clamp = self.clamp_of(batch.labels)
        tau = self._count_svi_step()
        n = self.n_train(mu.shape[0])
        delta = self.delta_now()
        touched = [0] if delta > 0 else []
        free = [i for i in range(self.prior.num_factors) if i not in touched]
        if free:
            self.prior.svi_step(mu, var, gamma, n, step=tau, factors=free, check=False)
        if touched:
            self.prior.first_order_step(mu, var, gamma, n, touched, self.spec.prior_lr, labels=clamp, delta=delta)

    # -- data -------------------------------------------------------------------------------
    def bind_data(self, data) -> None:
        """N of the training set (SVI targets, global KLs per point)."""
        super().bind_data(data)
        self._set_n_data(self._n_data)

    def training_set(self, data) -> TrainingSet:
        """The training rows; semi-supervised models add the seeded labelled subset's labels (-1 = none)."""
        x = data.x("train")
        if not self.supervised:
            return TrainingSet(x, data.prepare)
        labels = data_factor_labels(data, self.spec.supervised_factor, "train")
        k0 = self.prior.num_components[0]
        if labels.max() >= k0:
            raise ParamsError(f"supervised factor {self.spec.supervised_factor!r} has {labels.max() + 1} classes "
                             f"but factor 0 only K = {k0} components")
        labels = labelled_subset(labels, self.spec.labelled_fraction, self.spec.label_seed)
        return TrainingSet(x, data.prepare, torch.as_tensor(labels))

    # -- prior_init ----------------------------------------------------------------------
    @torch.no_grad()
    def encode_codes(self, batches) -> tuple[Tensor, Tensor]:
        mus, variances = [], []
        for xb in batches:
            q = self.posterior(xb)
            mus.append(q.mean)
            variances.append(q.variance)
        return torch.cat(mus), torch.cat(variances)

    @torch.no_grad()
    def init_prior(self, data: TrainingSet, generator: torch.Generator) -> dict[str, float]:
        """Seed q_lambda(xi) from the encoded training set with the networks frozen (sec. 2.4).

        The training set is encoded once; ``init_method`` (k-means++ / random centres, seeded by
        ``generator``) gives hard allocations turned into q(xi) by one closed-form SVI step
        (rho = 1, all N codes).  A supervised factor 0 is then set from its labelled codes alone
        (rho = 1, clamped one-hot gamma).  Then ``prior_init_steps`` iterations of E-step + SVI
        step on random mini-batches of the codes (labels clamped) with rho = (tau0 + tau)^-kappa.
        """
        mu, var = self.encode_codes(data.batches(500))
        n = mu.shape[0]
        self._set_n_data(n)
        labels = data.labels
        if labels is not None and labels.shape[0] != n:
            raise ValueError(f"{labels.shape[0]} training labels for {n} encoded points")
        self.prior.init_from_codes(mu, var, self.spec.init_method, generator, n_data=n)
        clamp = self.clamp_of(labels) if labels is not None else None
        if clamp is not None and bool((clamp[:, 0] >= 0).any()):
            lab = clamp[:, 0] >= 0
            gamma = self.prior.responsibilities(mu[lab], var[lab], clamp[lab])
            self.prior.svi_step(mu[lab], var[lab], gamma, n, rho=1.0, factors=[0])
        if clamp is not None:
            self.prior._labels(clamp, n, "clamp")  # checked once for all rows: the loop draws from them
        batch = min(self.spec.prior_init_batch, n)
        with deferred_value_checks():  # codes (init_from_codes) and clamp checked above: no reads per iteration
            for _ in range(self.spec.prior_init_steps):
                idx = torch.randint(n, (batch,), generator=generator, device=generator.device)
                c = clamp[idx] if clamp is not None else None
                gamma = self.prior.responsibilities(mu[idx], var[idx], c)
                self.prior.svi_step(mu[idx], var[idx], gamma, n, step=self._count_svi_step())
        kz, kr, gamma = self.prior.local_kl(mu, var, clamp)
        used = gamma.sum(0)  # [I, K] expected counts
        return {
            "n_codes": n,
            "steps": self.spec.prior_init_steps,
            "kl_z": float(kz.sum(-1).mean()),
            "kl_r": float(kr.sum(-1).mean()),
            "components_used": [int((u > 0.5).sum()) for u in used],
        }

    def load_pretrained(self, state: dict[str, Tensor]) -> None:
        super().load_pretrained({**state, "n_data": self.n_data, "svi_count": self.svi_count})

    # -- evaluation -----------------------------------------------------------------------
    @torch.no_grad()
    def cluster_assignments(self, x: Tensor, batch_size: int = 500) -> Tensor:
        """argmax_k of the unclamped expected allocation g_ik (eq. 5) per factor: [N, I]."""
        out = []
        for s in range(0, len(x), batch_size):
            q = self.posterior(x[s : s + batch_size])
            out.append(self.prior.responsibilities(q.mean, q.variance).argmax(-1))
        return torch.cat(out)

    @torch.no_grad()
    def evaluation_extras(self, dataset, x_test: Tensor, batch_size: int = 250) -> dict:
        """Sec. 2.7: the predictive bound eq. 11 with its KL[z] / KL[r] split (reconstruction from one
        z sample), components in use, and for a supervised model the held-out accuracy of factor 0."""
        sums = {"log_lik": 0.0, "kl_z": 0.0, "kl_r": 0.0}
        counts = []
        for s in range(0, len(x_test), batch_size):
            xb = x_test[s : s + batch_size]
            q = self.posterior(xb)
            kz, kr, gamma = self.prior.local_kl(q.mean, q.variance)
            sums["log_lik"] += self.likelihood.log_prob(xb, self.decode(q.rsample())).sum().item()
            sums["kl_z"] += kz.sum().item()
            sums["kl_r"] += kr.sum().item()
            counts.append(gamma.sum(0))
        out = {k: v / len(x_test) for k, v in sums.items()}
        out["elbo"] = out["log_lik"] - out["kl_z"] - out["kl_r"]
        usage = torch.stack(counts).sum(0)
        out["num_components"] = list(self.prior.num_components)
        out["components_used"] = [int((u >= max(0.5, 1e-3 * len(x_test))).sum()) for u in usage]
        out["pseudo_counts"] = [[round(float(c), 3) for c in row[:k]]
                                for row, k in zip(self.prior.pseudo_counts(), self.prior.num_components)]
        if self.spec.supervised_factor:
            y = torch.as_tensor(data_factor_labels(dataset, self.spec.supervised_factor, "test")[: len(x_test)])
            k = self.cluster_assignments(x_test, batch_size)[:, 0]
            out["supervised_factor"] = self.spec.supervised_factor
            hit = k == y.to(k.device)
            out["heldout_accuracy"] = float(hit.double().mean())
            out["heldout_correct"] = pack_flags(hit.cpu().numpy())  # per test point: paired with the ceiling's
            classes = max(int(y.max()) + 1, self.prior.num_components[0])
            pairs = y.to(k.device).long() * classes + k.long()  # [label, cluster] counts: which labels merge
            out["heldout_confusion"] = torch.bincount(pairs, minlength=classes * classes).view(classes, classes).tolist()
        return out


def build_fmvae(setup, model: FactorialMixtureParams, obs_shape: tuple[int, ...]) -> FactorialMixtureVAE:
    """The builder of kind ``fmvae`` (``FactorialMixtureParams.BUILDER``): the plain VAE's nets of the setup."""
    if setup.latent_dim % model.num_factors:
        raise ParamsError(f"latent_dim {setup.latent_dim} is not divisible by num_factors {model.num_factors}")
    posterior = GaussianPosterior(setup.latent_dim)
    encoder, decoder, likelihood = build_nets(setup, obs_shape, posterior.params_per_dim)
    prior = FactorialMixturePrior(
        model.components(), setup.latent_dim // model.num_factors, m0=model.m0, s0=model.s0, a0=model.a0,
        b0=model.b0, c0=model.c0, tau0=model.tau0, kappa=model.kappa,
    )
    return FactorialMixtureVAE(encoder, posterior, decoder, likelihood, prior, model)
