"""priorlab: structured and sparse latent priors for deep generative models."""

import os as _os

# OpenMP threads that busy-wait make small CPU models 10x slower whenever another process
# competes for the cores (measured here: 1027 ms vs 76 ms per MLP step on 2 loaded cores).
# Effective only when priorlab is imported before torch (the stage scripts do); an explicit
# setting in the environment wins.
_os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

__version__ = "0.1.0"


_API = ("model", "load", "Estimator")
"""The public API (:mod:`priorlab.estimator`) and :mod:`priorlab.metrics`, imported on first use:
``import priorlab`` stays light for the stage scripts, which must set the environment above before torch
is imported."""


def __getattr__(name: str):
    import importlib

    if name in _API:
        return getattr(importlib.import_module("priorlab.estimator"), name)
    if name == "metrics":
        return importlib.import_module("priorlab.metrics")
    raise AttributeError(f"module 'priorlab' has no attribute {name!r}")
