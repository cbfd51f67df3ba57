"""The training-free filters through the project's runner and ``recommend``, and the shared helpers."""

import copy
import math

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from conftest import TINY_CONFIG
from recbole.utils.case_study import full_sort_topk

from recbole_mgformer import run_recommender
from recbole_mgformer.model.filters import ItemGraph, degree_power, integrate, normalized_interactions
from recbole_mgformer.recommend import load, recommend

FILTERS = {"GFCF": {"k": 8}, "BSPM": {"factor_dim": 8}, "TurboCF": {}, "ChebyCF": {"eta": 8}}
QUIET = {"show_progress": False, "state": "WARNING"}


def test_degree_power_gives_zero_for_zero_degree_whatever_the_sign():
    assert degree_power([0, 4], -0.5).tolist() == [0.0, 0.5]
    assert degree_power([0, 4], 0.5).tolist() == [0.0, 2.0]


def test_normalized_interactions_scale_rows_and_columns():
    r = sp.csr_matrix(np.array([[1.0, 1.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 0.0]]))
    expected = np.array([[2**-0.7 * 1**-0.3, 2**-0.7 * 2**-0.3, 0], [0, 1 * 2**-0.3, 0], [0, 0, 0]])
    np.testing.assert_allclose(normalized_interactions(r, 0.7, 0.3).toarray(), expected)


def test_factored_and_explicit_item_graphs_agree():
    rng = np.random.default_rng(0)
    n = sp.csr_matrix(rng.random((7, 5)) * (rng.random((7, 5)) < 0.5))
    x = torch.from_numpy(rng.random((3, 5))).float()
    factored, explicit = ItemGraph(factor=n), ItemGraph(matrix=sp.csr_matrix(n.T @ n))
    torch.testing.assert_close(factored(x), explicit(x))
    torch.testing.assert_close(factored(x), x @ torch.from_numpy((n.T @ n).toarray()).float())


@pytest.mark.parametrize("solver,order", [("euler", 1), ("rk4", 4)])
def test_solvers_step_with_the_taylor_polynomial_of_their_order(solver, order):
    a = torch.tensor([[0.2, -0.5], [0.3, 0.1]], dtype=torch.float64)
    start, h = torch.tensor([[1.0, 2.0]], dtype=torch.float64), 0.4
    states = integrate(lambda r: r @ a, start, 1.2, 3, solver)
    step = sum(torch.linalg.matrix_power(h * a, j) / math.factorial(j) for j in range(order + 1))
    expected = [start @ torch.linalg.matrix_power(step, n) for n in (1, 2, 3)]
    for got, want in zip(states, expected):
        torch.testing.assert_close(got, want)


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """``{model: (checkpoint, result)}`` of runs on the tiny dataset through ``run_recommender``."""
    from conftest import write_interactions

    folder = tmp_path_factory.mktemp("filters")
    data = write_interactions(folder / "data")
    found = {}
    for name, settings in FILTERS.items():
        result = run_recommender(
            name,
            "tiny",
            config_dict={**TINY_CONFIG, **settings, "data_path": str(data), "checkpoint_dir": str(folder / "saved")},
        )
        (path,) = (folder / "saved").glob(f"{name}-*.pth")
        found[name] = (path, result)
    return found


@pytest.mark.parametrize("name", FILTERS)
def test_runs_one_fit_and_its_checkpoint_reloads_to_the_same_ranking(checkpoints, name):
    path, result = checkpoints[name]
    assert result["test_result"]["ndcg@20"] > 0
    assert set(torch.load(path, weights_only=True)["state_dict"]) == {"fake_loss"}  # refitted on load
    users = ["u0", "u7", "u13", "u39"]
    top = recommend(path, users, k=10)
    _, model, dataset, train_data, valid_data, _ = load(path)
    uids = torch.tensor([dataset.token2id(dataset.uid_field, u) for u in users])
    _, items = full_sort_topk(uids, model, valid_data, k=10)  # the evaluator's ranking, training items out
    train = train_data.dataset.inter_matrix(form="csr")
    for user, uid, row in zip(users, uids.tolist(), items.tolist()):
        assert [item for item, _ in top[user]] == list(dataset.id2token(dataset.iid_field, row))
        assert not set(train[uid].indices) & set(row)


@pytest.mark.slow
@pytest.mark.parametrize("name", FILTERS)
def test_fits_ml_100k_above_popularity_with_the_papers_defaults(ml100k_pop, name):
    result = run_recommender(name, "ml-100k", config_dict=QUIET, saved=False)
    assert result["test_result"]["ndcg@20"] > ml100k_pop["test_result"]["ndcg@20"]


def test_cached_blocks_score_users_in_any_order_as_filtering_them_directly(tiny_setup):
    _, model, _, _ = tiny_setup("GFCF", k=8, filter_batch_size=4)
    users = torch.tensor([9, 2, 3, 17, 2, 40, 0, 9])
    first, again = model.score_users(users), model.score_users(users.flip(0))
    direct = model.filter_rows(model.user_rows(users))
    torch.testing.assert_close(first, direct)
    torch.testing.assert_close(again, direct.flip(0))


@pytest.mark.parametrize("keep", [False, True])
def test_kept_scores_filter_each_block_once_and_are_the_scores_filtered_afresh_exactly(tiny_setup, keep):
    # the same block filtered again gives the same bits: a kept block is what a fresh filtering would give
    _, model, _, _ = tiny_setup("BSPM", factor_dim=8, filter_batch_size=4)
    orders = [torch.tensor([9, 2, 3, 17, 2, 40, 0, 9]), torch.tensor([40, 0, 1, 2, 3, 4, 18])]
    fresh = [model.score_users(users) for users in orders]  # the last block cached only: each filtered again
    model.keep_scores = keep
    original, filtered = model.filter_rows, []
    model.filter_rows = lambda rows: filtered.append(len(rows)) or original(rows)
    for _ in range(2):  # two evaluations
        for users, expected in zip(orders, fresh):
            assert torch.equal(model.score_users(users), expected)
    blocks = len({u // 4 for users in orders for u in users.tolist()})
    assert len(filtered) <= blocks if keep else len(filtered) > blocks  # kept: each block filtered once at most
    copied = copy.deepcopy(model)  # RecBole's run_recbole deep-copies a model to count its FLOPs
    assert all(copied._blocks[block] is scores for block, scores in model._blocks.items())
    model.to(torch.float64)  # a kept block moves with the model
    assert model._blocks and all(scores.dtype == torch.float64 for scores in model._blocks.values())


def test_the_fit_time_is_kept_since_the_trainers_epoch_does_not_include_it(tiny_setup):
    _, model, _, _ = tiny_setup("TurboCF")
    assert 0 < model.fit_seconds < 60
