"""Claims let several benchmark processes share one results folder and one checkpoint folder: a run or a search is
worked on by one process at a time, and the others go on to the next one. A claim is an advisory lock (``flock``)
on a ``.lock`` file beside the checkpoints, removed when the claim ends; the system drops the lock when its process
ends, however it ends, so a killed job never leaves a stale claim behind."""

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
    process holds it. A process cannot claim the same path twice. The ``.lock`` file goes when the block ends (a
    killed holder leaves it behind, and the next claim takes it over)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = _locked_file(path)
    try:
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        yield
    finally:
        path.unlink(missing_ok=True)  # still locked: no other process can be holding this file
        handle.close()


def _locked_file(path):
    """``path`` opened and locked; retried when the holder before us removed it between our open and our lock,
    since a lock on a removed file claims nothing."""
    while True:
        handle = open(path, "a+")
        if fcntl is None:
            return handle
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "unknown"
            handle.close()
            raise Busy(f"another process (pid {holder}) holds {path}") from None
        try:
            if os.stat(path).st_ino == os.fstat(handle.fileno()).st_ino:
                return handle
        except FileNotFoundError:
            pass
        handle.close()
