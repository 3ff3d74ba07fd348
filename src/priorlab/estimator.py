"""priorlab on your own data: any model kind fitted to arrays in one call, on the pipeline's code path.

    import priorlab

    model = priorlab.model("vsc", latent_dim=10, hidden=[256, 128], alpha=0.05)
    model.fit(X, steps=5000, pretrain_steps=2000, seed=0)  # NumPy, torch, pandas, SciPy sparse, AnnData
    codes = model.latent(X)              # posterior means [N, latent_dim]
    model.score(X)                       # ELBO, its terms, importance-weighted log-likelihood (nats / row)
    model.save("vsc.pt")
    again = priorlab.load("vsc.pt")

A model's settings are those of a profile's ``setups:`` entry (nets, latent size, likelihood: the keys
of :class:`~priorlab.config.SetupParams`) and of its ``models:`` entry (the kind's own keys), validated
by the same typed parser as ``params.yaml``.  The nets are sized from the data's shape at ``fit``.
Fitting runs the pipeline's three phases (:mod:`priorlab.phases`): an optional pretraining of the nets
(``pretrain_steps``; VSC pretrains its spikes with lambda = 0, the other kinds train the N(0, I) VAE on
the same nets), the prior's initialisation with the nets frozen, and joint training; the same trainer,
with checkpoints, exact resume and the NaN stop.
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

import priorlab
from priorlab.config import MODEL_PARAMS, ModelParams, OptimParams, ParamsError, SetupParams, VAEParams, VSCParams
from priorlab.config import parse_entry
from priorlab.data.arrays import Encoding, check_support, class_codes, observations
from priorlab.data.store import Dataset, prepare_observations, user_dataset
from priorlab.errors import DataError, UserError
from priorlab.evaluation import representation_function
from priorlab.io import load_torch, save_torch
from priorlab.models import build_model
from priorlab.models.estimates import evaluate_elbo
from priorlab.models.protocol import ElboModel, Generative, Model
from priorlab.phases import fingerprint, fit_phase, new_model, resolve_device, start_model

FORMAT = "priorlab.estimator/1"
SETUP_KEYS = tuple(f.name for f in dataclasses.fields(SetupParams)
                   if f.name not in ("dataset", "pretrain_model", "pretraining", "seed"))
"""The settings of a ``setups:`` entry a model takes (the rest belong to the pipeline's bookkeeping)."""
DEFAULT_LIKELIHOOD = {"image": "bernoulli", "counts": "multinomial"}
"""The likelihood of data of each observation kind when none is given: vectors in [0, 1] take the
Bernoulli too, other vectors a Gaussian with a learned standard deviation per feature."""


def split_settings(kind: str, settings: dict[str, Any]) -> tuple[dict, dict]:
    """``settings`` as (the setup's keys, the model kind's keys); a key of neither is an error naming
    both lists."""
    if kind not in MODEL_PARAMS:
        raise ParamsError(f"model kind {kind!r} is unknown; kinds: {', '.join(MODEL_PARAMS)}")
    model_keys = {f.name for f in dataclasses.fields(MODEL_PARAMS[kind])} - {"kind"}
    unknown = sorted(set(settings) - set(SETUP_KEYS) - model_keys)
    if unknown:
        raise ParamsError(f"{kind}: unknown setting {unknown[0]!r}; the nets take {', '.join(SETUP_KEYS)}; "
                          f"kind {kind} takes {', '.join(sorted(model_keys))}")
    return ({k: v for k, v in settings.items() if k in SETUP_KEYS},
            {k: v for k, v in settings.items() if k not in SETUP_KEYS})


def default_likelihood(x: np.ndarray, encoding: Encoding) -> dict[str, Any]:
    """The likelihood settings for data ``x`` when the user gave none (see :data:`DEFAULT_LIKELIHOOD`)."""
    if encoding.kind in DEFAULT_LIKELIHOOD:
        return {"likelihood": DEFAULT_LIKELIHOOD[encoding.kind]}
    if x.min() >= 0 and x.max() <= 1:
        return {"likelihood": "bernoulli"}
    return {"likelihood": "gaussian", "learn_obs_std": True}


class Estimator:
    """A model of one kind on the user's data: ``fit`` / ``latent`` / ``reconstruct`` / ``score`` /
    ``save``, in the manner of scikit-learn.  Build it with :func:`priorlab.model`."""

    def __init__(self, kind: str, **settings: Any):
        setup_raw, model_raw = split_settings(kind, settings)
        if "latent_dim" not in setup_raw:
            raise ParamsError(f"{kind}: latent_dim is required (the number of latent dimensions)")
        self.kind = kind
        self.settings = dict(settings)
        # checked now, so that a bad setting fails before any data is read; the likelihood may follow the data
        self.setup: SetupParams = parse_entry(SetupParams, {"dataset": "user", **setup_raw}, kind)
        self.spec: ModelParams = parse_entry(MODEL_PARAMS[kind], {"kind": kind, **model_raw}, kind)
        self.encoding: Encoding | None = None
        self.module: Model | None = None
        """The fitted torch model (:class:`priorlab.models.protocol.Model`); None before ``fit``."""
        self.history: dict[str, Any] = {}
        """What each phase of the last ``fit`` logged, and its settings."""
        self.validation: dict[str, float] | None = None
        """:meth:`score` on the held-out share of the last ``fit`` (None without one)."""

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={v!r}" for k, v in self.settings.items())
        return f"priorlab.model({self.kind!r}{', ' if shown else ''}{shown}){'' if self.module is None else '  # fitted'}"

    # ------------------------------------------------------------------------------- fitting
    def fit(self, X, y=None, *, layer: str | None = None, steps: int = 2000, batch_size: int = 100, lr: float = 1e-3,
            pretrain_steps: int = 0, seed: int = 0, validation: float = 0.1, device: str = "auto",
            checkpoint_dir: str | Path | None = None, progress: bool = True, **optim: Any) -> Estimator:
        """Train on the rows of ``X`` (``y``: optional integer or string class labels, for the kinds
        that train on labels).  A share ``validation`` of the rows, drawn with ``seed``, is held out
        and scored afterwards (:attr:`validation`).  ``pretrain_steps`` > 0 pretrains the nets first
        (as the pipeline's pretrain stage); 0 starts every kind from fresh weights.  ``optim``: further
        keys of :class:`~priorlab.config.OptimParams` (``kl_warmup_steps``, ``lr_milestones``, ...).

        ``checkpoint_dir``: where the phases checkpoint; a ``fit`` with the same data and settings
        resumes there after an interruption (without it, a temporary folder).  Returns ``self``."""
        x = observations(X, layer)
        encoding = Encoding.of(x)
        labels = None if y is None else class_codes(y, len(x), "y")[0]
        data = user_dataset(x, encoding, labels=labels, validation=validation, seed=seed)
        n_train = len(data.arrays["x_train"])
        if batch_size > n_train:
            raise ParamsError(f"batch_size {batch_size} is more than the {n_train} training rows; at most {n_train}")
        setup_raw, _ = split_settings(self.kind, self.settings)
        if "likelihood" not in setup_raw:
            setup_raw = {**default_likelihood(x, encoding), **setup_raw}
        setup = parse_entry(SetupParams, {"dataset": "user", **setup_raw}, self.kind)
        check_support(x, encoding, setup.likelihood)
        opt = parse_entry(OptimParams, {"steps": steps, "batch_size": batch_size, "lr": lr, "seed": seed, **optim},
                          "fit")
        if pretrain_steps < 0:
            raise ParamsError(f"pretrain_steps must be >= 0, got {pretrain_steps}")
        pretraining = pretrain_steps > 0 and not self.spec.fitted_by_em
        spec = self.spec if pretraining else dataclasses.replace(self.spec, warm_start="scratch")
        dev = resolve_device(device)
        owned = checkpoint_dir is None
        folder = Path(tempfile.mkdtemp(prefix="priorlab-fit-")) if owned else Path(checkpoint_dir)
        base = fingerprint(FORMAT, setup.record(), spec.fields(), data.arrays["x_train"].shape,
                           _digest(data.arrays["x_train"]), None if labels is None else _digest(labels))
        history: dict[str, Any] = {"settings": {"setup": setup.record(), "model": spec.record(), "train": dataclasses.asdict(opt),
                                                "pretrain_steps": pretrain_steps, "n_train": n_train,
                                                "n_validation": len(data.arrays["x_test"]), "device": str(dev)}}
        try:
            pre = None
            if pretraining:
                pre, history["pretrain"] = self._pretrain(setup, spec, data, dataclasses.replace(opt, steps=pretrain_steps),
                                                          folder, base, dev, progress)
            try:
                model, history["prior_init"] = start_model(setup, spec, data, pre, seed, dev)
            except ValueError as exc:
                raise ParamsError(f"{self.kind}: {exc}") from None
            model.set_phase("train")
            fp = fingerprint("train", base, dataclasses.asdict(opt), (pre or {}).get("meta", {}).get("fingerprint"))
            history["train"] = fit_phase(model, data, opt, checkpoint=folder / "train.pt", live_dir=None, fingerprint=fp,
                                         device=dev, desc=f"train {self.kind}", progress=progress)
            (folder / "pretrain.done.pt").unlink(missing_ok=True)
        finally:
            if owned:
                shutil.rmtree(folder, ignore_errors=True)
        model.eval()
        self.setup, self.spec, self.encoding, self.module, self.history = setup, spec, encoding, model, history
        self.validation = self.score(data.arrays["x_test"]) if len(data.arrays["x_test"]) and self.has_elbo else None
        return self

    def _pretrain(self, setup: SetupParams, spec: ModelParams, data: Dataset, opt: OptimParams, folder: Path,
                  base: str, device: torch.device, progress: bool) -> tuple[dict, dict]:
        """The pretrain phase: VSC its own spikes (lambda = 0), every other kind the N(0, I) VAE on the
        same nets (paper 001, sec. 2.4).  A finished pretraining is kept in ``folder`` until ``fit`` ends,
        so an interrupted ``fit`` resumes after it."""
        pre_spec = spec if isinstance(spec, VSCParams) else VAEParams(kind="vae")
        fp = fingerprint("pretrain", base, pre_spec.fields(), dataclasses.asdict(opt))
        done = folder / "pretrain.done.pt"
        if done.is_file():
            blob = load_torch(done)
            if blob["meta"]["fingerprint"] == fp:
                return blob, blob["meta"]["logs"]
        model = new_model(setup, pre_spec, data.obs_shape, opt.seed)
        model.set_phase("pretrain")
        logs = fit_phase(model, data, opt, checkpoint=folder / "pretrain.pt", live_dir=None, fingerprint=fp,
                         device=device, desc=f"pretrain {pre_spec.kind}", progress=progress)
        blob = {"state_dict": model.state_dict(), "meta": {"fingerprint": fp, "logs": logs}}
        save_torch(done, blob)
        return blob, logs

    # ------------------------------------------------------------------------------- using a fitted model
    @property
    def has_elbo(self) -> bool:
        """True for the kinds with q(z|x), p(z) and a likelihood (every VAE kind; not PPCA or sparse coding)."""
        return isinstance(self._fitted(), ElboModel)

    def _fitted(self) -> Model:
        if self.module is None:
            raise UserError(f"priorlab.model({self.kind!r}) is not fitted yet: call fit(X) first")
        return self.module

    def prepare(self, X, layer: str | None = None) -> torch.Tensor:
        """``X`` as the fitted model's input: checked against the rows it was fitted on, float32, images in [0, 1]."""
        self._fitted()
        x = observations(X, layer)
        self.encoding.check(x)
        return prepare_observations(torch.as_tensor(x), "none", self.encoding.pixel_max)

    def latent(self, X, *, layer: str | None = None, kind: str = "mean", seed: int = 0,
               batch_size: int = 500) -> np.ndarray:
        """The codes of ``X``, ``[N, latent_dim]``: posterior means (``kind="sample"``: one posterior draw
        per row, seeded) — what the pipeline's metrics score."""
        if kind not in ("mean", "sample"):
            raise ParamsError(f"kind must be 'mean' or 'sample', got {kind!r}")
        x = self.prepare(X, layer)
        return representation_function(self._fitted(), lambda b: b, batch_size, kind, seed)(x)

    @torch.no_grad()
    def reconstruct(self, X, *, layer: str | None = None) -> np.ndarray:
        """The mean observation decoded from each row's code, in the model's input scale (images in
        [0, 1]; counts as the likelihood's probabilities)."""
        model = self._fitted()
        if not isinstance(model, Generative):
            raise UserError(f"kind {self.kind} has no decoder to reconstruct with")
        return model.reconstruct(self.prepare(X, layer)).double().numpy()

    def score(self, X, *, layer: str | None = None, iw_samples: int = 100, batch_size: int = 250,
              seed: int = 0) -> dict[str, float]:
        """Per-row averages on ``X`` (nats): ``elbo``, its ``log_lik`` and ``kl`` terms, and the
        importance-weighted log-likelihood bound L_k with ``iw_samples`` samples (Burda et al. 2016)."""
        model = self._fitted()
        if not isinstance(model, ElboModel):
            raise UserError(f"kind {self.kind} has no ELBO to score")
        x = self.prepare(X, layer)
        state = torch.get_rng_state()
        torch.manual_seed(seed)
        try:
            return evaluate_elbo(model, x, iw_samples, batch_size)
        finally:
            torch.set_rng_state(state)

    @torch.no_grad()
    def spikes(self, X, *, layer: str | None = None) -> np.ndarray:
        """VSC only: each row's posterior spike probabilities gamma ``[N, latent_dim]`` (paper 002, eq. 5)."""
        from priorlab.models.vsc import VSC  # lazy: +2 modules, ~13 ms at import priorlab.estimator

        model = self._fitted()
        if not isinstance(model, VSC):
            raise UserError(f"spikes: kind {self.kind} has no spike-and-slab posterior (VSC has)")
        return model.spike_probabilities(self.prepare(X, layer)).double().numpy()

    def masks(self) -> np.ndarray:
        """The sparse VAE only: the decoder mask's inclusion probabilities p*_jk ``[features, latent_dim]``
        (paper 003, eq. 4): which latents each feature depends on."""
        from priorlab.models.sparse_vae import SparseVAE  # lazy: +1 module, ~7 ms at import priorlab.estimator

        model = self._fitted()
        if not isinstance(model, SparseVAE):
            raise UserError(f"masks: kind {self.kind} has no decoder masks (the sparse VAE has)")
        return model.ssl.p_star.detach().double().numpy()

    # ------------------------------------------------------------------------------- files
    def save(self, path: str | Path) -> Path:
        """The fitted model with its settings, data encoding and history, in one file (atomic)."""
        model = self._fitted()
        save_torch(path, {"format": FORMAT, "priorlab": priorlab.__version__, "kind": self.kind,
                          "settings": self.settings, "setup": dataclasses.asdict(self.setup),
                          "model": dataclasses.asdict(self.spec), "encoding": self.encoding.record(),
                          "history": self.history, "validation": self.validation, "state_dict": model.state_dict()})
        return Path(path)


def model(kind: str, **settings: Any) -> Estimator:
    """A model of ``kind`` (``vae``, ``vsc``, ``fmvae``, ``beta_tcvae``, ``factor_vae``, ``sparse_vae``,
    ``ppca``, ``mssc``, ``linear_ssc``) with the settings of a setup (``latent_dim``, required;
    ``hidden``, ``encoder``, ``likelihood``, ...) and of its kind (``beta``, ``alpha``, ``prior``, ...)."""
    return Estimator(kind, **settings)


def load(path: str | Path) -> Estimator:
    """A model saved by :meth:`Estimator.save`."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: file not found")
    blob = load_torch(path)
    if not isinstance(blob, dict) or blob.get("format") != FORMAT:
        raise DataError(f"{path}: not a model saved by priorlab's Estimator.save (format {FORMAT})")
    est = Estimator(blob["kind"], **blob["settings"])
    est.setup = parse_entry(SetupParams, blob["setup"], blob["kind"])
    est.spec = parse_entry(MODEL_PARAMS[blob["kind"]], blob["model"], blob["kind"])
    enc = blob["encoding"]
    est.encoding = Encoding(enc["kind"], tuple(enc["shape"]), enc["pixel_max"])
    est.module = build_model(est.setup, est.spec, est.encoding.shape)  # (the weights come next: no seed needed)
    est.module.load_state_dict(blob["state_dict"])
    est.module.eval()
    est.history, est.validation = blob["history"], blob["validation"]
    return est


def _digest(a: np.ndarray) -> str:
    import hashlib

    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()[:16]
