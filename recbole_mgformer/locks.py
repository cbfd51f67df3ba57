"""An advisory lock (``flock``) on a ``.lock`` file, held while a block runs: how a benchmark run or search
(:mod:`recbole_mgformer.benchmark.claims`) and a tuning search (:func:`recbole_mgformer.tune.records.search_lock`)
are worked on by one process at a time. The system drops the lock when its process ends, however it ends, so a
killed job never leaves a stale lock behind."""

import os
from contextlib import contextmanager
from pathlib import Path

try:
    import fcntl
except ImportError:  # no flock (Windows): nothing is locked there, so run one process per folder
    fcntl = None


@contextmanager
def lock_file(path, holder, busy):
    """Hold the lock on the file at ``path`` while the block runs, with the line ``holder`` (who holds it) in the
    file. When another process holds it, raise ``busy(its holder line)`` at once (the line is empty where that
    process had not written it yet). A process cannot lock the same path twice. The file goes when the block ends
    (a killed holder leaves it behind, and the next lock takes it over)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = _opened_and_locked(path, busy)
    try:
        handle.seek(0)
        handle.truncate()
        handle.write(f"{holder}\n")
        handle.flush()
        yield
    finally:
        path.unlink(missing_ok=True)  # still locked: no other process can be holding this file
        handle.close()


def _opened_and_locked(path, busy):
    """``path`` opened and locked; opened again when the holder before us removed it between our open and our
    lock, since a lock on a removed file locks nothing."""
    while True:
        handle = open(path, "a+")
        if fcntl is None:
            return handle
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip()
            handle.close()
            raise busy(holder) from None
        try:
            if os.stat(path).st_ino == os.fstat(handle.fileno()).st_ino:
                return handle
        except FileNotFoundError:
            pass
        handle.close()
