"""Device placement and host reads: what lets a stage keep its tensors on the GPU.

* :func:`model_device` — where a model lives (its first parameter or buffer).
* :func:`fits_on` — whether a tensor may be copied to a device whole (free memory on CUDA).
* :func:`value_checks_enabled` / :func:`deferred_value_checks` — the data-dependent argument
  checks of the models and priors (``var > 0``, label ranges, positive natural parameters, ...)
  each read a value back to the host, which on a GPU waits for all queued work.  Library calls
  check by default; the training loop and the prior-initialisation iterations run inside
  :func:`deferred_value_checks`, where those checks are skipped: inputs there come from the
  model's own forward pass, and a value that would have failed a check turns the loss or the
  prior non-finite, which the trainer's device-side non-finite record reports with its step.
* :func:`float_like` — a Python number rounded as a tensor of a dtype would store it, so that a
  model can keep a Python copy of a scalar buffer (read every step) without reading the buffer.
"""

from __future__ import annotations

import contextlib
import threading

import numpy as np
import torch

_local = threading.local()


def model_device(model: torch.nn.Module) -> torch.device:
    """The device of ``model``'s first parameter, else of its first buffer, else the CPU."""
    for t in model.parameters():
        return t.device
    for t in model.buffers():
        return t.device
    return torch.device("cpu")


def same_device(a: torch.device | str, b: torch.device | str) -> bool:
    """Whether two device names mean the same device (``cuda`` is the current CUDA device)."""
    a, b = torch.device(a), torch.device(b)
    if a.type != b.type:
        return False
    if a.type != "cuda" or a.index == b.index:
        return a.index == b.index or a.type == "cpu"
    current = torch.cuda.current_device()
    return (current if a.index is None else a.index) == (current if b.index is None else b.index)


def fits_on(device: torch.device | str, nbytes: int, fraction: float = 0.5) -> bool:
    """Whether ``nbytes`` may be placed on ``device`` whole: always on the CPU; on CUDA when they take
    at most ``fraction`` of the memory free now (the rest is left to the model and its activations)."""
    device = torch.device(device)
    if device.type == "cpu":
        return True
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return nbytes <= fraction * free
    return True


def value_checks_enabled() -> bool:
    """False inside :func:`deferred_value_checks` (in this thread)."""
    return not getattr(_local, "deferred", 0)


@contextlib.contextmanager
def deferred_value_checks():
    """Skip the data-dependent argument checks (host reads) inside the block; nests."""
    _local.deferred = getattr(_local, "deferred", 0) + 1
    try:
        yield
    finally:
        _local.deferred -= 1


_NUMPY_FLOATS = {torch.float64: np.float64, torch.float32: np.float32, torch.float16: np.float16}


def float_like(value: float, dtype: torch.dtype) -> float:
    """``float(torch.tensor(value, dtype=dtype))`` without creating (or reading) a tensor."""
    if dtype in _NUMPY_FLOATS:
        return float(_NUMPY_FLOATS[dtype](value))
    return float(torch.tensor(value, dtype=dtype).tolist())  # e.g. bfloat16: a CPU tensor, no device
