"""The project's SASRec against RecBole's: same weights, batch and dropout masks give the same loss, gradients and
scores; in training the dropout draws have RecBole's distribution."""

import math
import subprocess
import sys

import pytest
import torch
from sequence_data import (  # noqa: F401 (a fixture)
    assert_same_loss_and_gradients,
    assert_same_scores,
    recbole_twin,
    sequential_setup_fixture,
)

import recbole_mgformer.model.sequential_recommender.sasrec as sasrec_module
from recbole_mgformer.integration.registry import get_model
from recbole_mgformer.model.dropout import keep_scale
from recbole_mgformer.model.recbole_sequential import recbole_sequential_model
from recbole_mgformer.model.sequential_recommender.sasrec import SASRec

RecBoleSASRec = recbole_sequential_model("SASRec")

SMALL = {"hidden_size": 16, "inner_size": 32, "n_heads": 2}


def test_the_registry_gives_this_projects_sasrec_a_subclass_of_recboles():
    assert get_model("SASRec") is SASRec and issubclass(SASRec, RecBoleSASRec)


def test_importing_it_leaves_autograd_anomaly_detection_off():
    code = "import torch, recbole_mgformer.model.sequential_recommender.sasrec; print(torch.is_anomaly_enabled())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_the_state_dict_keys_are_recboles(sequential_setup):
    config, model, (train, _, _) = sequential_setup("SASRec", **SMALL)
    assert list(model.state_dict()) == list(RecBoleSASRec(config, train._dataset).state_dict())


@pytest.mark.parametrize(
    "settings",
    [
        {"n_layers": 2, "loss_type": "CE"},
        {"n_layers": 1, "loss_type": "CE", "hidden_act": "relu"},
        {"n_layers": 3, "loss_type": "CE", "hidden_act": "swish", "n_heads": 4},
        {"n_layers": 2, "loss_type": "BPR", "train_neg_sample_args": {"distribution": "uniform", "sample_num": 1}},
    ],
)
@pytest.mark.parametrize("mode", ["eval", "train without dropout"])
def test_same_weights_and_batch_give_recboles_loss_gradients_and_scores(sequential_setup, settings, mode):
    overrides = {**SMALL, **settings}
    if mode != "eval":
        overrides |= {"hidden_dropout_prob": 0.0, "attn_dropout_prob": 0.0}
    config, model, (train, _, test) = sequential_setup("SASRec", **overrides)
    twin = recbole_twin(RecBoleSASRec, config, model, train)
    for m in (model, twin):
        m.train(mode != "eval")
    batch = next(iter(train))
    assert_same_loss_and_gradients(model, twin, model.calculate_loss(batch), twin.calculate_loss(batch))
    assert_same_scores(model, twin, batch, test)


class RecordedDropout(torch.nn.Module):
    """RecBole's dropout site drawing ``keep_scale`` masks into ``bank``, in the order of the forward pass."""

    def __init__(self, p, bank):
        super().__init__()
        self.p, self.bank = p, bank

    def forward(self, x):
        self.bank.append(keep_scale(x.shape, self.p))
        return x * self.bank[-1]


def banked_dropout(bank, item_seq, last):
    """The project's ``dropout`` reading RecBole's masks in order; where the project computes only the real items
    (packed, N rows) or only the rows ``last`` (B,) (the last layer), the same rows of the mask."""
    masks = iter(bank)
    real = item_seq != 0

    def dropout(x, p, training, generator=None):
        mask = next(masks)
        if x.dim() == 2:  # the real items, packed
            mask = mask[real]
        elif mask.shape != x.shape:
            rows = torch.arange(len(last))
            mask = mask[rows, :, last].unsqueeze(2) if mask.dim() == 4 else mask[rows, last].unsqueeze(1)
        assert mask.shape == x.shape
        return x * mask

    return dropout


@pytest.mark.parametrize("n_layers", [1, 2])
def test_in_training_the_same_dropout_masks_give_recboles_loss_and_gradients(sequential_setup, monkeypatch, n_layers):
    config, model, (train, _, _) = sequential_setup(
        "SASRec", n_layers=n_layers, hidden_dropout_prob=0.3, attn_dropout_prob=0.4, **SMALL
    )
    twin = recbole_twin(RecBoleSASRec, config, model, train)
    bank = []
    twin.dropout = RecordedDropout(0.3, bank)
    for layer in twin.trm_encoder.layer:
        layer.multi_head_attention.attn_dropout = RecordedDropout(0.4, bank)
        layer.multi_head_attention.out_dropout = RecordedDropout(0.3, bank)
        layer.feed_forward.dropout = RecordedDropout(0.3, bank)
    model.train(), twin.train()
    batch = next(iter(train))
    theirs = twin.calculate_loss(batch)
    assert len(bank) == 1 + 3 * n_layers
    monkeypatch.setattr(
        sasrec_module, "dropout", banked_dropout(bank, batch[model.ITEM_SEQ], batch[model.ITEM_SEQ_LEN] - 1)
    )
    ours = model.calculate_loss(batch)
    assert_same_loss_and_gradients(model, twin, ours, theirs)


def test_in_training_the_loss_has_recboles_distribution_over_dropout_draws(sequential_setup):
    config, model, (train, _, _) = sequential_setup("SASRec", hidden_dropout_prob=0.5, attn_dropout_prob=0.5, **SMALL)
    twin = recbole_twin(RecBoleSASRec, config, model, train)
    model.train(), twin.train()
    batch = next(iter(train))
    draws = 200
    losses = {}
    with torch.no_grad():
        for name, m in (("ours", model), ("recbole", twin)):
            torch.manual_seed(0)
            losses[name] = torch.stack([m.calculate_loss(batch) for _ in range(draws)]).double()
    ours, theirs = losses["ours"], losses["recbole"]
    assert ours.std() > 0 and not torch.equal(ours, theirs)  # dropout is on, and its draws are not RecBole's
    standard_error = math.sqrt((ours.var() + theirs.var()).item() / draws)
    assert abs(ours.mean() - theirs.mean()).item() < 4 * standard_error
    assert 0.8 < (ours.std() / theirs.std()).item() < 1.25


@pytest.mark.parametrize("key, value", [("hidden_act", "elu"), ("n_layers", 0)])
def test_impossible_settings_are_refused_by_name(sequential_setup, key, value):
    with pytest.raises(ValueError, match=key):
        sequential_setup("SASRec", **{**SMALL, key: value})


def test_the_encoder_is_float32_unless_bf16_is_asked_for_and_bf16_stays_close(sequential_setup):
    config, model, (train, _, _) = sequential_setup("SASRec", **SMALL)
    assert model.encoder_dtype == torch.float32
    _, fast, _ = sequential_setup("SASRec", precision="bf16", **SMALL)
    assert fast.encoder_dtype == torch.bfloat16
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
        torch.testing.assert_close(fast.calculate_loss(batch), model.calculate_loss(batch), rtol=0.01, atol=0.01)


def test_an_unknown_precision_is_refused_by_name(sequential_setup):
    with pytest.raises(ValueError, match="precision"):
        sequential_setup("SASRec", precision="fp8", **SMALL)
