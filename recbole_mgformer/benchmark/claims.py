"""Claims let several benchmark processes share one results folder and one checkpoint folder: a run or a search is
worked on by one process at a time, and the others go on to the next one. A claim is an advisory lock (``flock``)
on a ``.lock`` file beside the checkpoints, removed when the claim ends; the system drops the lock when its process
ends, however it ends, so a killed job never leaves a stale claim behind."""

import os

from recbole_mgformer.locks import lock_file


class Busy(RuntimeError):
    """Another process holds the claim."""


def claim(path):
    """Hold the claim at ``path`` while the block runs (a context manager); raises :class:`Busy`, naming the
    holder's pid, when another process holds it. A process cannot claim the same path twice. The ``.lock`` file
    goes when the block ends (a killed holder leaves it behind, and the next claim takes it over). Without
    ``flock`` (Windows) nothing is claimed, so run one benchmark process per folder there."""
    return lock_file(path, os.getpid(), lambda pid: Busy(f"another process (pid {pid or 'unknown'}) holds {path}"))
