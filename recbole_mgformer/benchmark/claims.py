"""Claims let several benchmark processes share one results folder and one checkpoint folder: a run or a search is
worked on by one process at a time, and the others go on to the next one. A claim is an advisory lock (``flock``)
on a ``.lock`` file beside the checkpoints; the system drops it when its process ends, however it ends, so a killed
job never leaves a stale claim behind."""

import os
from contextlib import contextmanager
from pathlib import Path

try:
    import fcntl
except ImportError:  # no flock (Windows): nothing is claimed, so run one benchmark process per folder there
    fcntl = None


class Busy(RuntimeError):
    """Another process holds the claim."""


@contextmanager
def claim(path):
    """Hold the claim at ``path`` while the block runs; raises :class:`Busy`, naming the holder's pid, when another
    process holds it. A process cannot claim the same path twice."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as handle:
        if fcntl is not None:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.seek(0)
                holder = handle.read().strip() or "unknown"
                raise Busy(f"another process (pid {holder}) holds {path}") from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        yield
