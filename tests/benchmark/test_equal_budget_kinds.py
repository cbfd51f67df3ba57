"""``--tune-budget`` on sequential and context datasets, as on general ones: a search per model, its seeds, the
per-user (sequential) or per-row (context) test outputs beside each record, and a page with intervals and verdicts."""

import json

import numpy as np
import pytest
from conftest import benchmark_args, search_budget_args, write_context_dataset
from test_tuning import faked_search

from recbole_mgformer.benchmark import main
from recbole_mgformer.benchmark.stats import read_per_row, read_per_user

SEQ_CONFIG = """benchmark_table: sequential
benchmark_page: tinyseq
load_col: {inter: [user_id, item_id, timestamp]}
MAX_ITEM_LIST_LENGTH: 10
eval_args: {split: {LS: valid_and_test}, order: TO, group_by: user, mode: full}
metrics: [Recall, MRR, NDCG]
topk: [5, 10]
valid_metric: NDCG@10
train_neg_sample_args: ~
"""

CTX_CONFIG = """benchmark_table: context
benchmark_page: tinyctx
load_col: {inter: [user_id, item_id, rating], user: [user_id, gender], item: [item_id, genres, year]}
threshold: {rating: 3}
numerical_features: []
eval_args: {split: {RS: [0.5, 0.2, 0.3]}, order: RO, group_by: ~, mode: labeled}
train_neg_sample_args: ~
metrics: [AUC, LogLoss]
valid_metric: AUC
"""


def write_sequences(folder, name, n_users=30, n_items=40, per_user=10, seed=0):
    """Users walking through items in order (the next item follows the last), so a sequential model can learn."""
    rng = np.random.default_rng(seed)
    lines = ["user_id:token\titem_id:token\ttimestamp:float"]
    for user in range(n_users):
        start = int(rng.integers(n_items))
        lines += [f"u{user}\ti{(start + t) % n_items}\t{t}" for t in range(per_user)]
    (folder / name).mkdir(parents=True)
    (folder / name / f"{name}.inter").write_text("\n".join(lines) + "\n")
    return folder


def budget_args(tmp_path, models, dataset, data):
    settings = ["--epochs=2", "--stopping_step=1", "--state=WARNING", "--train_batch_size=64"]
    return benchmark_args(
        models, data, tmp_path, *search_budget_args(tmp_path), *settings, dataset=dataset, seeds="0,1"
    )


def test_a_sequential_dataset_is_searched_seeded_and_judged_by_its_users(
    tmp_path, monkeypatch, dataset_configs, capsys
):
    dataset_configs("tinyseq", SEQ_CONFIG)
    data = write_sequences(tmp_path / "data", "tinyseq")
    calls = faked_search(monkeypatch, params={"learning_rate": 0.01})
    assert main(budget_args(tmp_path, "EAGPS,SASRec,GRU4Rec", "tinyseq", data)) == 0
    assert [call["model"] for call in calls] == ["EAGPS", "SASRec", "GRU4Rec"]
    assert {call["samples"] for call in calls} == {2} and {call["config_dict"]["epochs"] for call in calls} == {2}
    runs = tmp_path / "results" / "runs" / "tinyseq"
    for stem in ("eagps", "sasrec", "gru4rec"):
        for seed in (0, 1):
            record = json.loads((runs / f"{stem}-seed{seed}.json").read_text())
            assert record["config"]["learning_rate"] == 0.01 and record["epoch_cap"] == 2
            assert record["per_user"]["metric"] == "ndcg@10"
            users = read_per_user(runs / f"{stem}-seed{seed}.json")
            assert len(users) == 30  # leave-one-out: one test item per user
            assert np.mean(list(users.values())) == pytest.approx(record["test"]["ndcg@10"], abs=1e-4)
    page = (tmp_path / "results" / "tinyseq" / "leaderboard.md").read_text()
    assert "### Tuned with the same budget: random search of 2 trials" in page
    assert "| EAGPS | 2 | " in page and " ± " in page and "| best epoch | epoch cap | at cap |" in page
    verdict = next(line for line in page.splitlines() if line.startswith("Verdict: EAGPS is **"))
    assert "paired Wilcoxon signed-rank test of test ndcg@10 over 60 (seed, user) pairs from 2 seed(s)" in verdict
    every = next(line for line in page.splitlines() if line.startswith("Against each model: EAGPS is "))
    assert "SASRec" in every and "GRU4Rec" in every
    assert "Searches: EAGPS `" in page and "tuning/tinyseq/SASRec.md`" in page


def test_a_context_dataset_is_searched_seeded_and_judged_by_a_bootstrap_of_its_rows(
    tmp_path, monkeypatch, dataset_configs
):
    dataset_configs("tinyctx", CTX_CONFIG)
    data = write_context_dataset(tmp_path / "data", "tinyctx")
    calls = faked_search(monkeypatch, params={"learning_rate": 0.01})
    assert main(budget_args(tmp_path, "CSA,LR,FM", "tinyctx", data)) == 0
    assert [call["model"] for call in calls] == ["CSA", "LR", "FM"]
    runs = tmp_path / "results" / "runs" / "tinyctx"
    labels = {}
    for stem in ("csa", "lr", "fm"):
        for seed in (0, 1):
            record = json.loads((runs / f"{stem}-seed{seed}.json").read_text())
            rows = read_per_row(runs / f"{stem}-seed{seed}.json")
            assert record["per_row"]["rows"] == len(rows[0]) > 0 and record["epoch_cap"] == 2
            assert ((rows[1] >= 0) & (rows[1] <= 1)).all()
            labels.setdefault(seed, rows[0])
            assert np.array_equal(labels[seed], rows[0])  # the seed draws one split for every model
    page = (tmp_path / "results" / "tinyctx" / "leaderboard.md").read_text()
    assert "## Tuned with the same budget: random search of 2 trials" in page and " ± " in page
    assert "Epoch cap 2;" in page and "tuning/tinyctx/CSA.md`" in page
    verdicts = [line for line in page.splitlines() if "Verdict: CSA is **" in line]
    assert len(verdicts) == 2 and "paired bootstrap of test AUC" in verdicts[0]
    assert "paired bootstrap of test LogLoss" in verdicts[1]
    assert any("Against each model (AUC): CSA is " in line for line in page.splitlines())


def test_every_model_of_an_equal_budget_comparison_trains_under_the_same_cap(tmp_path, dataset_configs, capsys):
    dataset_configs("tinyseq", SEQ_CONFIG)
    data = write_sequences(tmp_path / "data", "tinyseq")
    args = [a for a in budget_args(tmp_path, "EAGPS,SASRec[epochs=5]", "tinyseq", data) if a != "--epochs=2"]
    with pytest.raises(SystemExit):
        main(args)
    error = capsys.readouterr().err
    assert "every model of tinyseq trains under the same epoch cap" in error
    assert "EAGPS epochs 300, stopping_step 1" in error and "SASRec epochs=5 epochs 5" in error
    assert not (tmp_path / "results").exists()  # refused before any search or run


def test_a_page_tuned_with_the_defaults_first_says_so_and_a_mixed_one_says_it_is_not_one_budget(
    tmp_path, monkeypatch, dataset_configs
):
    dataset_configs("tinyseq", SEQ_CONFIG)
    data = write_sequences(tmp_path / "data", "tinyseq")
    calls = faked_search(monkeypatch, params={"learning_rate": 0.01})
    args = [a if a != "0,1" else "0" for a in budget_args(tmp_path, "EAGPS,SASRec", "tinyseq", data)]
    assert main(args + ["--tune-defaults-first"]) == 0
    assert [call["defaults_first"] for call in calls] == [True, True]
    page = (tmp_path / "results" / "tinyseq" / "leaderboard.md").read_text()
    assert (
        "### Tuned with the same budget: random search of 2 trials, search seed 0, ASHA grace 5 of at most 2 "
        "epochs, first trial: each model's own defaults"
    ) in page
    assert "Not one protocol" not in page
    args = [a if a != "EAGPS,SASRec" else "GRU4Rec" for a in args]
    assert main(args) == 0  # GRU4Rec searched without the defaults first: a section of its own, and the page says why
    assert calls[-1]["model"] == "GRU4Rec" and calls[-1]["defaults_first"] is False
    page = (tmp_path / "results" / "tinyseq" / "leaderboard.md").read_text()
    assert page.count("### Tuned with the same budget: ") == 2
    assert (
        "Not one protocol: the searches of EAGPS, SASRec ran each model's own defaults as their first trial "
        "(--tune-defaults-first), those of GRU4Rec drew every trial"
    ) in page
