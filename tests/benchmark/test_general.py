import json

import pytest

from recbole_mgformer.benchmark.general import render_dataset
from recbole_mgformer.benchmark.render import records_by_dataset


def record(variant, model, seed, recall, ndcg):
    return {
        "variant": variant,
        "model": model,
        "seed": seed,
        "test": {"recall@20": recall, "ndcg@20": ndcg},
        "valid": {"ndcg@20": ndcg},
        "best_epoch": 3,
        "epochs": 14,
        "train_seconds_per_epoch": 2.0,
        "parameters": 1000,
        "machine": "cpu",
        "commit": "abc",
    }


def test_table_has_mean_and_95_percent_interval_bold_best_improvement_and_paper_numbers():
    records = [
        record("MGFormer", "MGFormer", 0, 0.15, 0.07),
        record("MGFormer", "MGFormer", 1, 0.17, 0.08),
        record("MGFormer degree_mask=none", "MGFormer", 0, 0.19, 0.09),
        record("DirectAU", "DirectAU", 0, 0.14, 0.06),
    ]
    table = render_dataset("amazon-beauty", records)
    # two seeds: t(0.975, 1) = 12.706 times the standard error (0.01 and 0.005)
    assert "| MGFormer | 2 | 0.1600 ± 0.1271 | 0.0750 ± 0.0635 | 0.0750 | 0.1531 | 0.0748 |" in table
    assert "| MGFormer degree_mask=none | 1 | **0.1900** | **0.0900** | 0.0900 | 0.1501 | 0.0739 |" in table  # Table 3
    assert "| DirectAU | 1 | 0.1400 | 0.0600 | 0.0600 | 0.1465 | 0.0710 |" in table
    # the best other *model* is DirectAU, not another MGFormer variant
    assert "Best test ndcg@20: MGFormer degree_mask=none, +50.00% over the best other model (DirectAU)." in table


def test_columns_no_record_fills_are_left_out():
    # records of the retired ml-100k script: no epochs, timings or parameter count, but their wall time
    legacy = [
        {
            "variant": "BPR",
            "model": "BPR",
            "seed": 2020,
            "test": {"recall@20": 0.36, "ndcg@20": 0.31},
            "valid": {"ndcg@20": 0.26},
            "seconds": 48.0,
            "machine": "cpu",
            "commit": "abc",
        }
    ]
    table = render_dataset("ml-100k", legacy)
    assert "| model | seeds | test Recall@20 | test NDCG@20 | valid NDCG@20 | minutes |" in table
    assert "| BPR | 1 | **0.3600** | **0.3100** | 0.2600 | 0.8 |" in table


def test_tuned_rows_get_their_own_section_and_mgformer_a_paired_verdict(tmp_path):
    from recbole_mgformer.benchmark.stats import write_per_user

    tuning = {
        "text": "random search of 16 trials, search seed 0, ASHA grace 5 of at most 30 epochs",
        "search": "results/tuning/ml-100k/MGFormer.md",
    }
    records = []
    for seed in (0, 1, 2):
        for variant, model, shift, overrides in (
            ("MGFormer", "MGFormer", 0.02, {}),
            ("DirectAU", "DirectAU", 0.0, {}),
            ("BPR", "BPR", -0.05, {}),
            ("MGFormer attention=False", "MGFormer", 0.01, {"attention": False}),
            (
                "MGFormer attention=False filter_residual=gfcf",
                "MGFormer",
                0.015,
                {"attention": False, "filter_residual": "gfcf", "filter_residual_weight": 0.25},
            ),
            ("MGFormer degree_gate=True", "MGFormer", 0.005, {"degree_gate": True}),
            ("MGFormer embedding_size=128", "MGFormer", -0.02, {"embedding_size": 128}),
            ("MGFormer degree_mask=none", "MGFormer", 0.02, {"degree_mask": "none"}),
            (
                "MGFormer embedding_size=128 feature_map=elu",
                "MGFormer",
                -0.03,
                {"embedding_size": 128, "feature_map": "elu"},
            ),
        ):
            rec = {
                **record(variant, model, seed, 0.3 + shift, 0.25 + shift + 0.001 * seed),
                "tuning": tuning,
                "overrides": overrides,
                "per_user": {"file": "x", "metric": "ndcg@20"},
                "_path": str(tmp_path / f"{model}-seed{seed}.json"),
            }
            rec["_path"] = str(tmp_path / f"{variant}-seed{seed}.json")
            write_per_user(rec["_path"], {f"u{u}": (u % 10) / 10 + shift for u in range(50)})
            records.append(rec)
    records.append(record("SimGCL", "SimGCL", 2020, 0.2, 0.13))  # an older, untuned run
    table = render_dataset("ml-100k", records)
    tuned, older = table.split("### Older runs, not from an equal-budget search")
    assert f"### Tuned with the same budget: {tuning['text']}" in tuned and "| SimGCL |" in older
    assert "| MGFormer | 3 | **0.3200 ± 0.0000** | **0.2710 ± 0.0025** |" in tuned
    assert (
        "Verdict: MGFormer is **ahead** of DirectAU by a paired Wilcoxon signed-rank test of test ndcg@20 over "
        "150 (seed, user) pairs from 3 seed(s): mean difference +0.0200, p = "
    ) in tuned
    # what the attention adds: each attention variant against the same tokens without it
    assert (
        "Attention: MGFormer is **ahead** of MGFormer attention=False by a paired Wilcoxon signed-rank test of "
        "test ndcg@20 over 150 (seed, user) pairs from 3 seed(s): mean difference +0.0100"
    ) in tuned
    assert (
        "Attention: MGFormer degree_gate=True is **behind** MGFormer attention=False by a paired Wilcoxon "
        "signed-rank test of test ndcg@20 over 150 (seed, user) pairs from 3 seed(s): mean difference -0.0050"
    ) in tuned
    # no control: a row without attention, and a row whose tokens differ (d = 128) from every row without attention
    assert "Attention: MGFormer attention=False is" not in tuned
    assert "Attention: MGFormer embedding_size=128" not in tuned
    assert "Verdict: MGFormer attention=False is **ahead** of DirectAU" in tuned
    # Table 3: each ablation against the MGFormer it changes one option of, at the same size
    assert (
        "Ablation: MGFormer degree_mask=none is **level** with MGFormer by a paired Wilcoxon signed-rank test of "
        "test ndcg@20 over 150 (seed, user) pairs from 3 seed(s): mean difference +0.0000"
    ) in tuned
    assert (
        "Ablation: MGFormer embedding_size=128 feature_map=elu is **behind** MGFormer embedding_size=128 by a "
        "paired Wilcoxon signed-rank test of test ndcg@20 over 150 (seed, user) pairs from 3 seed(s): "
        "mean difference -0.0100"
    ) in tuned
    assert "Ablation: MGFormer attention=False" not in tuned and "Ablation: MGFormer degree_gate=True" not in tuned
    # a filter residual against the same entry without it: the tokens its scores were added to
    assert (
        "Filter: MGFormer attention=False filter_residual=gfcf is **ahead** of MGFormer attention=False by a paired "
        "Wilcoxon signed-rank test of test ndcg@20 over 150 (seed, user) pairs from 3 seed(s): mean difference +0.0050"
    ) in tuned
    assert tuned.count("Filter: ") == 1 and "Attention: MGFormer attention=False filter_residual" not in tuned
    assert "Searches: BPR `results/tuning/ml-100k/MGFormer.md`" in tuned
    assert "Verdict" not in older  # no per-user values stored there
    # each MGFormer row but an ablation against every other model, best first; none in the older section
    assert "Against each model: MGFormer is **ahead** of DirectAU (+0.0200, p = " in tuned
    assert "); **ahead** of BPR (+0.0700, p = " in tuned
    assert "Against each model: MGFormer attention=False is **ahead** of DirectAU (+0.0100, p = " in tuned
    assert "Against each model: MGFormer degree_mask=none" not in tuned and "Against each model" not in older


def test_against_each_model_needs_two_other_models_and_says_an_underflowing_p(tmp_path):
    from recbole_mgformer.benchmark.stats import write_per_user

    tuning = {"text": "random search of 8 trials", "search": "results/tuning/x/MGFormer.md"}

    def records(variants):
        out = []
        for variant, shift in variants:
            rec = {
                **record(variant, variant, 0, 0.3 + shift, 0.25 + shift),
                "tuning": tuning,
                "overrides": {},
                "per_user": {"file": "x", "metric": "ndcg@20"},
                "_path": str(tmp_path / f"{variant}-seed0.json"),
            }
            # 5000 users, MGFormer ahead on every one: the signed-rank p underflows to 0.0
            write_per_user(rec["_path"], {f"u{u}": (u % 10) / 10 + shift for u in range(5000)})
            out.append(rec)
        return out

    one_other = render_dataset("x", records([("MGFormer", 0.0), ("BPR", -0.1)]))
    assert "Verdict: MGFormer is **ahead** of BPR" in one_other and "Against each model" not in one_other
    two_others = render_dataset("x", records([("MGFormer", 0.0), ("BPR", -0.1), ("LightGCN", 0.1)]))
    assert (
        "Against each model: MGFormer is **behind** LightGCN (-0.1000, p < 1e-300); **ahead** of BPR "
        "(+0.1000, p < 1e-300)."
    ) in two_others


def test_the_verdict_compares_with_the_best_other_model_of_the_same_embedding_size(tmp_path):
    from recbole_mgformer.benchmark.stats import write_per_user

    records = []
    for variant, model, size, shift in (
        ("MGFormer", "MGFormer", 64, 0.0),
        ("DirectAU", "DirectAU", 64, -0.01),
        ("DirectAU embedding_size=128", "DirectAU", 128, 0.05),
    ):
        rec = {
            **record(variant, model, 0, 0.3 + shift, 0.25 + shift),
            "config": {"embedding_size": size},
            "per_user": {"file": "x", "metric": "ndcg@20"},
            "_path": str(tmp_path / f"{variant}-seed0.json"),
        }
        write_per_user(rec["_path"], {f"u{u}": (u % 10) / 10 + shift for u in range(50)})
        records.append(rec)
    table = render_dataset("amazon-beauty", records)
    # DirectAU at d = 128 is the best other model of the section, but MGFormer runs at d = 64
    assert "Verdict: MGFormer is **ahead** of DirectAU by a paired Wilcoxon signed-rank test" in table
    # without sizes in the records (older ones), the best of all
    for rec in records:
        del rec["config"]
    assert "Verdict: MGFormer is **behind** DirectAU embedding_size=128 by" in render_dataset("amazon-beauty", records)


def test_in_an_equal_budget_search_the_verdict_takes_the_best_other_model_of_any_size(tmp_path):
    from recbole_mgformer.benchmark.stats import write_per_user

    tuning = {
        "text": "random search of 16 trials, search seed 0, ASHA grace 10 of at most 100 epochs",
        "search": "results/tuning/ml-100k/x.md",
    }
    records = []
    for variant, model, size, shift in (
        ("MGFormer", "MGFormer", 128, 0.0),
        ("BPR", "BPR", 128, -0.01),
        ("XSimGCL", "XSimGCL", 32, 0.05),
    ):
        rec = {
            **record(variant, model, 0, 0.3 + shift, 0.25 + shift),
            "config": {"embedding_size": size},
            "tuning": tuning,
            "per_user": {"file": "x", "metric": "ndcg@20"},
            "_path": str(tmp_path / f"{variant}-seed0.json"),
        }
        write_per_user(rec["_path"], {f"u{u}": (u % 10) / 10 + shift for u in range(50)})
        records.append(rec)
    # d was searched: XSimGCL's d = 32 is its best setting, not another comparison
    assert "Verdict: MGFormer is **behind** XSimGCL by" in render_dataset("ml-100k", records)


def test_a_seed_twice_in_one_row_is_an_error_naming_both_records():
    twins = [
        {**record("MGFormer", "MGFormer", 0, 0.15, 0.07), "_path": "runs/a/mgformer-seed0.json"},
        {**record("MGFormer", "MGFormer", 0, 0.16, 0.08), "_path": "runs/a/old-mgformer-seed0.json"},
    ]
    with pytest.raises(
        ValueError,
        match="two records of MGFormer at seed 0: runs/a/mgformer-seed0.json and runs/a/old-mgformer-seed0.json",
    ):
        render_dataset("amazon-beauty", twins)


def test_an_attention_probe_is_a_row_of_its_own_compared_with_the_probe_without_attention(tmp_path):
    from recbole_mgformer.benchmark.stats import write_per_user

    folder = tmp_path / "runs" / "amazon-beauty"
    folder.mkdir(parents=True)
    schedule = {"epochs": 30, "stopping_step": 5}
    no_attention = {"attention": False}
    for name, overrides, probe, shift in (
        ("mgformer", {}, None, 0.0),
        ("mgformer-attention-false", no_attention, None, 0.01),
        ("probe-mgformer", {}, schedule, 0.02),
        ("probe-mgformer-attention-false", no_attention, schedule, 0.0),
    ):
        variant = "MGFormer attention=False" if overrides else "MGFormer"
        rec = {
            **record(variant, "MGFormer", 0, 0.15 + shift, 0.07 + shift),
            "overrides": overrides,
            "per_user": {"file": "x", "metric": "ndcg@20"},
            **({"probe_schedule": probe} if probe else {}),
        }
        path = folder / f"{name}-seed0.json"
        path.write_text(json.dumps(rec))
        write_per_user(path, {f"u{u}": (u % 10) / 10 + shift for u in range(50)})
    table = render_dataset("amazon-beauty", records_by_dataset(tmp_path / "runs")["amazon-beauty"])
    assert "| MGFormer | 1 | 0.1500 |" in table and "| MGFormer (30-epoch probe) | 1 | **0.1700** |" in table
    assert "Attention: MGFormer is **behind** MGFormer attention=False by" in table
    assert "Attention: MGFormer (30-epoch probe) is **ahead** of MGFormer attention=False (30-epoch probe) by" in table


def test_a_deterministic_row_shows_its_one_seed_and_stands_for_every_seed_in_a_paired_test(tmp_path):
    from recbole_mgformer.benchmark.stats import write_per_user

    tuning = {"text": "random search of 4 trials", "search": "results/tuning/x/MGFormer.md"}

    def rec(variant, seed, shift, deterministic=False):
        out = {
            **record(variant, variant, seed, 0.3 + shift, 0.25 + shift),
            "tuning": tuning,
            "overrides": {},
            "deterministic": deterministic,
            "per_user": {"file": "x", "metric": "ndcg@20"},
            "_path": str(tmp_path / f"{variant}-seed{seed}.json"),
        }
        write_per_user(out["_path"], {f"u{u}": (u % 10) / 10 + shift for u in range(50)})
        return out

    records = [rec("MGFormer", seed, 0.01) for seed in (0, 1, 2)] + [rec("EASE", 0, 0.0, deterministic=True)]
    records += [rec("BPR", seed, -0.02) for seed in (0, 1, 2)]
    table = render_dataset("x", records)
    assert "| EASE | 1 (deterministic) |" in table and "| MGFormer | 3 |" in table
    assert 'Seeds "1 (deterministic)": a closed-form model (EASE, ItemKNN, ...) on a split the seed does not' in table
    # EASE's one seed is paired with each of MGFormer's three (3 x 50 users), not with seed 0 alone
    assert (
        "Verdict: MGFormer is **ahead** of EASE by a paired Wilcoxon signed-rank test of test ndcg@20 over "
        "150 (seed, user) pairs from 3 seed(s)"
    ) in table
    # a row of one seed that is not deterministic pairs over the seed both rows have, as before
    records[3]["deterministic"] = False
    table = render_dataset("x", records)
    assert "| EASE | 1 |" in table and "over 50 (seed, user) pairs from 1 seed(s)" in table
    assert "(deterministic)" not in table


def test_the_parameters_column_counts_a_closed_form_models_stored_values_not_its_dummy_parameter():
    from recbole_mgformer.benchmark.general import parameters_cell

    assert parameters_cell({"parameters": 1000}) == "1,000"
    assert parameters_cell({"parameters": 1, "stored_values": 123456}) == "123,456"
    assert parameters_cell({"parameters": 1}) == ""  # a closed-form record from before the count


def test_on_a_published_split_the_unsearched_runs_stand_under_the_datasets_own_heading(tmp_path):
    from recbole_mgformer.benchmark.datasets import OLDER_RUNS_HEADING, untuned_heading

    tuning = {"text": "random search of 8 trials", "search": "results/tuning/gowalla-full/SLIMElastic.md"}
    searched = {**record("SLIMElastic", "SLIMElastic", 0, 0.18, 0.15), "tuning": tuning}
    records = [searched, record("GFCF", "GFCF", 0, 0.1849, 0.1518)]
    table = render_dataset("gowalla-full", records)
    searched_part, fixed_part = table.split(f"### {untuned_heading('gowalla-full')}")
    assert "| SLIMElastic |" in searched_part and "| GFCF |" in fixed_part
    assert OLDER_RUNS_HEADING not in table
    assert f"### {OLDER_RUNS_HEADING}" in render_dataset("ml-100k", records)


def test_rows_their_epoch_cap_ended_are_named_under_the_table_and_a_fitted_once_model_never():
    # the page showed a 6-epoch row still improving beside 30-epoch rows with nothing to say it was capped
    def capped(variant, seed, at_cap, **more):
        return {**record(variant, "MGFormer", seed, 0.2, 0.1), "epoch_cap": 6, "best_epoch_at_cap": at_cap, **more}

    records = [
        capped("Short", 0, True),
        capped("Short", 1, False),
        capped("Stopped", 0, False),
        capped("BSPM", 0, True, stored_values=10),  # fit once: its one epoch is its fit
        record("Uncapped", "BPR", 0, 0.1, 0.05),  # written before records kept their cap
    ]
    page = render_dataset("toy", records)
    assert "Ended by their epoch cap, not by early stopping" in page
    line = next(line for line in page.splitlines() if line.startswith("Ended by their epoch cap"))
    assert line.endswith(": Short (cap 6; 1 of 2 seeds).")
    assert "Ended by their epoch cap" not in render_dataset("toy", [capped("Stopped", 0, False), records[3]])
