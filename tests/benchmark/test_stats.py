import math

import numpy as np
import pytest

from recbole_mgformer.benchmark.stats import (
    format_ci,
    format_p,
    mean_ci,
    paired,
    paired_verdict,
    per_user_path,
    read_per_user,
    verdict_text,
    write_per_user,
)


def test_the_interval_is_students_t_over_seeds():
    mean, half = mean_ci([0.30, 0.31, 0.32])
    # t(0.975, 2) = 4.3027, standard error 0.01 / sqrt(3)
    assert mean == pytest.approx(0.31) and half == pytest.approx(4.3027 * 0.01 / math.sqrt(3), rel=1e-4)
    assert format_ci(mean, half) == "0.3100 ± 0.0248"
    assert mean_ci([0.25]) == (0.25, None) and format_ci(0.25, None) == "0.2500"
    assert mean_ci([]) == (None, None) and format_ci(None, None) == "n/a"


def test_per_user_values_round_trip_beside_the_record(tmp_path):
    record = tmp_path / "runs" / "mgformer-seed0.json"
    path = write_per_user(record, {"u2": 0.123456789, "u10": 0.0})
    assert path == per_user_path(record) and path.name == "mgformer-seed0.users.json.gz"
    assert read_per_user(record) == {"u10": 0.0, "u2": 0.12346}
    assert read_per_user(tmp_path / "runs" / "bpr-seed0.json") is None


def test_per_user_values_are_written_whole_from_a_temporary_of_their_own(tmp_path, monkeypatch):
    # the old temporary, <name>.tmp, took a file of that name and was shared by two writers of one record's values
    import gzip

    record = tmp_path / "bpr-seed0.json"
    neighbour = tmp_path / "bpr-seed0.users.json.gz.tmp"
    neighbour.write_text("someone's file\n")
    real_open, opened = gzip.open, []

    def recording(path, *args, **kwargs):
        opened.append(path)
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(gzip, "open", recording)
    write_per_user(record, {"u1": 0.5})
    write_per_user(record, {"u1": 0.25})  # a run stopped before its record wrote them once: replaced
    assert read_per_user(record) == {"u1": 0.25} and neighbour.read_text() == "someone's file\n"
    assert len({str(path) for path in opened[:2]}) == 2 and all(path.parent == tmp_path for path in opened[:2])
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([neighbour.name, per_user_path(record).name])


def test_the_values_beside_a_record_are_added_when_missing_never_replaced(tmp_path):
    record = tmp_path / "bpr-seed0.json"
    record.write_text("{}")
    write_per_user(record, {"u1": 0.5})  # a record written before per-user values existed gets them
    with pytest.raises(FileExistsError, match="the recorded run .*bpr-seed0.json has its values there already"):
        write_per_user(record, {"u1": 0.25})
    assert read_per_user(record) == {"u1": 0.5}


def test_users_pair_by_seed_and_user_over_what_both_runs_have():
    a = {0: {"u1": 0.5, "u2": 0.1}, 1: {"u1": 0.4}, 2: {"u1": 0.9}}
    b = {0: {"u2": 0.2, "u1": 0.3, "u3": 1.0}, 1: {"u1": 0.6}}
    assert paired(a, b) == ([0.5, 0.1, 0.4], [0.3, 0.2, 0.6])


def _runs(values_by_seed):
    return {seed: {f"u{i}": v for i, v in enumerate(values)} for seed, values in values_by_seed.items()}


def test_the_verdict_follows_the_paired_test_not_the_third_decimal():
    base = [0.1 * (i % 7) for i in range(60)]
    better = _runs({0: [v + 0.01 for v in base], 1: [v + 0.02 for v in base]})
    same = _runs({0: base, 1: base})
    ahead = paired_verdict(better, same)
    assert ahead["word"] == "ahead" and ahead["p"] < 0.05 and ahead["pairs"] == 120 and ahead["seeds"] == 2
    assert ahead["difference"] == pytest.approx(0.015)
    assert paired_verdict(same, better)["word"] == "behind"
    # differences of both signs that cancel: level, although the means differ in the fourth decimal
    noise = np.random.default_rng(0).normal(0.0, 0.05, len(base))
    noisy = _runs({0: [v + n - noise.mean() + 0.0005 for v, n in zip(base, noise)]})
    level = paired_verdict(noisy, _runs({0: base}))
    assert level["word"] == "level" and level["p"] >= 0.05 and level["difference"] == pytest.approx(0.0005)
    assert paired_verdict(same, same)["word"] == "level" and paired_verdict(same, same)["p"] == 1.0
    assert paired_verdict(same, _runs({5: base})) is None
    assert verdict_text("MGFormer", "DirectAU", ahead).startswith("MGFormer is **ahead** of DirectAU by a paired")
    assert verdict_text("MGFormer", "DirectAU", level).startswith("MGFormer is **level** with DirectAU")
    behind = paired_verdict(same, better)
    assert verdict_text("MGFormer", "DirectAU", behind).startswith("MGFormer is **behind** DirectAU by a paired")


# --- the paired bootstrap of a context table's test rows ------------------------------------------------------------


def test_the_weighted_auc_counts_ties_as_half_and_repeats_rows_by_weight():
    from recbole_mgformer.benchmark.stats import _Sorted

    labels, scores = np.array([1, 0, 1, 0]), np.array([0.9, 0.1, 0.5, 0.5])
    prepared = _Sorted(labels, scores)
    assert prepared.auc(np.ones(4)) == pytest.approx(3.5 / 4)  # (0.9 > both, 0.5 > 0.1, 0.5 ties 0.5) of 4 pairs
    # drawn twice, the tied negative weighs double: 0.9 beats 1 + 2, 0.5 beats 1 and ties 2, of 2 * 3 pairs
    assert prepared.auc(np.array([1.0, 1.0, 1.0, 2.0])) == pytest.approx((3 + 1 + 0.5 * 2) / 6)


def test_a_perfect_ranker_is_ahead_of_a_random_one_and_equal_scores_are_level():
    from recbole_mgformer.benchmark.stats import paired_bootstrap

    rng = np.random.default_rng(1)
    labels = rng.integers(0, 2, 400)
    perfect = (0.25 + 0.5 * labels).astype(float)
    noise = rng.random(400)
    verdict = paired_bootstrap({0: (labels, perfect)}, {0: (labels, noise)}, "auc", resamples=200)
    # the observed difference is 1 - AUC(noise), and no resample reverses it: p is its floor, 2 / 201
    assert verdict["word"] == "ahead" and verdict["p"] == pytest.approx(2 / 201)
    assert verdict["difference"] == pytest.approx(1 - _auc(labels, noise)) and verdict["pairs"] == 400
    loss = paired_bootstrap({0: (labels, perfect)}, {0: (labels, noise)}, "logloss", resamples=200)
    assert loss["word"] == "ahead" and loss["difference"] < 0  # a lower LogLoss is ahead
    same = paired_bootstrap({0: (labels, noise)}, {0: (labels, noise.copy())}, "auc", resamples=50)
    assert same["word"] == "level" and same["p"] == 1.0 and same["difference"] == 0


def test_the_bootstrap_is_seeded_and_refuses_to_pair_rows_of_other_splits():
    from recbole_mgformer.benchmark.stats import paired_bootstrap

    rng = np.random.default_rng(2)
    labels = rng.integers(0, 2, 300)
    a, b = labels * 0.1 + rng.random(300), rng.random(300)
    first = paired_bootstrap({0: (labels, a)}, {0: (labels, b)}, resamples=100)
    assert paired_bootstrap({0: (labels, a)}, {0: (labels, b)}, resamples=100) == first
    assert paired_bootstrap({0: (labels, a)}, {0: (1 - labels, b)}) is None  # another split's labels
    with pytest.raises(ValueError, match="metric 'ndcg'"):
        paired_bootstrap({0: (labels, a)}, {0: (labels, b)}, "ndcg")


def _auc(labels, scores):
    positive, negative = scores[labels == 1], scores[labels == 0]
    wins = (positive[:, None] > negative[None, :]).sum() + 0.5 * (positive[:, None] == negative[None, :]).sum()
    return wins / (len(positive) * len(negative))


@pytest.mark.parametrize(
    ("p", "written"),
    [(0.0071, "p = 0.0071"), (1e-300, "p = 1e-300"), (3.9e-309, "p < 1e-300"), (0.0, "p < 1e-300")],
)
def test_a_p_value_below_1e_300_is_written_alike_whether_subnormal_or_zero(p, written):
    # scipy's releases differ below 1e-300 (a subnormal on one, zero on another): the pages must not
    assert format_p(p) == written
