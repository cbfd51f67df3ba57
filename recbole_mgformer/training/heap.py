"""Keep freed memory in the process's heap, so a training step stops paying page faults for its large tensors.

glibc's ``malloc`` serves a block above its mmap threshold (at most 32 MiB by default) with a fresh ``mmap`` and
returns it to the system on ``free``; the next step's tensor of the same size is mapped again and each of its 4 KiB
pages faults on first touch. In a virtual machine a fault costs microseconds: a fresh 40 MB product took about
19 ms against about 3 ms into reused memory. A step that makes many such tensors pays it many times: MGFormer's
full-item softmax on Gowalla (41k items: each (items, w) table, its normalised copy, its bf16 copy and its
gradient is 21 to 42 MB) spent as much time in the kernel as in its own arithmetic
(results/performance/heap_step-gowalla.md). Raising the mmap and trim thresholds makes ``malloc`` keep freed blocks
and reuse them: after the first steps the heap holds the step's peak and stops faulting. It changes no number,
only where memory comes from, for the whole process; the cost is that the process would keep its peak heap until it
exits. Every run applies it (``keep_freed_memory: False`` leaves glibc's defaults), as it flushes subnormals.

The peak that matters is the step's, not the model build's: a build can make far more temporaries than a step (the
filter residual's BSPM filters every user and item of Gowalla in blocks of 168 MB tensors: the process held 15 GB
after it, two such runs more than the machine's 23 GB). So once the model is built, :func:`release_freed_memory`
gives the free heap back to the system, and the heap then grows to the step's peak and keeps it.
"""

import ctypes
import ctypes.util

from recbole_mgformer.config.input_checks import runner_flag

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters (malloc.h)
LARGEST = 2**31 - 1  # mallopt takes an int


def keep_freed_memory(config=None):
    """Make glibc's malloc keep and reuse freed blocks of any size, unless ``config`` says ``keep_freed_memory:
    False``; True where it took (glibc), else False (another C library, or turned off)."""
    if not runner_flag(config, "keep_freed_memory"):
        return False
    name = ctypes.util.find_library("c")
    try:
        mallopt = ctypes.CDLL(name).mallopt if name else None
    except (OSError, AttributeError):  # no C library by that name, or one without mallopt (musl, macOS)
        mallopt = None
    if mallopt is None:
        return False
    return bool(mallopt(M_MMAP_THRESHOLD, LARGEST)) and bool(mallopt(M_TRIM_THRESHOLD, LARGEST))


def release_freed_memory():
    """Return the heap's free memory to the system once (glibc's ``malloc_trim(0)``, which also releases free pages
    inside the heap, whatever the trim threshold); True where memory went back. Changes no number."""
    name = ctypes.util.find_library("c")
    try:
        trim = ctypes.CDLL(name).malloc_trim if name else None
    except (OSError, AttributeError):  # not glibc
        trim = None
    return bool(trim(0)) if trim is not None else False
