import pytest
import torch
from references import ML100K_FAST, direct_bpr_and_reg, direct_info_nce, noisy

from recbole_mgformer import run_recommender
from recbole_mgformer.model.general_recommender.xsimgcl import XSimGCL


def test_loss_contrasts_the_final_view_with_layer_cl_of_one_noisy_propagation(tiny_setup, dense_adjacency):
    _, model, _, (train, _, _) = tiny_setup("XSimGCL", n_layers=3, layer_cl=2)
    batch = next(iter(train))
    model.noise_generator.manual_seed(11)
    loss = model.calculate_loss(batch)

    a, e0 = dense_adjacency(train), model.ego_embeddings().detach()
    generator = torch.Generator().manual_seed(11)
    layers, x = [], e0
    for _ in range(3):
        x = noisy(a @ x, model.eps, generator)
        layers.append(x)
    final, cl_view = torch.stack(layers).mean(dim=0), layers[1]
    users = torch.unique(batch[model.USER_ID])
    items = torch.unique(batch[model.ITEM_ID]) + model.n_users
    cl = direct_info_nce(final[users], cl_view[users], model.tau) + direct_info_nce(
        final[items], cl_view[items], model.tau
    )
    expected = direct_bpr_and_reg(model, batch, *final.split([model.n_users, model.n_items])) + model.cl_weight * cl
    torch.testing.assert_close(loss, expected)


def test_evaluation_uses_the_clean_propagation(tiny_setup, dense_adjacency):
    _, model, _, (train, _, _) = tiny_setup("XSimGCL")
    a, e0 = dense_adjacency(train), model.ego_embeddings().detach()
    model.eval()
    with torch.no_grad():
        users, items = model.representations()
    torch.testing.assert_close(torch.cat([users, items]), torch.stack([a @ e0, a @ a @ e0]).mean(dim=0))


def test_layer_cl_beyond_the_last_layer_is_refused(tiny_setup):
    with pytest.raises(ValueError, match="XSimGCL: layer_cl=3 must be at most n_layers=2"):
        tiny_setup("XSimGCL", layer_cl=3)


@pytest.mark.slow
def test_learns_on_ml_100k_far_above_popularity(ml100k_pop):
    result = run_recommender(XSimGCL, "ml-100k", config_dict=ML100K_FAST)
    assert result["test_result"]["ndcg@20"] > 1.3 * ml100k_pop["test_result"]["ndcg@20"]
