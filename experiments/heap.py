"""Keep freed memory in the process's heap, so a training step stops paying page faults for its large tensors.

glibc's ``malloc`` serves a block above its mmap threshold (at most 32 MiB by default) with a fresh ``mmap`` and
returns it to the system on ``free``; the next step's tensor of the same size is mapped again and each of its 4 KiB
pages faults on first touch. A sequential model's step at RecBole's defaults (2048 rows of 50 items) makes dozens
of such tensors (26 to 105 MB), and in a virtual machine a fault costs microseconds: a fresh 40 MB product took
about 19 ms here against about 3 ms into reused memory, and the kernel's time (``sys``) matched the step's own.
Raising the mmap and trim thresholds makes ``malloc`` keep freed blocks and reuse them: after the first steps the
heap holds the step's peak and stops faulting (a 40 MB product faulted its pages in ~5 of its first 12 repeats
here, then no more). It changes no number, only where memory comes from, for the whole
process; the cost is that the process keeps its peak heap until it exits.

Only ``experiments/sequential_step.py`` applies it (its ``kept`` setting): it sped up RecBole's SASRec step, not this
project's models (results/performance/sequential-step.md), and no entry point of the package applies it.
"""

import ctypes
import ctypes.util

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters (malloc.h)
LARGEST = 2**31 - 1  # mallopt takes an int


def keep_freed_memory():
    """Make glibc's malloc keep and reuse freed blocks of any size; True where it took (glibc), else False."""
    name = ctypes.util.find_library("c")
    try:
        mallopt = ctypes.CDLL(name).mallopt if name else None
    except (OSError, AttributeError):  # no C library by that name, or one without mallopt (musl, macOS)
        mallopt = None
    if mallopt is None:
        return False
    return bool(mallopt(M_MMAP_THRESHOLD, LARGEST)) and bool(mallopt(M_TRIM_THRESHOLD, LARGEST))
