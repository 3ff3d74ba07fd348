"""Protocol adapter of spike-and-slab sparse coding (paper 000): model kinds ``mssc`` (max rule,
eq. 10) and ``linear_ssc`` (sum rule, the baseline).

The math lives in :mod:`priorlab.models.sparse_coding`; this class keeps Θ = (W, σ², π, μ_pr, σ²_pr),
the E-step sampler's generator state and an "initialised" flag in buffers, so a checkpoint of the
trainer resumes bit-identically.  :meth:`train_step` is one EM iteration (preselection + Gibbs
E-step at the annealed temperature of ``step``, M-step eq. 11) on the minibatch; no optimiser.
W is initialised from the training data in :meth:`bind_data` (once; a loaded state wins).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

import priorlab.models.sparse_coding as sc
from priorlab.models.protocol import Batch, Generative, Model, NonFiniteLoss, StepContext


class SparseCodingModel(Model, Generative):
    """Spike-and-slab sparse coding with ``latent_dim`` = H latents over flat observations."""

    evaluation_notes = ("Sparse coding (paper 000): represent = posterior mean of s from K Gibbs samples at T = 1 "
                        "(sampler seeded with the model seed); log_joint = mean over samples of log p(y, s) "
                        "w.r.t. δ0 + Lebesgue per latent (not a marginal likelihood).")

    def __init__(self, obs_shape: tuple[int, ...], latent_dim: int, rule: str, *, n_candidates: int = 0,
                 n_chains: int = 2, samples_per_chain: int = 5, burn_in: int = 10, thin: int = 1,
                 gibbs_init: str = "prior", anneal_start: float = 4.0, anneal_iters: int = 25,
                 safeguard: bool = True, nonnegative: bool = False, init_noise: float = 0.25,
                 init_mu_pr: float = 1.0, init_var_pr: float = 1.0, seed: int | None = None):
        super().__init__()
        self.obs_shape, self.rule = tuple(obs_shape), sc._check_rule(rule)
        if seed is None:  # like a net's weights: from torch's global RNG (the pipeline seeds it per run)
            seed = int(torch.randint(0, 2**62, ()))
        D, H = math.prod(self.obs_shape), int(latent_dim)
        self.init_kwargs = dict(mu_pr=init_mu_pr, var_pr=init_var_pr, noise=init_noise)
        # the core object validates the settings and runs the EM iteration on the buffers' Θ
        placeholder = sc.SparseCodingParams(torch.ones(D, H, dtype=torch.float64), 1.0, 0.5, init_mu_pr, init_var_pr)
        self.core = sc.SpikeSlabSparseCoding(
            placeholder, rule, n_candidates=n_candidates or None, n_chains=n_chains, burn_in=burn_in,
            samples_per_chain=samples_per_chain, thin=thin, init=gibbs_init, anneal_start=anneal_start,
            anneal_iters=anneal_iters, safeguard=safeguard, nonnegative=nonnegative)
        for name, value in placeholder.as_dict().items():
            self.register_buffer(name, value.clone())
        self.register_buffer("seed", torch.tensor(int(seed), dtype=torch.long))  # W init and represent's sampler
        self.register_buffer("rng_state", torch.Generator().manual_seed(int(seed)).get_state())  # the E-step's
        self.register_buffer("initialised", torch.zeros((), dtype=torch.bool))

    # -- Θ <-> buffers ---------------------------------------------------------------------------
    @property
    def theta(self) -> sc.SparseCodingParams:
        return sc.SparseCodingParams(*(getattr(self, k).clone() for k in sc._STATE_KEYS))

    def _store(self, theta: sc.SparseCodingParams) -> None:
        for name, value in theta.as_dict().items():
            getattr(self, name).copy_(value)

    def _flat(self, x: Tensor) -> Tensor:
        return x.reshape(x.shape[0], -1).to(torch.float64)

    def bind_data(self, data) -> None:
        """Initialise Θ from the training rows (:func:`~priorlab.models.sparse_coding.init_params`,
        seeded by ``seed``) unless already initialised or loaded."""
        if bool(self.initialised):
            return
        y = self._flat(data.prepare(data.x("train")))
        self._store(sc.init_params(y, self.W.shape[1], torch.Generator().manual_seed(int(self.seed)), **self.init_kwargs))
        self.initialised.fill_(True)

    def start_at(self, theta: sc.SparseCodingParams) -> None:
        """Start EM at ``theta`` instead of the data-driven initialisation of :meth:`bind_data` (e.g. at
        the generating parameters, to test whether the truth is a fixed point of EM)."""
        self._store(sc.SparseCodingParams(*(v.to(self.W.dtype) for v in theta.as_dict().values())))
        self.initialised.fill_(True)

    # -- EM ----------------------------------------------------------------------------------------
    def param_groups(self, lr: float) -> list[dict]:
        return []  # fitted by EM, no optimiser

    @torch.no_grad()
    def train_step(self, batch: Batch, step: int, ctx: StepContext) -> dict[str, float]:
        if not bool(self.initialised):
            raise RuntimeError("SparseCodingModel: bind_data must initialise W before training")
        generator = torch.Generator()
        generator.set_state(self.rng_state)
        self.core.params, self.core.iteration = self.theta, int(step)
        logs = self.core.em_step(self._flat(batch.x), generator)
        if not math.isfinite(logs["log_joint"]) or not torch.isfinite(self.core.params.W).all():
            raise NonFiniteLoss(logs["log_joint"])
        self._store(self.core.params)
        self.rng_state.copy_(generator.get_state())
        logs.pop("seconds")  # wall time: not a deterministic curve
        return {"loss": -logs["log_joint"], **logs}

    # -- representation and decoding -----------------------------------------------------------
    @torch.no_grad()
    def posterior_samples(self, x: Tensor) -> Tensor:
        """K samples [B, K, H] of s | y at T = 1, from a generator seeded with ``seed`` (deterministic)."""
        self.core.params = self.theta
        return self.core.infer(self._flat(x), torch.Generator().manual_seed(int(self.seed)))[1]

    @torch.no_grad()
    def represent(self, x: Tensor) -> Tensor:
        """Posterior mean of s (average of the K samples)."""
        return self.posterior_samples(x).mean(1).to(x.dtype)

    @torch.no_grad()
    def decode_mean(self, z: Tensor) -> Tensor:
        """ȳ(s) = max_h W_dh s_h (max rule) or W s (eq. 10) for codes ``z`` [B, H]."""
        y = sc.mean_output(z.to(self.W.dtype), self.W, self.rule)
        return y.reshape(z.shape[0], *self.obs_shape).float()

    @torch.no_grad()
    def reconstruct(self, x: Tensor) -> Tensor:
        """Mean of ȳ(s) over the posterior samples (under the max rule not ȳ of the posterior mean)."""
        samples = self.posterior_samples(x)
        y = sc.mean_output(samples, self.W, self.rule).mean(1)
        return y.reshape(x.shape[0], *self.obs_shape).to(x.dtype)

    def evaluation_extras(self, dataset, x_test: Tensor, batch_size: int) -> dict:
        joint, active = [], []
        theta = self.theta
        for start in range(0, len(x_test), batch_size):
            y = self._flat(x_test[start : start + batch_size])
            s = self.posterior_samples(y)
            joint.append(sc.log_joint(y, s, theta, self.rule).mean(1))
            active.append((s != 0).sum(-1).double().mean(1))
        return {"test_log_joint": float(torch.cat(joint).mean()), "active_latents": float(torch.cat(active).mean()),
                "sigma2": float(self.sigma2), "pi": float(self.pi), "mu_pr": float(self.mu_pr),
                "var_pr": float(self.var_pr)}
