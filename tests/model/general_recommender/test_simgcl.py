import pytest
import torch
from references import ML100K_SHORT_FAST_RATE, direct_bpr_and_reg, direct_info_nce, noisy

from recbole_mgformer import run_recommender
from recbole_mgformer.model.general_recommender.simgcl import SimGCL


def test_forward_averages_layers_one_to_l_of_the_dense_propagation(tiny_setup, dense_adjacency):
    _, model, _, (train, _, _) = tiny_setup("SimGCL", n_layers=3)
    a, e0 = dense_adjacency(train), model.ego_embeddings().detach()
    expected = torch.stack([a @ e0, a @ a @ e0, a @ a @ a @ e0]).mean(dim=0)
    with torch.no_grad():
        users, items = model()
    torch.testing.assert_close(torch.cat([users, items]), expected)


def test_loss_is_bpr_plus_l2_plus_weighted_info_nce_of_two_noisy_views(tiny_setup, dense_adjacency):
    _, model, _, (train, _, _) = tiny_setup("SimGCL")
    batch = next(iter(train))
    model.noise_generator.manual_seed(5)
    loss = model.calculate_loss(batch)

    a, e0 = dense_adjacency(train), model.ego_embeddings().detach()
    generator = torch.Generator().manual_seed(5)
    clean = torch.stack([a @ e0, a @ a @ e0]).mean(dim=0)

    def view():
        first = noisy(a @ e0, model.eps, generator)
        return torch.stack([first, noisy(a @ first, model.eps, generator)]).mean(dim=0)

    view1, view2 = view(), view()
    users = torch.unique(batch[model.USER_ID])
    items = torch.unique(batch[model.ITEM_ID]) + model.n_users
    cl = direct_info_nce(view1[users], view2[users], model.tau) + direct_info_nce(view1[items], view2[items], model.tau)
    expected = direct_bpr_and_reg(model, batch, *clean.split([model.n_users, model.n_items])) + model.cl_weight * cl
    torch.testing.assert_close(loss, expected)


def test_the_shared_first_layer_gives_the_loss_and_gradients_of_three_separate_propagations(tiny_setup):
    """The step computes A_hat E_0 once for the clean propagation and both views; each propagated on its own from
    E_0, with the same noise, gives the same loss and the same gradients."""
    _, model, _, (train, _, _) = tiny_setup("SimGCL", n_layers=3)
    batch = next(iter(train))
    model.noise_generator.manual_seed(5)
    loss = model.calculate_loss(batch)
    grads = torch.autograd.grad(loss, list(model.parameters()))
    model.noise_generator.manual_seed(5)
    uniform = model.noise_draws(2)
    users, items = batch[model.USER_ID], batch[model.ITEM_ID]
    separate = model.recommendation_loss(batch, *model.forward()) + model.cl_weight * model.contrastive_loss(
        users, items, model.forward(uniform[0]), model.forward(uniform[1])
    )
    torch.testing.assert_close(loss, separate)
    for ours, theirs in zip(grads, torch.autograd.grad(separate, list(model.parameters()))):
        torch.testing.assert_close(ours, theirs)


def test_views_are_reproducible_from_the_seed(tiny_setup):
    _, first, _, _ = tiny_setup("SimGCL", seed=3)
    _, second, _, _ = tiny_setup("SimGCL", seed=3)
    with torch.no_grad():
        torch.testing.assert_close(first(first.noise_draws(1)[0]), second(second.noise_draws(1)[0]))
        assert not torch.equal(first(first.noise_draws(1)[0])[0], first(first.noise_draws(1)[0])[0])


def test_evaluation_is_clean_and_cached_until_the_next_training_step(tiny_setup):
    _, model, _, (train, _, test) = tiny_setup("SimGCL")
    model.eval()
    batch = next(iter(test))[0]
    with torch.no_grad():
        scores = model.full_sort_predict(batch)
        cached = model.restore_user_e
        torch.testing.assert_close(model.full_sort_predict(batch), scores)
        assert model.restore_user_e is cached
        users, items = model()
    assert scores.shape == (len(batch) * model.n_items,)  # RecBole flattens full-sort scores
    torch.testing.assert_close(scores.view(len(batch), -1), users[batch[model.USER_ID]] @ items.T)
    model.train()
    assert model.restore_user_e is None


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"eps": -0.1}, "SimGCL: eps must be a number >= 0"),
        ({"tau": 0}, "SimGCL: tau must be a number > 0"),
        ({"n_layers": 0}, "SimGCL: n_layers must be a positive integer"),
        ({"lambda": "high"}, "SimGCL: lambda must be a number >= 0"),
    ],
)
def test_bad_options_raise_clear_errors(tiny_setup, overrides, message):
    with pytest.raises(ValueError, match=message):
        tiny_setup("SimGCL", **overrides)


def test_resolves_by_name_and_trains_through_the_runner(tiny_data):
    result = run_recommender(
        "simgcl",
        "tiny",
        config_dict={
            "data_path": str(tiny_data),
            "epochs": 2,
            "embedding_size": 8,
            "show_progress": False,
            "state": "WARNING",
        },
    )
    assert 0 < result["test_result"]["ndcg@20"] <= 1  # the general protocol of a dataset without a YAML


@pytest.mark.slow
def test_learns_on_ml_100k_far_above_popularity(ml100k_pop):
    result = run_recommender(SimGCL, "ml-100k", config_dict=ML100K_SHORT_FAST_RATE)
    assert result["test_result"]["ndcg@20"] > 1.3 * ml100k_pop["test_result"]["ndcg@20"]
