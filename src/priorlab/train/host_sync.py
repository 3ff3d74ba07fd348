"""Counting host synchronisations: every place where Python reads a tensor's value.

On a GPU, reading a value on the host (``.item()``, ``float(t)``, ``if t:``, ``.tolist()``,
``.cpu()``, ``.numpy()``, ``torch.unique`` / ``nonzero`` with their data-dependent shapes) waits
until the device has finished all queued work, and so does a blocking copy of host data to the
device (``torch.tensor(values, device=...)``); a training step that does either leaves the GPU
idle while Python catches up.  On the CPU the same calls are cheap, but they are the *same calls*:
counting them on the CPU finds every place where a CUDA run would wait.  :func:`count_host_syncs`
patches those entry points on ``torch.Tensor`` (and the ``torch`` functions with data-dependent
output shapes or host data) for the duration of a ``with`` block and counts the calls, with their
call sites.

Not counted: calls made from ``torch/optim`` (Adam keeps its step counters on the CPU on every
device, so their ``.item()`` never waits on a GPU) and calls nested inside a counted call
(``f"{t}"`` calls ``item`` once: one read).  ``.to(...)`` counts only when it copies a non-CPU
tensor to the CPU; a CPU run has none, which is why device-bound code calls ``.cpu()`` (counted)
where it means a read-back.
"""

from __future__ import annotations

import collections
import contextlib
import os
import sys
import threading
from dataclasses import dataclass, field

import torch

_TENSOR_METHODS = ("item", "tolist", "numpy", "cpu", "__float__", "__int__", "__bool__", "__index__",
                   "__complex__", "__format__", "nonzero", "unique", "unique_consecutive", "masked_select")
"""Methods of ``torch.Tensor`` that hand a value (or a value-dependent shape) to the host."""

_TORCH_FUNCTIONS = ("unique", "unique_consecutive", "nonzero", "masked_select", "is_nonzero", "equal")
"""``torch.*`` functions that do the same."""

_FROM_HOST = ("tensor", "as_tensor")
"""``torch.*`` constructors that copy host data (a number, a list) to the ``device=`` they are given:
on CUDA a blocking copy, which waits for the queued work too.  Counted when the data is not a tensor
and a device is named (any device: on a CPU run the same call names the CPU)."""

_EXEMPT = (os.sep + os.path.join("torch", "optim") + os.sep,)
"""Caller paths whose reads never wait on a device (Adam's CPU step counters)."""


@dataclass
class SyncCounter:
    """The reads seen inside :func:`count_host_syncs`: ``count`` and ``sites`` (``file:line op`` → calls)."""

    count: int = 0
    sites: collections.Counter = field(default_factory=collections.Counter)

    def reset(self) -> None:
        self.count = 0
        self.sites.clear()


_state = threading.local()


def _caller() -> tuple[str, int]:
    """The first frame outside this module and outside torch's Python wrappers of the patched calls."""
    frame = sys._getframe(2)
    while frame is not None and frame.f_code.co_filename in (__file__, torch._tensor.__file__,
                                                              torch.functional.__file__):
        frame = frame.f_back
    return (frame.f_code.co_filename, frame.f_lineno) if frame is not None else ("?", 0)


def _counting(counter: SyncCounter, name: str, original):
    def wrapper(*args, **kwargs):
        if getattr(_state, "inside", False):
            return original(*args, **kwargs)
        if name == "to" and not _is_device_to_host(args, kwargs):
            return original(*args, **kwargs)
        if name in ("torch.tensor", "torch.as_tensor") and (
                kwargs.get("device") is None or (args and isinstance(args[0], torch.Tensor))):
            return original(*args, **kwargs)
        filename, line = _caller()
        if not any(part in filename for part in _EXEMPT):
            counter.count += 1
            counter.sites[f"{os.path.relpath(filename)}:{line} {name}"] += 1
        _state.inside = True
        try:
            return original(*args, **kwargs)
        finally:
            _state.inside = False

    wrapper.__wrapped__ = original
    return wrapper


def _is_device_to_host(args, kwargs) -> bool:
    """``tensor.to(...)`` that copies a non-CPU tensor to the CPU."""
    self, rest = args[0], args[1:]
    if self.device.type == "cpu":
        return False
    target = kwargs.get("device")
    for a in rest:
        if isinstance(a, (str, torch.device)):
            target = a
        elif isinstance(a, torch.Tensor):
            target = a.device
    return target is not None and torch.device(target).type == "cpu"


@contextlib.contextmanager
def count_host_syncs():
    """Count host reads of tensor values inside the block; yields a :class:`SyncCounter`.

    Not thread-safe against other threads patching ``torch.Tensor`` at the same time (tests only).
    """
    counter = SyncCounter()
    saved: list[tuple[object, str, object]] = []
    try:
        for name in (*_TENSOR_METHODS, "to"):
            original = getattr(torch.Tensor, name)
            saved.append((torch.Tensor, name, original))
            setattr(torch.Tensor, name, _counting(counter, name, original))
        for name in (*_TORCH_FUNCTIONS, *_FROM_HOST):
            original = getattr(torch, name)
            saved.append((torch, name, original))
            setattr(torch, name, _counting(counter, f"torch.{name}", original))
        yield counter
    finally:
        for owner, name, original in reversed(saved):
            if owner is torch.Tensor and name in torch.Tensor.__dict__ and \
                    getattr(torch.Tensor.__dict__[name], "__wrapped__", None) is original and \
                    not _defined_on_tensor_class(name):
                delattr(torch.Tensor, name)
            else:
                setattr(owner, name, original)


_ORIGINAL_TENSOR_DICT = frozenset(torch.Tensor.__dict__)


def _defined_on_tensor_class(name: str) -> bool:
    """Whether ``torch.Tensor`` itself (not its C base) defines ``name`` (restore by assignment then)."""
    return name in _ORIGINAL_TENSOR_DICT
