"""Uncertainty for the tables: 95% confidence intervals over seeds, and a paired test of two models over users.

A row's interval is Student's t over its seeds (``mean ± t(0.975, n - 1) * s / sqrt(n)``), so with three seeds it is
about 2.5 standard deviations wide on each side. Two models are compared by the Wilcoxon signed-rank test on their
per-user test NDCG@20, paired by (seed, user) over the seeds both have: "ahead" or "behind" when p < 0.05 (by the
sign of the mean difference), "level" otherwise.
"""

import gzip
import json
import math
import statistics
import warnings
from pathlib import Path

ALPHA = 0.05
PER_USER_METRIC = "ndcg@20"
PER_USER_SUFFIX = ".users.json.gz"  # beside <variant>-seed<seed>.json


def mean_ci(values):
    """(mean, half-width of the 95% confidence interval over ``values``); the half-width is None for one value,
    both are None for none (e.g. a popularity group without test users)."""
    from scipy import stats

    values = [float(v) for v in values]
    if len(values) < 2:
        return (values[0] if values else None), None
    half = stats.t.ppf(1 - ALPHA / 2, len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values))
    return statistics.mean(values), float(half)


def format_ci(mean, half, digits=4):
    """``0.1234 ± 0.0012``, or the mean alone without an interval, or ``n/a`` without a mean."""
    if mean is None:
        return "n/a"
    return f"{mean:.{digits}f}" + (f" ± {half:.{digits}f}" if half is not None else "")


def per_user_path(record_path):
    record_path = Path(record_path)
    return record_path.with_name(record_path.stem + PER_USER_SUFFIX)


def write_per_user(record_path, values, metric=PER_USER_METRIC):
    """``{user token: value}`` compactly beside a run's record (users sorted, values rounded to 5 decimals)."""
    users = sorted(values)
    payload = {"metric": metric, "users": users, "values": [round(values[u], 5) for u in users]}
    path = per_user_path(record_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with gzip.open(tmp, "wt", encoding="utf-8") as handle:
        json.dump(payload, handle, separators=(",", ":"))
    tmp.replace(path)
    return path


def read_per_user(record_path):
    """The ``{user token: value}`` written beside a record, or None where the run stored none (older records)."""
    path = per_user_path(record_path)
    if not path.is_file():
        return None
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        payload = json.load(handle)
    return dict(zip(payload["users"], payload["values"]))


def per_user_by_seed(records):
    """``{seed: {user: value}}`` of the records (each knowing its file, ``_path``) that stored per-user values."""
    values = {r["seed"]: read_per_user(r["_path"]) for r in records if r.get("per_user") and r.get("_path")}
    return {seed: users for seed, users in values.items() if users}


def paired(a_by_seed, b_by_seed):
    """Two models' per-user values paired by (seed, user): two equal-length lists over the seeds and users both have."""
    a, b = [], []
    for seed in sorted(set(a_by_seed) & set(b_by_seed)):
        common = sorted(set(a_by_seed[seed]) & set(b_by_seed[seed]))
        a += [a_by_seed[seed][user] for user in common]
        b += [b_by_seed[seed][user] for user in common]
    return a, b


def paired_verdict(a_by_seed, b_by_seed):
    """Is model a ahead of, level with or behind model b? ``{seed: {user: value}}`` each; returns
    ``{"word", "p", "difference" (mean of a - b), "pairs", "seeds"}``, or None without a common (seed, user)."""
    from scipy import stats

    a, b = paired(a_by_seed, b_by_seed)
    if not a:
        return None
    differences = [x - y for x, y in zip(a, b)]
    difference = statistics.mean(differences)
    if all(d == 0 for d in differences):
        p = 1.0
    else:
        # ties at zero (both models miss a user) switch scipy to its normal approximation
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            p = float(stats.wilcoxon(a, b, zero_method="wilcox").pvalue)
    word = "level" if p >= ALPHA or difference == 0 else "ahead" if difference > 0 else "behind"
    return {"word": word, "p": p, "difference": difference, "pairs": len(a),
            "seeds": len(set(a_by_seed) & set(b_by_seed))}


def format_p(p):
    """``p = 0.0071``; ``p < 1e-300`` where the test's p underflows to zero (thousands of pairs, one side far ahead)."""
    return f"p = {p:.2g}" if p > 0 else "p < 1e-300"


def relation_text(other, verdict):
    """``**ahead** of DirectAU``, ``**behind** DirectAU`` or ``**level** with DirectAU``."""
    joiner = {"ahead": " of", "behind": "", "level": " with"}[verdict["word"]]
    return f"**{verdict['word']}**{joiner} {other}"


def verdict_text(name, other, verdict):
    """One sentence: ``MGFormer is **ahead** of DirectAU by a paired ... test ...: mean difference ..., p = ...``."""
    return f"{name} is {relation_text(other, verdict)}" + (
        f" by a paired Wilcoxon signed-rank test of test {PER_USER_METRIC} over {verdict['pairs']:,} (seed, user) "
        f"pairs from {verdict['seeds']} seed(s): mean difference {verdict['difference']:+.4f}, "
        f"{format_p(verdict['p'])}.")
