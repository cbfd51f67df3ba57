"""data/train_protocols.py: each protocol's loader, and the protocols and settings a model refuses, by name."""

import pytest
from recbole.data.dataloader.general_dataloader import TrainDataLoader

from recbole_mgformer.data.user_batches import UserBatchLoader

SOFTMAX = {"loss": "softmax", "attention": False, "train_protocol": "user"}


@pytest.mark.parametrize("overrides, loader", [({"loss": "softmax"}, TrainDataLoader), (SOFTMAX, UserBatchLoader)])
def test_a_general_model_trains_on_its_protocols_loader(tiny_setup, overrides, loader):
    _, _, _, (train, _, _) = tiny_setup(**overrides)
    assert type(train) is loader


@pytest.mark.parametrize(
    "model, overrides, message",
    [
        ("MGFormer", {"train_protocol": "user"}, "train_protocol: user batches a user's pairs for loss: softmax"),
        ("BPR", {"train_protocol": "user"}, "BPR does not train under train_protocol='user'.*MGFormer with loss"),
        ("MGFormer", {"train_protocol": "users"}, "train_protocol='users' must be one of prefix, sequence, user"),
        ("MGFormer", {**SOFTMAX, "train_window_stride": 5}, "train_window_stride applies to train_protocol: sequence"),
        ("MGFormer", {"loss": "softmax", "train_user_chunk": 2}, "train_user_chunk applies to train_protocol: user"),
        ("MGFormer", {**SOFTMAX, "train_user_chunk": 0}, "train_user_chunk=0 must be a whole number of pairs"),
        ("MGFormer", {**SOFTMAX, "train_user_chunk": 2.5}, "train_user_chunk=2.5 must be a whole number of pairs"),
    ],
)
def test_a_protocol_a_model_does_not_train_under_is_an_error_naming_the_fix(tiny_setup, model, overrides, message):
    with pytest.raises(ValueError, match=message):
        tiny_setup(model, **overrides)
