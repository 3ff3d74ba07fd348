"""Small shared fixtures for the tests (tiny models and data)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import torch

from priorlab.config import SetupParams, VAEParams
from priorlab.models import build_model
from priorlab.models.protocol import TrainingSet


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def tiny_model(latent_dim: int = 3, obs_shape=(1, 8, 8), beta: float = 1.0, seed: int = 0):
    torch.manual_seed(seed)
    setup = SetupParams(dataset="x", latent_dim=latent_dim, hidden=[16])
    return build_model(setup, VAEParams(kind="vae", beta=beta), obs_shape)


def tiny_data(n: int = 200, obs_shape=(1, 8, 8), seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(n, *obs_shape, generator=g) > 0.7).float()


def as_training_set(x: torch.Tensor, labels: torch.Tensor | None = None) -> TrainingSet:
    """Prepared rows as the trainer's training set (no conversion)."""
    return TrainingSet(x, lambda b: b, labels)


def crash_at(model, step: int) -> None:
    """Make ``model.train_step`` raise KeyboardInterrupt at ``step`` (a killed run, for resume tests)."""
    original = model.train_step

    def train_step(batch, s, ctx):
        if s == step:
            raise KeyboardInterrupt
        return original(batch, s, ctx)

    model.train_step = train_step


def run_without_dvc(module: str, argv: list[str], timeout: float = 600) -> subprocess.CompletedProcess:
    """``python -m module argv`` from the project's root in a process where importing dvc or dvclive
    fails, as on the GPU machine (torch, numpy and the carried wheels only)."""
    code = ("import importlib.abc, importlib.machinery, runpy, sys\n"
            "class Missing(importlib.abc.Loader):  # as if not installed: importing raises\n"
            "    def create_module(self, spec):\n"
            "        raise ModuleNotFoundError(f'No module named {spec.name!r}', name=spec.name)\n"
            "    def exec_module(self, module):\n"
            "        pass\n"
            "class Block(importlib.abc.MetaPathFinder):\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name.split('.')[0] in ('dvc', 'dvclive'):\n"
            "            return importlib.machinery.ModuleSpec(name, Missing())\n"
            "sys.meta_path.insert(0, Block())\n"
            f"sys.argv = [{module!r}, *{argv!r}]\n"
            f"runpy.run_module({module!r}, run_name='__main__', alter_sys=True)\n")
    root = Path(__file__).resolve().parents[1]
    return subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=timeout)
