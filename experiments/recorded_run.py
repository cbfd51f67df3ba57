"""What the timing benchmarks share: the provenance line under a table and the JSON record of a measurement."""

import time
from pathlib import Path

from recbole_mgformer.records import machine, package_versions, write_record


def timing_provenance(commit, repeats, overrides):
    """The line under a timing table: which code, machine and settings produced it, and when."""
    return (
        f"Commit {commit}, {machine()}, torch {package_versions()['torch']}, {repeats} repeat(s), "
        f"overrides {overrides or 'none'}, {time.strftime('%Y-%m-%d')}."
    )


def write_timing_record(results, kind, dataset, records, provenance):
    """All the measurements of one timing benchmark as ``<results>/runs/<kind>/epoch-time-<dataset>-<stamp>.json``."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    write_record(
        Path(results) / "runs" / kind / f"epoch-time-{dataset}-{stamp}.json",
        {"records": records, "provenance": provenance, "versions": package_versions()},
    )


def write_table(path, lines, provenance):
    """A timing table's markdown: ``lines`` then the provenance line; printed too. Returns the path."""
    path = Path(path)
    text = "\n".join([*lines, "", provenance, ""])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    print(text)
    print(f"wrote {path}")
    return path
