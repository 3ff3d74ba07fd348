"""Process-wide settings a stage applies when it starts (:func:`priorlab.cli.run_stage`), not at import:
importing priorlab as a library changes nothing in the host process but ``OMP_WAIT_POLICY``'s default
(set in ``priorlab/__init__``, as it must be before torch is imported)."""

from __future__ import annotations

import ctypes
import os
import sys

_applied: bool | None = None


def keep_freed_buffers() -> bool:
    """glibc only: serve large allocations from the heap and keep freed memory (mallopt
    M_MMAP_THRESHOLD / M_TRIM_THRESHOLD = 1 GiB).  By default every autograd buffer above
    128 KiB is mmap'ed and unmapped again, so each training step re-faults its pages (measured
    here: 20-35 % of a CPU step).  Peak memory is unchanged; freed memory is kept for reuse.
    ``PRIORLAB_MALLOC_TUNING=0`` turns it off.  Returns whether the setting is in effect; applied once
    per process."""
    global _applied
    if _applied is None:
        _applied = _mallopt()
    return _applied


def _mallopt() -> bool:
    if os.environ.get("PRIORLAB_MALLOC_TUNING", "1") == "0" or not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:  # not glibc (musl, ...)
        return False
    m_trim_threshold, m_mmap_threshold = -1, -3
    return bool(libc.mallopt(m_mmap_threshold, 1 << 30)) and bool(libc.mallopt(m_trim_threshold, 1 << 30))
