"""priorlab: structured and sparse latent priors for deep generative models."""

import os as _os

# OpenMP threads that busy-wait make small CPU models 10x slower whenever another process
# competes for the cores (measured here: 1027 ms vs 76 ms per MLP step on 2 loaded cores).
# Effective only when priorlab is imported before torch (the stage scripts do); an explicit
# setting in the environment wins.
_os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

__version__ = "0.1.0"


_PUBLIC = {"model": "priorlab.estimator", "load": "priorlab.estimator", "Estimator": "priorlab.estimator",
           "metrics": "priorlab.metrics"}
"""The public API (:mod:`priorlab.estimator`), imported on first use: ``import priorlab`` stays light
for the stage scripts, which must set the environment above before torch is imported."""


def __getattr__(name: str):
    if name in _PUBLIC:
        import importlib

        module = importlib.import_module(_PUBLIC[name])
        return module if module.__name__.endswith(name) else getattr(module, name)
    raise AttributeError(f"module 'priorlab' has no attribute {name!r}")
