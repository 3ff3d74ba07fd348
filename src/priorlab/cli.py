"""Shared entry point of the stage scripts: parse arguments, validate params, report errors.

A problem the user can fix (:class:`~priorlab.errors.UserError`: invalid params,
corrupt inputs, a diverged run; or a missing input file) prints one
``error: ...`` line and exits with status 2; any other exception is a bug and
shows its full traceback.  The params are validated before any work, and
outputs are written atomically, so a failed stage leaves nothing half-written.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from typing import Callable

from priorlab.config import load_params
from priorlab.errors import UserError
from priorlab.runtime import die_with_runner, keep_freed_buffers

USER_ERRORS = (UserError, FileNotFoundError)


@contextlib.contextmanager
def thread_limits(threads: int):
    """Apply ``params.threads`` (0: leave the libraries' defaults): torch's intra-op pool, and the
    BLAS/OpenMP pools numpy and scikit-learn use.  Stages that never import torch do not pay for it."""
    if threads <= 0:
        yield
        return
    from threadpoolctl import threadpool_limits

    torch = sys.modules.get("torch")  # imported by every stage that trains or encodes
    if torch is not None:
        torch.set_num_threads(threads)
    with threadpool_limits(limits=threads):
        yield


def run_stage(fn: Callable, *args: str, argv: list[str] | None = None) -> int:
    """Run ``fn(params, *parsed args)``; ``args`` name the stage's command-line options.  Applies the
    process settings of :mod:`priorlab.runtime` first."""
    keep_freed_buffers()
    die_with_runner()
    parser = argparse.ArgumentParser(description=(fn.__doc__ or "").strip().splitlines()[0])
    parser.add_argument("--params", default="params.yaml", help="parameter file (default: params.yaml)")
    for name in args:
        parser.add_argument(f"--{name}", required=True)
    ns = parser.parse_args(argv)
    try:
        params = load_params(ns.params)
        with thread_limits(params.threads):
            fn(params, *(getattr(ns, name) for name in args))
    except USER_ERRORS as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0
