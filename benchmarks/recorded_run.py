"""What the result scripts share: train one run unless its JSON record exists, then write the record; and the
provenance and record of a timing benchmark."""

import time
from pathlib import Path

from recbole_mgformer.records import git_commit, machine, package_versions, write_record

ROOT = Path(__file__).resolve().parents[1]


def run_and_record(record_path, label, train, fields, metric):
    """Skip when ``record_path`` exists (so a long benchmark resumes); else call ``train()`` (a
    ``run_recommender`` result) and write its valid and test metrics, time and provenance with ``fields``.
    A ``details`` dict in the result joins the record as it is (and its ``seconds``, if any, replaces this
    process's wall time: a resumed run counts the time of all its processes).

    Returns the record, or None when skipped. ``metric`` is the one printed when the run ends.
    """
    record_path = Path(record_path)
    if record_path.exists():
        print(f"[skip] {label}: {record_path} exists", flush=True)
        return None
    print(f"[run ] {label}", flush=True)
    commit = git_commit(ROOT)  # the code this process imported, however long the run takes
    started = time.perf_counter()
    result = train()
    record = {
        **fields, "valid": dict(result["best_valid_result"]), "test": dict(result["test_result"]),
        "seconds": round(time.perf_counter() - started, 1),
        **result.get("details", {}),
        "commit": commit, "versions": package_versions(), "machine": machine(),
    }
    write_record(record_path, record)
    print(f"[done] {label}: valid {metric} {record['valid'][metric]:.4f}, test {metric} {record['test'][metric]:.4f}",
          flush=True)
    return record


def timing_provenance(commit, repeats, overrides):
    """The line under a timing table: which code, machine and settings produced it, and when."""
    return (f"Commit {commit}, {machine()}, torch {package_versions()['torch']}, {repeats} repeat(s), "
            f"overrides {overrides or 'none'}, {time.strftime('%Y-%m-%d')}.")


def write_timing_record(results, kind, dataset, records, provenance):
    """All the measurements of one timing benchmark as ``<results>/runs/<kind>/epoch-time-<dataset>-<stamp>.json``."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    write_record(Path(results) / "runs" / kind / f"epoch-time-{dataset}-{stamp}.json",
                 {"records": records, "provenance": provenance, "versions": package_versions()})
