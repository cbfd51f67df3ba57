"""``train_protocol: sequence`` for SASRec, GRU4Rec and EAGPS: with the same weights and no dropout or mask, the
loss over a batch of windows is the mean of RecBole's prefix-row losses for every position of those windows (the
models are causal); the loader draws each window once an epoch, about ``train_batch_size`` targets a step; the
options it cannot take are refused by name."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from recbole.data.interaction import Interaction
from sequence_data import recbole_twin, sequential_setup_fixture  # noqa: F401 (a fixture)

from recbole_mgformer.data.sequence_windows import SequenceWindowLoader
from recbole_mgformer.model.eagps.decoder import (
    causal_soft_attention,
    prefix_masks,
    sequential_mask,
    soft_attention,
)
from recbole_mgformer.model.recbole_sequential import next_item_targets, recbole_sequential_model

SMALL = {
    "SASRec": {"hidden_size": 16, "inner_size": 24, "n_heads": 2, "hidden_dropout_prob": 0.0, "attn_dropout_prob": 0.0},
    "GRU4Rec": {"embedding_size": 8, "hidden_size": 12, "dropout_prob": 0.0},
    "EAGPS": {"embedding_size": 8, "n_heads": 2, "memory_size": 6, "prompt_size": 5, "dropout_prob": 0.0},
}


def prefix_rows(batch, model, stride=None):
    """Every trained position of ``batch``'s windows (the last ``stride``) as RecBole's prefix row: the window up
    to it, its next item."""
    item_seq, lengths = batch[model.ITEM_SEQ], batch[model.ITEM_SEQ_LEN]
    targets = next_item_targets(item_seq, lengths, batch[model.POS_ITEM_ID])
    rows = {model.ITEM_SEQ: [], model.ITEM_SEQ_LEN: [], model.POS_ITEM_ID: [], model.USER_ID: []}
    for b in range(len(lengths)):
        for t in range(max(0, int(lengths[b]) - (stride or item_seq.size(1))), int(lengths[b])):
            rows[model.ITEM_SEQ].append(torch.cat([item_seq[b, : t + 1], item_seq.new_zeros(item_seq.size(1) - t - 1)]))
            rows[model.ITEM_SEQ_LEN].append(torch.tensor(t + 1))
            rows[model.POS_ITEM_ID].append(targets[b, t])
            rows[model.USER_ID].append(batch[model.USER_ID][b])
    return Interaction({key: torch.stack(values) for key, values in rows.items()})


def prefix_twin(name, config, model, train):
    """The same weights under RecBole's protocol: RecBole's own model, or (EAGPS, which RecBole lacks) ours with
    the prefix path, held equal to its reference form by test_eagps_step.py."""
    if name == "EAGPS":
        twin = type(model)(config, train._dataset)
        twin.load_state_dict(model.state_dict())
        twin.window_stride = None
        return twin
    return recbole_twin(recbole_sequential_model(name), config, model, train)


@pytest.mark.parametrize(
    "name, settings",
    [
        ("SASRec", {"n_layers": 1}),
        ("SASRec", {"n_layers": 2}),
        ("SASRec", {"n_layers": 2, "train_window_stride": 3}),
        ("GRU4Rec", {"num_layers": 1}),
        ("GRU4Rec", {"num_layers": 2}),
        ("GRU4Rec", {"num_layers": 1, "train_window_stride": 3}),
        ("EAGPS", {"mask_ratio": 0.0}),
        ("EAGPS", {"mask_ratio": 0.0, "train_window_stride": 3}),
        ("EAGPS", {"mask_ratio": 0.0, "decoder": "max_pool"}),
        ("EAGPS", {"mask_ratio": 0.0, "decoder": "mean_pool", "external_attention": False}),
    ],
)
def test_a_window_loss_is_the_mean_of_its_positions_prefix_row_losses(sequential_setup, name, settings):
    config, model, (train, _, _) = sequential_setup(name, train_protocol="sequence", **SMALL[name], **settings)
    assert isinstance(train, SequenceWindowLoader)
    twin = prefix_twin(name, config, model, train)
    model.train(), twin.train()  # training mode, no dropout and no mask: the training path, deterministic
    batch = next(iter(train))
    rows = prefix_rows(batch, model, settings.get("train_window_stride"))
    ours, theirs = model.calculate_loss(batch), twin.calculate_loss(rows)
    torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-6)
    ours.backward(), theirs.backward()
    for parameter_name, parameter in model.named_parameters():
        reference = twin.get_parameter(parameter_name).grad
        if reference is not None:
            torch.testing.assert_close(parameter.grad, reference, rtol=1e-4, atol=1e-6, msg=parameter_name)


@pytest.mark.parametrize("name, stride", [("SASRec", None), ("GRU4Rec", None), ("EAGPS", None), ("SASRec", 3)])
def test_an_epoch_draws_each_window_once_and_about_the_batch_size_in_targets(sequential_setup, name, stride):
    extra = {"train_window_stride": stride} if stride else {}
    config, model, (train, _, _) = sequential_setup(name, train_protocol="sequence", **SMALL[name], **extra)
    dataset = train._dataset
    seen = []
    for batch in train:
        seen += list(zip(batch[model.USER_ID].tolist(), batch[model.POS_ITEM_ID].tolist()))
    assert len(seen) == len(set(seen)) == len(train.window_rows)
    lengths = [int(dataset.inter_feat[model.ITEM_SEQ_LEN][row]) for row in train.window_rows]
    targets = sum(min(n, stride or config["MAX_ITEM_LIST_LENGTH"]) for n in lengths)
    assert targets == len(dataset)  # every training row's target, once
    assert train.step == max(1, round(config["train_batch_size"] * len(train.window_rows) / targets))
    assert len(train) == math.ceil(len(train.window_rows) / train.step)


def test_the_prefix_protocol_stays_recboles_loader(sequential_setup):
    _, _, (train, _, _) = sequential_setup("SASRec", **SMALL["SASRec"])
    assert not isinstance(train, SequenceWindowLoader)


def test_prefix_masks_draw_each_prefixs_own_eq_21_mask():
    lengths = torch.tensor([6, 3, 1])
    masks = prefix_masks(lengths, 6, 0.5, torch.Generator().manual_seed(0))
    for b, length in enumerate(lengths.tolist()):
        for t in range(6):
            if t >= length:
                assert not masks[b, t].any()
                continue
            expected = min(math.floor(0.5 * (t + 1)), t)
            assert int(masks[b, t].sum()) == expected and not masks[b, t, t:].any()  # never the query, nor later
    # each prefix's draw is uniform among its positions, as the prefix row's own draw (sequential_mask) is
    draws = torch.stack([prefix_masks(torch.tensor([5]), 5, 0.5)[0, 4] for _ in range(4000)]).float().mean(0)
    rows = torch.stack([sequential_mask(torch.tensor([5]), 5, 0.5)[0] for _ in range(4000)]).float().mean(0)
    torch.testing.assert_close(draws, rows, atol=0.04, rtol=0)


def test_causal_soft_attention_is_each_prefixs_soft_attention_with_its_masked_positions_as_the_token():
    generator = torch.Generator().manual_seed(1)
    templates, token = torch.randn(3, 5, 4, generator=generator), torch.randn(4, generator=generator)
    lengths = torch.tensor([5, 2, 4])
    masked = prefix_masks(lengths, 5, 0.6, generator)
    pooled = causal_soft_attention(templates, lengths, token, masked)
    for b, length in enumerate(lengths.tolist()):
        for t in range(length):
            prefix = torch.where(masked[b, t, : t + 1, None], token, templates[b, : t + 1])  # Eq. 22
            expected = soft_attention(prefix.unsqueeze(0), torch.tensor([t + 1]))[0]
            torch.testing.assert_close(pooled[b, t], expected, rtol=1e-5, atol=1e-6)


@settings(max_examples=40, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 6), min_size=1, max_size=3),
    ratio=st.sampled_from([0.0, 0.4, 0.9]),
    zero_rows=st.booleans(),
    small_token=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_causal_soft_attentions_gradients_are_each_prefixs_soft_attentions(
    lengths, ratio, zero_rows, small_token, seed
):
    """The written-out backward against autograd through each prefix's own :func:`soft_attention` (fp64): the
    templates' and the mask token's gradients, padding rows zero (as the model packs them) and real rows zero
    where ReLU leaves nothing; the padding's query rows take no upstream gradient (the model drops them)."""
    generator = torch.Generator().manual_seed(seed)
    lengths, length = torch.tensor(lengths), 6
    templates = torch.randn(len(lengths), length, 3, generator=generator, dtype=torch.float64)
    templates[torch.arange(length) >= lengths.unsqueeze(1)] = 0.0
    if zero_rows:
        templates[:, 0] = 0.0
    token = torch.randn(3, generator=generator, dtype=torch.float64) * (1e-3 if small_token else 1.0)
    masked = prefix_masks(lengths, length, ratio, generator) if ratio > 0 else None
    upstream = torch.randn(len(lengths), length, 3, generator=generator, dtype=torch.float64)
    upstream[torch.arange(length) >= lengths.unsqueeze(1)] = 0.0
    ours_inputs = [templates.clone().requires_grad_(), token.clone().requires_grad_()]
    theirs_inputs = [templates.clone().requires_grad_(), token.clone().requires_grad_()]
    ours = causal_soft_attention(ours_inputs[0], lengths, ours_inputs[1], masked)
    ours_grads = torch.autograd.grad(ours, ours_inputs, upstream, allow_unused=True)
    rows = []
    for b, n in enumerate(lengths.tolist()):
        for t in range(n):
            prefix = theirs_inputs[0][b, : t + 1]
            if masked is not None:
                prefix = torch.where(masked[b, t, : t + 1, None], theirs_inputs[1], prefix)  # Eq. 22
            rows.append((ours[b, t], soft_attention(prefix.unsqueeze(0), torch.tensor([t + 1]))[0], upstream[b, t]))
    theirs = sum((expected * up).sum() for _, expected, up in rows)
    theirs_grads = torch.autograd.grad(theirs, theirs_inputs, allow_unused=True)
    torch.testing.assert_close(torch.stack([r[0] for r in rows]), torch.stack([r[1] for r in rows]).detach())
    torch.testing.assert_close(ours_grads[0], theirs_grads[0])
    if masked is not None and masked.any():
        torch.testing.assert_close(ours_grads[1], theirs_grads[1])


def test_a_training_step_with_dropout_and_the_mask_is_finite_and_trains_the_mask_token(sequential_setup):
    _, model, (train, _, _) = sequential_setup(
        "EAGPS", train_protocol="sequence", **{**SMALL["EAGPS"], "dropout_prob": 0.2, "mask_ratio": 0.4}
    )
    model.train()
    loss = model.calculate_loss(next(iter(train)))
    loss.backward()
    assert torch.isfinite(loss) and model.mask_token.grad.abs().sum() > 0  # the mask token is trained


@pytest.mark.parametrize(
    "model, overrides, message",
    [
        ("SASRec", {"train_protocol": "windows"}, "train_protocol='windows' must be one of prefix, sequence"),
        ("SASRec", {"train_window_stride": 4}, "train_window_stride applies to train_protocol: sequence only"),
        ("SASRec", {"train_protocol": "sequence", "train_window_stride": 9}, "from 1 to MAX_ITEM_LIST_LENGTH \\(8\\)"),
        ("SASRec", {"train_protocol": "sequence", "train_window_stride": 0}, "train_window_stride=0 must be"),
        ("MGFormer", {"train_protocol": "sequence"}, "MGFormer does not train under train_protocol='sequence'"),
        ("BERT4Rec", {"train_protocol": "sequence"}, "BERT4Rec does not train under"),
        (
            "SASRec",
            {"train_protocol": "sequence", "loss_type": "BPR", "train_neg_sample_args": {"distribution": "uniform"}},
            "set train_neg_sample_args: ~",
        ),
    ],
)
def test_what_the_protocol_cannot_take_is_refused_by_name(sequential_setup, model, overrides, message):
    with pytest.raises(ValueError, match=message):
        sequential_setup(model, **overrides)
