from recbole_mgformer.benchmark.general import render_dataset


def record(variant, model, seed, recall, ndcg):
    return {"variant": variant, "model": model, "seed": seed, "test": {"recall@20": recall, "ndcg@20": ndcg},
            "valid": {"ndcg@20": ndcg}, "best_epoch": 3, "epochs": 14, "train_seconds_per_epoch": 2.0,
            "parameters": 1000, "machine": "cpu", "commit": "abc"}


def test_table_has_mean_and_95_percent_interval_bold_best_improvement_and_paper_numbers():
    records = [record("MGFormer", "MGFormer", 0, 0.15, 0.07), record("MGFormer", "MGFormer", 1, 0.17, 0.08),
               record("MGFormer degree_mask=none", "MGFormer", 0, 0.19, 0.09),
               record("DirectAU", "DirectAU", 0, 0.14, 0.06)]
    table = render_dataset("amazon-beauty", records)
    # two seeds: t(0.975, 1) = 12.706 times the standard error (0.01 and 0.005)
    assert "| MGFormer | 2 | 0.1600 ± 0.1271 | 0.0750 ± 0.0635 | 0.0750 | 0.1531 | 0.0748 |" in table
    assert "| MGFormer degree_mask=none | 1 | **0.1900** | **0.0900** | 0.0900 | 0.1501 | 0.0739 |" in table  # Table 3
    assert "| DirectAU | 1 | 0.1400 | 0.0600 | 0.0600 | 0.1465 | 0.0710 |" in table
    # the best other *model* is DirectAU, not another MGFormer variant
    assert "Best test ndcg@20: MGFormer degree_mask=none, +50.00% over the best other model (DirectAU)." in table


def test_columns_no_record_fills_are_left_out():
    # records of the retired ml-100k script: no epochs, timings or parameter count, but their wall time
    legacy = [{"variant": "BPR", "model": "BPR", "seed": 2020, "test": {"recall@20": 0.36, "ndcg@20": 0.31},
               "valid": {"ndcg@20": 0.26}, "seconds": 48.0, "machine": "cpu", "commit": "abc"}]
    table = render_dataset("ml-100k", legacy)
    assert "| model | seeds | test Recall@20 | test NDCG@20 | valid NDCG@20 | minutes |" in table
    assert "| BPR | 1 | **0.3600** | **0.3100** | 0.2600 | 0.8 |" in table
