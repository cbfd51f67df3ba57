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

The peak to keep is the training step's, not the model build's: a build can make far more temporaries than a step
(MGFormer's filter residual has BSPM filter every user and item of Gowalla in blocks of 168 MB tensors; under a kept
heap the process held 15 GB after it, against 9.5 GB of live tensors, and two such runs need more than the
machine's 23 GB). So a run keeps freed memory from the end of the model's build only: before its data and its
build, :func:`return_freed_memory` sets glibc's thresholds back (a process may run several runs) and gives the free
heap back to the system, and again after the build.
"""

import ctypes
import ctypes.util

from recbole_mgformer.config.input_checks import runner_flag

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters (malloc.h)
LARGEST = 2**31 - 1  # mallopt takes an int
RETURNED_MMAP_THRESHOLD = 32 * 2**20  # glibc's DEFAULT_MMAP_THRESHOLD_MAX on 64-bit: its dynamic threshold's ceiling


def keep_freed_memory(config=None):
    """Make glibc's malloc keep and reuse freed blocks of any size, unless ``config`` says ``keep_freed_memory:
    False``; True where it took (glibc), else False (another C library, or turned off)."""
    if not runner_flag(config, "keep_freed_memory"):
        return False
    libc = _libc()
    if libc is None:
        return False
    return bool(libc.mallopt(M_MMAP_THRESHOLD, LARGEST)) and bool(libc.mallopt(M_TRIM_THRESHOLD, LARGEST))


def return_freed_memory(config=None):
    """Undo :func:`keep_freed_memory` for what comes before a training step (the data, the model's build): glibc's
    thresholds as its own rule leaves them at their largest (a block of 32 MiB or more mapped and unmapped, the heap's
    top trimmed past 64 MiB), and the free heap given back to the system now (``malloc_trim(0)``, which also
    releases free pages inside the heap). True where it took; without ``keep_freed_memory`` the C library is left
    alone."""
    if not runner_flag(config, "keep_freed_memory"):
        return False
    libc = _libc()
    if libc is None or not hasattr(libc, "malloc_trim"):
        return False
    libc.mallopt(M_MMAP_THRESHOLD, RETURNED_MMAP_THRESHOLD)
    libc.mallopt(M_TRIM_THRESHOLD, 2 * RETURNED_MMAP_THRESHOLD)
    libc.malloc_trim(0)
    return True


def _libc():
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
    except OSError:  # no C library by that name
        return None
    return libc if libc is not None and hasattr(libc, "mallopt") else None  # musl, macOS: no mallopt
