"""The project's GRU4Rec against RecBole's: same weights, batch and dropout mask give the same loss, gradients and
scores; in training its dropout draws have RecBole's distribution."""

import math

import pytest
import torch
from sequence_data import (  # noqa: F401 (a fixture)
    assert_same_loss_and_gradients,
    assert_same_scores,
    recbole_twin,
    sequential_setup_fixture,
)

import recbole_mgformer.model.sequential_recommender.gru4rec as gru4rec_module
from recbole_mgformer.integration.registry import get_model
from recbole_mgformer.model.dropout import keep_scale
from recbole_mgformer.model.recbole_sequential import recbole_sequential_model
from recbole_mgformer.model.sequential_recommender.gru4rec import GRU4Rec

RecBoleGRU4Rec = recbole_sequential_model("GRU4Rec")
SMALL = {"embedding_size": 8, "hidden_size": 12}


def test_the_registry_gives_this_projects_gru4rec_a_subclass_of_recboles():
    assert get_model("GRU4Rec") is GRU4Rec and issubclass(GRU4Rec, RecBoleGRU4Rec)


@pytest.mark.parametrize(
    "settings",
    [
        {"num_layers": 1, "loss_type": "CE"},
        {"num_layers": 2, "loss_type": "CE"},
        {"num_layers": 1, "loss_type": "BPR", "train_neg_sample_args": {"distribution": "uniform", "sample_num": 1}},
    ],
)
@pytest.mark.parametrize("mode", ["eval", "train without dropout"])
def test_same_weights_and_batch_give_recboles_loss_gradients_and_scores(sequential_setup, settings, mode):
    overrides = {**SMALL, **settings, **({"dropout_prob": 0.0} if mode != "eval" else {})}
    config, model, (train, _, test) = sequential_setup("GRU4Rec", **overrides)
    twin = recbole_twin(RecBoleGRU4Rec, config, model, train)
    assert list(model.state_dict()) == list(twin.state_dict())
    model.train(mode != "eval"), twin.train(mode != "eval")
    batch = next(iter(train))
    assert_same_loss_and_gradients(model, twin, model.calculate_loss(batch), twin.calculate_loss(batch))
    assert_same_scores(model, twin, batch, test)


class FixedMask(torch.nn.Module):
    def __init__(self, mask):
        super().__init__()
        self.mask = mask

    def forward(self, x):
        return x * self.mask


def test_in_training_the_same_dropout_mask_gives_recboles_loss_and_gradients(sequential_setup, monkeypatch):
    config, model, (train, _, _) = sequential_setup("GRU4Rec", dropout_prob=0.3, **SMALL)
    twin = recbole_twin(RecBoleGRU4Rec, config, model, train)
    model.train(), twin.train()
    batch = next(iter(train))
    mask = keep_scale((*batch[model.ITEM_SEQ].shape, config["embedding_size"]), 0.3)
    twin.emb_dropout = FixedMask(mask)
    monkeypatch.setattr(gru4rec_module, "dropout", lambda x, p, training: x * mask)
    ours, theirs = model.calculate_loss(batch), twin.calculate_loss(batch)
    assert_same_loss_and_gradients(model, twin, ours, theirs)


def test_in_training_the_loss_has_recboles_distribution_over_dropout_draws(sequential_setup):
    config, model, (train, _, _) = sequential_setup("GRU4Rec", dropout_prob=0.5, **SMALL)
    twin = recbole_twin(RecBoleGRU4Rec, config, model, train)
    model.train(), twin.train()
    batch = next(iter(train))
    draws, losses = 200, {}
    with torch.no_grad():
        for name, m in (("ours", model), ("recbole", twin)):
            torch.manual_seed(0)
            losses[name] = torch.stack([m.calculate_loss(batch) for _ in range(draws)]).double()
    ours, theirs = losses["ours"], losses["recbole"]
    assert ours.std() > 0 and not torch.equal(ours, theirs)
    assert abs(ours.mean() - theirs.mean()).item() < 4 * math.sqrt((ours.var() + theirs.var()).item() / draws)
    assert 0.8 < (ours.std() / theirs.std()).item() < 1.25


def test_the_encoder_is_float32_unless_bf16_is_asked_for_and_bf16_stays_close(sequential_setup):
    _, model, (train, _, _) = sequential_setup("GRU4Rec", **SMALL)
    _, fast, _ = sequential_setup("GRU4Rec", precision="bf16", **SMALL)
    assert model.encoder_dtype == torch.float32 and fast.encoder_dtype == torch.bfloat16
    fast.load_state_dict(model.state_dict())
    model.eval(), fast.eval()
    batch = next(iter(train))
    with torch.no_grad():
        exact, rounded = (
            model.forward(batch["item_id_list"], batch["item_length"]),
            fast.forward(batch["item_id_list"], batch["item_length"]),
        )
    assert rounded.dtype == torch.float32 and not torch.equal(exact, rounded)
    torch.testing.assert_close(rounded, exact, rtol=0.05, atol=0.05)


@pytest.mark.parametrize("num_layers", [1, 2])
def test_skipping_the_steps_past_each_end_gives_nn_grus_hidden_state_at_the_last_item(num_layers):
    torch.manual_seed(0)
    gru = torch.nn.GRU(6, 10, num_layers=num_layers, bias=False, batch_first=True)
    lengths = torch.tensor([3, 7, 1, 7, 5, 2])
    items = torch.randn(6, 7, 6, requires_grad=True)
    ours = gru4rec_module.gru_last_hidden(gru, items, lengths)
    outputs, _ = gru(items)
    theirs = outputs[torch.arange(6), lengths - 1]
    torch.testing.assert_close(ours, theirs, rtol=1e-6, atol=1e-7)
    (ours_grad,) = torch.autograd.grad(ours.square().sum(), items)
    (theirs_grad,) = torch.autograd.grad(theirs.square().sum(), items)
    torch.testing.assert_close(ours_grad, theirs_grad, rtol=1e-5, atol=1e-7)
    assert torch.all(ours_grad[0, 3:] == 0)  # nothing after a row's last item reaches its output
