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

from recbole_mgformer.config.input_checks import write_new_file

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


def _write_beside(record_path, payload):
    """``payload`` as compact gzipped JSON in the file beside a run's record, written whole or not at all, through a
    temporary of this process's own. Before the record exists it replaces a file there: the run that writes it holds
    the run's claim (:meth:`recbole_mgformer.benchmark.runs.Run.execute`), so that file is its own run's, left by a
    run stopped before its record was written. Beside a record it only adds a missing file: a recorded run's values
    are never replaced (where claims do not work, by a second process training the same run)."""

    def dump(temporary):
        with gzip.open(temporary, "wt", encoding="utf-8") as handle:
            json.dump(payload, handle, separators=(",", ":"))

    path = per_user_path(record_path)
    try:
        return write_new_file(path, dump, option="per-user values", overwrite=not Path(record_path).exists())
    except FileExistsError:
        raise FileExistsError(
            f"{path}: the recorded run {record_path} has its values there already (another process trained the "
            "same run meanwhile); they are kept: let one process run each seed of a results folder"
        ) from None


def _read_beside(record_path):
    """The payload written by :func:`_write_beside`, or None where the run stored none."""
    path = per_user_path(record_path)
    if not path.is_file():
        return None
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return json.load(handle)


def write_per_user(record_path, values, metric=PER_USER_METRIC):
    """``{user token: value}`` compactly beside a run's record (users sorted, values rounded to 5 decimals)."""
    users = sorted(values)
    payload = {"metric": metric, "users": users, "values": [round(values[u], 5) for u in users]}
    return _write_beside(record_path, payload)


def read_per_user(record_path):
    """The ``{user token: value}`` written beside a record, or None where the run stored none (older records)."""
    payload = _read_beside(record_path)
    return None if payload is None else dict(zip(payload["users"], payload["values"]))


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
    return {
        "word": word,
        "p": p,
        "difference": difference,
        "pairs": len(a),
        "seeds": len(set(a_by_seed) & set(b_by_seed)),
    }


def format_p(p):
    """``p = 0.0071``; ``p < 1e-300`` where the test's p is that small (thousands of pairs, one side far ahead): below
    it scipy's releases differ, one giving a subnormal 3.9e-309 where another underflows to zero."""
    return f"p = {p:.2g}" if p >= 1e-300 else "p < 1e-300"


def relation_text(other, verdict):
    """``**ahead** of DirectAU``, ``**behind** DirectAU`` or ``**level** with DirectAU``."""
    joiner = {"ahead": " of", "behind": "", "level": " with"}[verdict["word"]]
    return f"**{verdict['word']}**{joiner} {other}"


def verdict_text(name, other, verdict, metric=PER_USER_METRIC):
    """One sentence: ``MGFormer is **ahead** of DirectAU by a paired ... test ...: mean difference ..., p = ...``;
    a bootstrap verdict (:func:`paired_bootstrap`) names its own test."""
    if verdict.get("test") == "bootstrap":
        return f"{name} is {relation_text(other, verdict)}" + (
            f" by a paired bootstrap of test {verdict['metric']} over {verdict['pairs']:,} test rows "
            f"({verdict['resamples']:,} resamples, seed {verdict['bootstrap_seed']}) from {verdict['seeds']} seed(s): "
            f"difference {verdict['difference']:+.4f}, {format_p(verdict['p'])}."
        )
    return f"{name} is {relation_text(other, verdict)}" + (
        f" by a paired Wilcoxon signed-rank test of test {metric} over {verdict['pairs']:,} (seed, user) "
        f"pairs from {verdict['seeds']} seed(s): mean difference {verdict['difference']:+.4f}, "
        f"{format_p(verdict['p'])}."
    )


# --- per-row outputs of a context run and their paired bootstrap -------------------------------------------------

LOGLOSS_EPS = 1e-15  # RecBole's LogLoss clips predictions to [eps, 1 - eps]
BOOTSTRAP_RESAMPLES = 1000
BOOTSTRAP_SEED = 0


def write_per_row(record_path, labels, scores):
    """A context run's test labels and predicted probabilities, row by row in the test loader's order, beside its
    record (the per-user file's name: runs move it along), for the paired bootstrap at render time."""
    payload = {"metric": "score", "labels": [int(v) for v in labels], "scores": [round(float(v), 6) for v in scores]}
    return _write_beside(record_path, payload)


def read_per_row(record_path):
    """``(labels, scores)`` numpy arrays written by :func:`write_per_row`, or None where the run stored none."""
    import numpy as np

    payload = _read_beside(record_path)
    if payload is None or "labels" not in payload:
        return None
    return np.asarray(payload["labels"], dtype=np.int8), np.asarray(payload["scores"], dtype=np.float64)


def per_row_by_seed(records):
    """``{seed: (labels, scores)}`` of the records that stored their test rows (``per_row``)."""
    values = {r["seed"]: read_per_row(r["_path"]) for r in records if r.get("per_row") and r.get("_path")}
    return {seed: rows for seed, rows in values.items() if rows is not None}


class _Sorted:
    """One model's test rows sorted by score once, so the AUC of any reweighting (a bootstrap resample: each row
    counted as often as drawn) is two sums over tie groups."""

    def __init__(self, labels, scores):
        import numpy as np

        order = np.argsort(scores, kind="stable")
        sorted_scores = scores[order]
        self.order = order
        self.positive = labels[order].astype(np.float64)
        self.starts = np.flatnonzero(np.r_[True, sorted_scores[1:] != sorted_scores[:-1]])  # each tie group's first

    def auc(self, weights):
        """AUC with each row counted ``weights[row]`` times (ties count one half), as RecBole's rank-based AUC."""
        import numpy as np

        w = weights[self.order]
        positive = np.add.reduceat(w * self.positive, self.starts)  # (groups,)
        negative = np.add.reduceat(w * (1 - self.positive), self.starts)
        below = np.cumsum(negative) - negative
        total = positive.sum() * negative.sum()
        return float((positive * (below + 0.5 * negative)).sum() / total) if total else float("nan")


def _logloss(labels, scores, weights):
    import numpy as np

    p = np.clip(scores, LOGLOSS_EPS, 1 - LOGLOSS_EPS)
    losses = -(labels * np.log(p) + (1 - labels) * np.log(1 - p))
    return float((weights * losses).sum() / weights.sum())


def paired_bootstrap(a_by_seed, b_by_seed, metric="auc", resamples=BOOTSTRAP_RESAMPLES, seed=BOOTSTRAP_SEED):
    """Is model a ahead of, level with or behind model b on test ``metric`` (``auc``: bigger is better; ``logloss``:
    smaller is better)? ``{seed: (labels, scores)}`` each, the same test rows in the same order for a seed (a
    seed whose labels differ is not paired). Each resample draws the rows of every seed with replacement, the
    same rows for both models, and takes the mean over seeds of metric(a) - metric(b); the two-sided p is twice
    the smaller share of resamples on either side of 0 (with one added to both counts, so never 0). Returns
    ``{"word", "p", "difference" (observed, a - b), "pairs" (rows), "seeds", ...}`` or None without a paired seed."""
    import numpy as np

    if metric not in ("auc", "logloss"):
        raise ValueError(f"paired_bootstrap: metric {metric!r} is not one of auc, logloss")
    seeds = [
        s
        for s in sorted(set(a_by_seed) & set(b_by_seed))
        if len(a_by_seed[s][0]) == len(b_by_seed[s][0]) and np.array_equal(a_by_seed[s][0], b_by_seed[s][0])
    ]
    if not seeds:
        return None
    rng = np.random.default_rng(seed)

    def value(labels, scores, prepared, weights):
        return prepared.auc(weights) if metric == "auc" else _logloss(labels, scores, weights)

    observed, draws = [], np.zeros(resamples)
    for s in seeds:
        labels, a_scores = a_by_seed[s]
        b_scores = b_by_seed[s][1]
        a_sorted, b_sorted = (_Sorted(labels, a_scores), _Sorted(labels, b_scores)) if metric == "auc" else (None,) * 2
        ones = np.ones(len(labels))
        observed.append(value(labels, a_scores, a_sorted, ones) - value(labels, b_scores, b_sorted, ones))
        for i in range(resamples):
            weights = np.bincount(rng.integers(0, len(labels), len(labels)), minlength=len(labels)).astype(np.float64)
            draws[i] += value(labels, a_scores, a_sorted, weights) - value(labels, b_scores, b_sorted, weights)
    draws /= len(seeds)
    difference = float(np.mean(observed))
    p = min(1.0, 2 * (min((draws <= 0).sum(), (draws >= 0).sum()) + 1) / (resamples + 1))
    better = difference > 0 if metric == "auc" else difference < 0
    word = "level" if p >= ALPHA or difference == 0 else "ahead" if better else "behind"
    return {
        "word": word,
        "p": p,
        "difference": difference,
        "pairs": sum(len(a_by_seed[s][0]) for s in seeds),
        "seeds": len(seeds),
        "test": "bootstrap",
        "metric": {"auc": "AUC", "logloss": "LogLoss"}[metric],
        "resamples": resamples,
        "bootstrap_seed": seed,
    }
