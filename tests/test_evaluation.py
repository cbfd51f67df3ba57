import math

import numpy as np
import pytest
import torch
from conftest import write_split

from recbole_mgformer.evaluation import (
    TopItemsRecorder,
    evaluate_with_top_items,
    metrics_by_group,
    ndcg_by_user,
    popularity_groups,
    same_evaluation,
    training_counts,
)


def test_groups_follow_the_80_15_5_rule_with_ties_by_id():
    counts = np.array([0, 5, 1, 1, 9, 3, 2, 2, 7, 4, 0, 6, 8, 1, 1, 3, 2, 2, 5, 4, 3])  # item 0 is padding
    groups = popularity_groups(counts)
    assert groups[0] == -1
    assert (groups == 0).sum() == 16 and (groups == 2).sum() == 1 and (groups == 1).sum() == 3
    assert groups[4] == 2  # the most interacted item
    assert groups[[12, 8, 11]].tolist() == [1, 1, 1]  # the next ones
    assert groups[10] == 0 and groups[2] == 0


def direct_group_metrics(model, eval_data, groups, k):
    """Per user, one at a time: rank every item, mask the history, score the group's test items."""
    sums = {}
    for interaction, history, positive_u, positive_i in eval_data:
        scores = model.full_sort_predict(interaction).view(len(interaction), -1).clone()
        scores[:, 0] = -math.inf
        scores[history] = -math.inf
        for row in range(len(interaction)):
            ranking = scores[row].topk(k).indices.tolist()
            relevant = set(positive_i[positive_u == row].tolist())
            for group in set(groups.tolist()) - {-1}:
                mine = {i for i in relevant if groups[i] == group}
                if not mine:
                    continue
                hits = [1.0 if item in mine else 0.0 for item in ranking]
                dcg = sum(h / math.log2(r + 2) for r, h in enumerate(hits))
                idcg = sum(1 / math.log2(r + 2) for r in range(min(len(mine), k)))
                total = sums.setdefault(group, [0.0, 0.0, 0])
                total[0] += sum(hits) / len(mine)
                total[1] += dcg / idcg
                total[2] += 1
    return {g: (r / n, d / n, n) for g, (r, d, n) in sums.items()}


@pytest.fixture
def trained(tiny_setup):
    _, model, trainer, (train, valid, test) = tiny_setup(
        "BPR", epochs=1, train_neg_sample_args={"distribution": "uniform", "sample_num": 1}
    )
    trainer.fit(train, valid, saved=False, show_progress=False)
    return model, trainer, train, test


def test_one_group_of_every_item_equals_recboles_own_metrics_of_the_same_pass(trained):
    model, trainer, _, test = trained
    expected, top_items = evaluate_with_top_items(trainer, test, 20, load_best_model=False)
    everything = np.zeros(test._dataset.item_num, dtype=np.int64)
    result = metrics_by_group(top_items, everything, k=20)["0"]
    assert result["recall@20"] == pytest.approx(expected["recall@20"], abs=1e-4)
    assert result["ndcg@20"] == pytest.approx(expected["ndcg@20"], abs=1e-4)
    assert result["users"] == len(top_items.users) == len(test.uid_list)


def test_groups_equal_the_direct_per_user_computation(trained):
    model, trainer, train, test = trained
    groups = popularity_groups(training_counts(train))
    _, top_items = evaluate_with_top_items(trainer, test, 20, load_best_model=False)
    result = metrics_by_group(top_items, groups, k=5)
    with torch.no_grad():
        direct = direct_group_metrics(model, test, groups, k=5)
    for index, name in enumerate(("Unpopular", "Normal", "Popular")):
        if index not in direct:
            assert result[name]["users"] == 0
            continue
        recall, ndcg, users = direct[index]
        assert result[name]["users"] == users
        assert result[name]["recall@5"] == pytest.approx(recall)
        assert result[name]["ndcg@5"] == pytest.approx(ndcg)


def test_per_user_ndcg_averages_to_recboles_ndcg_and_is_keyed_by_user_token(tiny_setup):
    _, _, trainer, (train_data, _, test_data) = tiny_setup("BPR")
    trainer.fit(train_data, saved=False, show_progress=False)
    result, top_items = evaluate_with_top_items(trainer, test_data, 20, load_best_model=False)
    values = ndcg_by_user(top_items, test_data._dataset, k=20)
    assert len(values) == 40 and all(token.startswith("u") for token in values)
    assert sum(values.values()) / len(values) == pytest.approx(result["ndcg@20"], abs=1e-4)
    with pytest.raises(ValueError, match="at least 50 items; this one keeps 20"):
        ndcg_by_user(top_items, test_data._dataset, k=50)


def test_the_recorder_keeps_the_best_epochs_pass_and_gives_the_trainer_back(tiny_setup):
    _, _, trainer, (train, valid, _) = tiny_setup("BPR", epochs=4, stopping_step=10)
    with TopItemsRecorder(trainer, 20) as recorder:
        trainer.fit(train, valid, saved=True, show_progress=False)
    assert "evaluate" not in vars(trainer) and "_full_sort_batch_eval" not in vars(trainer)
    kept = recorder.top_items_of(trainer.best_valid_result)
    assert kept is not None and recorder.top_items_of({}) is None
    # the best checkpoint, evaluated again, ranks exactly as the kept pass did
    result, again = evaluate_with_top_items(trainer, valid, 20, load_best_model=True)
    assert result == trainer.best_valid_result
    for field in ("users", "items", "hits", "positive_rows", "positive_items"):
        assert torch.equal(getattr(kept, field), getattr(again, field)), field


@pytest.mark.parametrize("test_file, same", [("test", True), ("valid", False)])
def test_a_validation_file_that_is_the_test_file_evaluates_the_same(tiny_setup, tmp_path, test_file, same):
    settings = write_split(tmp_path / "split", "tiny", test_file)
    _, _, _, (_, valid, test) = tiny_setup("BPR", **settings)
    assert same_evaluation(valid, test) is same
    assert same_evaluation(test, test)


def test_loaders_of_different_splits_do_not_evaluate_the_same(trained):
    _, trainer, train, test = trained
    assert not same_evaluation(train, test)  # a training loader does not rank
