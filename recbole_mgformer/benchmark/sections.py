"""A page's rows by equal-budget search: the runs of each budget of the benchmark's searches (records with
``tuning``) in a section of their own, apart from older runs; shared by the general, sequential and context tables."""

import re


def sections(records):
    """``[(budget text or None, records)]``: the equal-budget searches' runs by budget first, then older runs."""
    groups = {}
    for record in records:
        groups.setdefault((record.get("tuning") or {}).get("text"), []).append(record)
    return sorted(groups.items(), key=lambda item: (item[0] is None, item[0] or ""))


def defaults_first_note(records):
    """A line where the equal-budget searches of a page's rows differ in whether their first trial was the model's
    own defaults (``--tune-defaults-first``): then rows of different sections are not at equal budget; else None."""
    tuned = {(r["variant"], bool(r["tuning"].get("defaults_first"))) for r in records if r.get("tuning")}
    started = sorted({v for v, first in tuned if first})
    drawn = sorted({v for v, first in tuned if not first})
    if not (started and drawn):
        return None
    return (
        "Not one protocol: the searches of " + ", ".join(started) + " ran each model's own defaults as their "
        "first trial (--tune-defaults-first), those of " + ", ".join(drawn) + " drew every trial; rows tuned one "
        "way are not at equal budget with rows tuned the other, so they stand in separate sections."
    )


def section_label(budget, dataset=None):
    """A section's protocol in a few words, for a picture's legend: the equal-budget search and its trials, or
    the settings of runs no search chose: fixed (each paper's) on a dataset that says so in its heading
    (``benchmark_untuned_heading``), else hand-set."""
    from recbole_mgformer.benchmark.datasets import OLDER_RUNS_HEADING, untuned_heading

    if budget is not None:
        trials = re.search(r"(\d+) trials", budget)
        return "equal-budget search" + (f", {trials.group(1)} trials" if trials else "")
    fixed = dataset is not None and untuned_heading(dataset) != OLDER_RUNS_HEADING
    return "fixed settings (papers'), not searched" if fixed else "hand-set, not searched"
