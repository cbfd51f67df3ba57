"""MGFormer's filter residual (issue 55, model/filter_residual.py): GF-CF's, ChebyCF's or BSPM's scores, standardised
per user and scaled to the spread of the model's own scores, added at test time; and the hybrid trained as one model
(issue 81: ``loss: softmax`` with ``filter_residual_in_training``)."""

import copy
import logging
from unittest.mock import patch

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from recbole.data.interaction import Interaction

from recbole_mgformer.model import loss as loss_module
from recbole_mgformer.model.filter_residual import (
    FilterConfig,
    filter_defaults,
    filter_self_weights,
    matched_residual,
    softmax_cross_entropy,
    training_residual,
)
from recbole_mgformer.model.loss import uniformity_loss, uniformity_of_repeated_rows, uniformity_of_users_and_items

RESIDUAL = {"filter_residual": "gfcf", "filter_residual_k": 8, "filter_residual_alpha": 0.3}


def full_sort(model):
    """Every user's full-sort scores, (users, items), float64."""
    model.eval()
    with torch.no_grad():
        scores = model.full_sort_predict(Interaction({model.USER_ID: torch.arange(model.n_users)}))
    return scores.reshape(model.n_users, model.n_items).double().numpy()


def expected_residual(plain, filtered):
    """The residual written out per user in float64: the filter's row standardised, times the plain row's spread."""
    expected = np.zeros_like(filtered)
    for user, (model_row, filter_row) in enumerate(zip(plain, filtered)):
        if filter_row.std() > 0:
            expected[user] = (filter_row - filter_row.mean()) / filter_row.std() * model_row.std()
    return expected


# ------------------------------------------------------------------------------------------------ the scaling


def test_the_residual_has_the_model_rows_spread_and_ignores_the_filters_scale():
    generator = torch.Generator().manual_seed(0)
    spreads = torch.tensor([[1.0], [5.0], [0.1], [2.0]], dtype=torch.float64)
    model_scores = torch.randn(4, 30, generator=generator, dtype=torch.float64) * spreads
    filter_scores = torch.rand(4, 30, generator=generator, dtype=torch.float64) * 7 + 3
    residual = matched_residual(model_scores, filter_scores)
    torch.testing.assert_close(residual.mean(dim=1), torch.zeros(4, dtype=torch.float64), atol=1e-12, rtol=0)
    torch.testing.assert_close(residual.std(dim=1, correction=0), model_scores.std(dim=1, correction=0))
    # a user's filter scores times a positive number, plus a constant: the same residual
    torch.testing.assert_close(matched_residual(model_scores, 40 * filter_scores - 2), residual)
    # the model's scores of a user scaled: the residual scales with them, so the ranking of model + w r does not move
    torch.testing.assert_close(matched_residual(3 * model_scores, filter_scores), 3 * residual)


def test_a_user_with_constant_filter_scores_gets_no_residual():
    model_scores = torch.tensor([[1.0, 2.0, 4.0], [0.0, 1.0, 0.0]])
    filter_scores = torch.tensor([[0.0, 0.0, 0.0], [1.0, 0.0, 2.0]])
    residual = matched_residual(model_scores, filter_scores)
    assert torch.equal(residual[0], torch.zeros(3)) and torch.isfinite(residual).all()
    assert residual[1].abs().sum() > 0


def test_the_model_scores_give_the_residual_a_scale_but_no_gradient():
    model_scores = torch.randn(2, 5, requires_grad=True)
    assert not matched_residual(model_scores, torch.randn(2, 5)).requires_grad


def test_a_filter_config_reads_its_own_keys_first_and_the_rest_from_the_model():
    config = FilterConfig({"k": 1, "seed": 7, "USER_ID_FIELD": "user_id"}, {"k": 64, "filter_batch_size": 9})
    assert (config["k"], config["filter_batch_size"], config["seed"], config["USER_ID_FIELD"]) == (64, 9, 7, "user_id")


# ------------------------------------------------------------------------------------------------ in MGFormer


@pytest.mark.parametrize("attention", [False, True])
def test_weight_zero_gives_the_plain_models_scores_exactly_and_trains_the_same(tiny_setup, attention):
    _, plain, _, (train, _, _) = tiny_setup(attention=attention, seed=3, precision="fp32")
    _, hybrid, _, _ = tiny_setup(attention=attention, seed=3, precision="fp32", filter_residual_weight=0.0, **RESIDUAL)
    assert hybrid.residual_filter is not None and plain.residual_filter is None
    batch = next(iter(train))
    torch.testing.assert_close(hybrid.calculate_loss(batch), plain.calculate_loss(batch), rtol=0, atol=0)
    assert np.array_equal(full_sort(hybrid), full_sort(plain))


# the filter model alone at the settings the residual gives it: its low-rank part from filter_residual_k and _alpha
FILTER_ALONE = {
    "gfcf": ("GFCF", {"k": 8, "alpha": 0.3}),
    "chebycf": ("ChebyCF", {"eta": 8, "alpha": 0.3}),
    "bspm": ("BSPM", {"factor_dim": 8, "idl_beta": 0.3}),
}
BSPM_YELP = {"solver_sharpen": "euler", "T_s": 1.2, "t_point_combination": True}


@pytest.mark.parametrize(
    "attention, kind, settings",
    [(False, "gfcf", {}), (True, "gfcf", {}), (False, "chebycf", {}), (False, "bspm", {}), (False, "bspm", BSPM_YELP)],
)
def test_full_sort_adds_w_times_the_scaled_scores_of_the_filter_model(tiny_setup, attention, kind, settings):
    _, plain, _, _ = tiny_setup(attention=attention, seed=3, precision="fp32")
    residual = {**RESIDUAL, "filter_residual": kind, "filter_residual_settings": settings}
    _, hybrid, _, _ = tiny_setup(attention=attention, seed=3, precision="fp32", filter_residual_weight=0.7, **residual)
    name, low_rank = FILTER_ALONE[kind]
    _, alone, _, _ = tiny_setup(name, seed=3, **low_rank, **settings)  # the same split: the same seed draws it
    assert type(hybrid.residual_filter).__name__ == name
    plain_scores, filtered = full_sort(plain), full_sort(alone)
    expected = plain_scores + 0.7 * expected_residual(plain_scores, filtered)
    np.testing.assert_allclose(full_sort(hybrid), expected, rtol=1e-5, atol=1e-5)
    assert np.abs(full_sort(hybrid) - plain_scores).max() > 1e-2  # the filter moves the scores


@pytest.mark.parametrize("attention", [False, True])
def test_predict_agrees_with_full_sort(tiny_setup, attention):
    _, model, _, _ = tiny_setup(attention=attention, seed=4, precision="fp32", filter_residual_weight=2.0, **RESIDUAL)
    everything = full_sort(model)
    users, items = torch.tensor([3, 1, 3, 7, 0, 39]), torch.tensor([5, 2, 9, 0, 11, 59])
    with torch.no_grad():
        scores = model.predict(Interaction({model.USER_ID: users, model.ITEM_ID: items}))
    np.testing.assert_allclose(scores.numpy(), everything[users, items], rtol=1e-4, atol=1e-5)


def test_evaluation_runs_through_the_trainer_and_the_residual_changes_the_metrics(tiny_setup):
    _, plain, plain_trainer, (_, _, test) = tiny_setup(attention=False, seed=5)
    _, hybrid, trainer, _ = tiny_setup(attention=False, seed=5, filter_residual_weight=4.0, **RESIDUAL)
    with_filter = trainer.evaluate(test, load_best_model=False, show_progress=False)
    without = plain_trainer.evaluate(test, load_best_model=False, show_progress=False)
    assert 0 <= with_filter["ndcg@20"] <= 1 and with_filter != without


def test_the_filter_adds_no_trained_parameter_and_survives_a_checkpoint_and_a_deep_copy(tiny_setup, tmp_path):
    _, plain, _, _ = tiny_setup(attention=False, seed=6)
    _, model, _, (train, _, _) = tiny_setup(attention=False, seed=6, **RESIDUAL)
    trained = [name for name, p in model.named_parameters() if p.requires_grad]
    assert trained == [name for name, p in plain.named_parameters() if p.requires_grad]
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    model.calculate_loss(next(iter(train))).backward()
    optimizer.step()
    torch.save(model.state_dict(), tmp_path / "model.pth")
    _, restored, _, _ = tiny_setup(attention=False, seed=6, **RESIDUAL)  # refits the filter from the same split
    restored.load_state_dict(torch.load(tmp_path / "model.pth", weights_only=True))
    expected = full_sort(model)
    np.testing.assert_array_equal(full_sort(restored), expected)
    np.testing.assert_array_equal(full_sort(copy.deepcopy(model)), expected)


def test_the_scores_cache_is_cleared_by_a_training_step(tiny_setup):
    _, model, _, (train, _, _) = tiny_setup(attention=False, seed=6, **RESIDUAL)
    before = full_sort(model)
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=5.0)
    model.calculate_loss(next(iter(train))).backward()
    optimizer.step()
    assert model.restore_user_e is None
    assert np.abs(full_sort(model) - before).max() > 1e-4


@pytest.mark.parametrize(
    "overrides, message",
    [
        (
            {"filter_residual": "ease"},
            r"MGFormer: unknown filter_residual 'ease'; choose one of none, gfcf, chebycf, bspm",
        ),
        ({"filter_residual": True}, r"unknown filter_residual True"),
        ({**RESIDUAL, "filter_residual_weight": -0.5}, r"MGFormer: filter_residual_weight must be a number >= 0"),
        ({**RESIDUAL, "filter_residual_weight": "high"}, r"filter_residual_weight must be a number >= 0, got 'high'"),
        ({**RESIDUAL, "filter_residual_k": 0}, r"filter_residual_k must be a positive integer"),
        ({**RESIDUAL, "filter_residual_k": 41}, r"ARPACK needs filter_residual_k <= 40.*--filter_residual_k="),
        ({**RESIDUAL, "filter_residual_alpha": -1.0}, r"filter_residual_alpha must be a number >= 0"),
        ({**RESIDUAL, "filter_residual_batch_size": 0}, r"filter_residual_batch_size must be a positive integer"),
        (
            {**RESIDUAL, "filter_residual_settings": [1.2]},
            r"filter_residual_settings takes a mapping like {}, not \[1.2\]",
        ),
        (
            {**RESIDUAL, "filter_residual": "bspm", "filter_residual_settings": {"T_sharp": 1.2}},
            r"filter_residual_settings: BSPM has no setting 'T_sharp'; its settings are final_sharpening, K_b, .*T_s",
        ),
        (
            {**RESIDUAL, "filter_residual": "bspm", "filter_residual_settings": {"idl_beta": 0.1}},
            r"set BSPM's idl_beta with --filter_residual_alpha=\.\.\., not in filter_residual_settings",
        ),
        (
            {**RESIDUAL, "filter_residual_settings": {"filter_batch_size": 8}},
            r"set GFCF's filter_batch_size with --filter_residual_batch_size=",
        ),
        (
            {**RESIDUAL, "filter_residual": "bspm", "filter_residual_settings": {"solver_sharpen": "heun"}},
            r"MGFormer: filter_residual_settings: BSPM: unknown solver_sharpen 'heun'; choose one of euler, rk4",
        ),
        (  # the plain model's scores, where the user asked for a hybrid
            {"filter_residual_weight": 0.5},
            r"MGFormer: filter_residual_weight=0.5 has no effect while filter_residual is none: set "
            r"--filter_residual=gfcf",
        ),
    ],
)
def test_bad_values_raise_clear_errors(tiny_setup, overrides, message):
    with pytest.raises(ValueError, match=message):
        tiny_setup(attention=False, **overrides)


def test_without_a_filter_its_default_weight_and_the_filters_other_options_may_stand(tiny_setup):
    """A benchmark passes the filter's options to every run (``--filter_residual_k=256``); a weight at its default
    changes nothing either."""
    _, model, *_ = tiny_setup(
        attention=False, filter_residual_weight=1.0, filter_residual_k=4, filter_residual_alpha=0.5
    )
    assert model.residual_filter is None and model.filter_residual_weight == 0.0


def test_chebycf_takes_its_papers_settings_but_its_low_rank_part_from_the_residual_options(tiny_setup):
    papers = {"K": 8, "phi": 1.5, "eta": 512, "alpha": 0.2, "beta": 0.4, "filter_batch_size": 1024}
    assert filter_defaults("ChebyCF") == papers
    residual = {**RESIDUAL, "filter_residual": "chebycf", "filter_residual_k": 6, "filter_residual_alpha": 0.5}
    _, model, _, _ = tiny_setup(attention=False, filter_residual_batch_size=16, **residual)
    chebycf = model.residual_filter
    assert (chebycf.order, chebycf.phi, chebycf.beta) == (8, 1.5, 0.4)
    assert (chebycf.eta, chebycf.alpha, chebycf.filter_batch_size) == (6, 0.5, 16)
    assert chebycf.ideal is not None
    with pytest.raises(ValueError, match=r"ARPACK needs filter_residual_k <= 40"):
        tiny_setup(attention=False, **{**residual, "filter_residual_k": 512})


def test_bspm_takes_its_papers_settings_with_the_residual_settings_written_over_them(tiny_setup):
    residual = {**RESIDUAL, "filter_residual": "bspm", "filter_residual_k": 6, "filter_residual_alpha": 0.3}
    _, model, _, _ = tiny_setup(attention=False, filter_residual_settings=BSPM_YELP, **residual)
    bspm = model.residual_filter
    assert type(bspm).__name__ == "BSPM" and (bspm.k, bspm.idl_beta) == (6, 0.3)
    assert bspm.t_point_combination and bspm.final_sharpening  # the first from the settings, the second its paper's
    assert bspm.schedule["sharpen"] == ("euler", 1.2, 1)  # the solver and T_s from the settings, K_s its paper's


def test_without_the_low_pass_filter_any_k_is_accepted(tiny_setup):
    _, model, _, _ = tiny_setup(
        attention=False, **{**RESIDUAL, "filter_residual_alpha": 0.0, "filter_residual_k": 10_000}
    )
    assert model.residual_filter.ideal is None


# ------------------------------------------------------------------------------------------------ trained as one model

TRAINED = {**RESIDUAL, "loss": "softmax", "filter_residual_in_training": True}


def fitted_filter(tiny_setup, kind, settings=None, batch_size=7):
    """The filter model ``kind`` alone, fitted on the tiny split, filtering ``batch_size`` rows at a time (so that
    several blocks are read)."""
    name, low_rank = FILTER_ALONE[kind]
    _, alone, _, _ = tiny_setup(name, seed=3, filter_batch_size=batch_size, **low_rank, **(settings or {}))
    return alone


@pytest.mark.parametrize("kind, settings", [("gfcf", {}), ("chebycf", {}), ("bspm", {}), ("bspm", BSPM_YELP)])
def test_each_filter_is_linear_in_the_row_and_its_self_weights_are_its_matrix_diagonal(tiny_setup, kind, settings):
    alone = fitted_filter(tiny_setup, kind, settings)
    matrix = alone.filter_rows(torch.eye(alone.n_items)).double()  # F, one probe per item at once
    rows = torch.rand(5, alone.n_items, generator=torch.Generator().manual_seed(0))
    # linear: any rows' scores are rows F, which is what makes F's diagonal an item's own weight
    torch.testing.assert_close(alone.filter_rows(rows).double(), rows.double() @ matrix, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(filter_self_weights(alone).double(), matrix.diagonal(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind", ["gfcf", "bspm"])
def test_a_training_pair_is_scored_with_its_item_held_out_and_other_pairs_as_at_test_time(tiny_setup, kind):
    alone = fitted_filter(tiny_setup, kind)
    z = training_residual(alone).double()
    interactions = alone.interactions.toarray()
    assert z.shape == interactions.shape
    checked = 0
    for user in range(1, alone.n_users):
        row = torch.from_numpy(interactions[user]).float()
        scores = alone.filter_rows(row[None])[0].double()
        mean, spread = scores.mean(), scores.std(correction=0)
        for item in np.flatnonzero(interactions[user])[:2]:  # written out: the row without the item, filtered
            held_out = row.clone()
            held_out[item] = 0.0
            expected = (alone.filter_rows(held_out[None])[0, item].double() - mean) / spread
            torch.testing.assert_close(z[user, item], expected, rtol=2e-3, atol=2e-3)
            checked += 1
        unseen = np.flatnonzero(interactions[user] == 0)[1:4]  # a test item's residual: the whole row's z-score
        torch.testing.assert_close(z[user, unseen], (scores[unseen] - mean) / spread, rtol=2e-3, atol=2e-3)
    assert checked > 20
    assert torch.equal(z[0], torch.zeros_like(z[0]))  # the padding user has no interactions


@pytest.mark.parametrize("kind", ["gfcf", "chebycf", "bspm"])
def test_the_held_out_scores_are_the_dense_rows_formula_to_the_bit(tiny_setup, kind):
    # the training items' self weights are subtracted where the user's row is stored, not over dense rows: the same
    # floats as scores - rows * F_ii, row by row (1 * w is w, and 0 * w takes nothing from a score)
    alone = fitted_filter(tiny_setup, kind)
    weights = filter_self_weights(alone)
    rows = torch.from_numpy(alone.interactions.toarray()).float()
    scores = torch.cat([alone.score_block(block) for block in range(-(-alone.n_users // alone.filter_batch_size))])
    mean, spread = scores.mean(dim=1, keepdim=True), scores.std(dim=1, correction=0, keepdim=True)
    z = (scores - rows * weights - mean) / spread.clamp_min(torch.finfo(scores.dtype).tiny)
    expected = torch.where(spread > 0, z, torch.zeros_like(z)).to(torch.float16)
    assert torch.equal(training_residual(alone), expected)


def written_out_cross_entropy(users, items, targets, temperature, residual, weight):
    """``loss: softmax``'s cross-entropy, user by user and item by item in float64: the cosine of each item, plus
    weight times the user's residual given the spread of the user's cosines (every item's), over the temperature;
    the padding item 0 is no candidate."""
    total = 0.0
    for k, user in enumerate(users):
        cosine = torch.stack([user @ item / (user.norm() * item.norm()) for item in items])
        spread = cosine.detach().std(correction=0)
        logits = [(cosine[j] + weight * spread * residual[k, j]) / temperature for j in range(1, len(items))]
        logits = torch.stack(logits)
        total = total - (logits[targets[k] - 1] - logits.exp().sum().log())
    return total / len(users)


@settings(max_examples=30, deadline=None)
@given(
    rows=st.integers(1, 7),
    n_items=st.integers(2, 9),
    block_rows=st.integers(1, 8),
    weight=st.sampled_from([0.0, 0.4, 1.5]),
    dtype=st.sampled_from([None, torch.float32]),
    seed=st.integers(0, 2**16),
)
def test_the_softmax_cross_entropy_and_its_gradients_written_out_user_by_user(
    rows, n_items, block_rows, weight, dtype, seed
):
    """However its rows split into blocks, with and without the residual (fp16, as the model keeps it): the loss
    and the gradients of the users' and the items' outputs are those of the logits written out."""
    generator = torch.Generator().manual_seed(seed)
    users, items = torch.randn(rows, 4, generator=generator), torch.randn(n_items, 4, generator=generator)
    residual = torch.randn(rows, n_items, generator=generator).half()
    targets = torch.randint(1, n_items, (rows,), generator=generator)
    ours_inputs = [x.clone().requires_grad_() for x in (users, items)]
    exact_inputs = [x.double().requires_grad_() for x in (users, items)]
    with patch.object(loss_module, "CROSS_ENTROPY_BLOCK_BYTES", 4 * n_items * block_rows):  # block_rows rows a block
        ours = softmax_cross_entropy(*ours_inputs, targets, 0.3, residual, weight, dtype)
    exact = written_out_cross_entropy(*exact_inputs, targets, 0.3, residual.double(), weight)
    torch.testing.assert_close(ours.double(), exact, rtol=1e-5, atol=1e-5)
    for got, want in zip(torch.autograd.grad(ours, ours_inputs), torch.autograd.grad(exact, exact_inputs)):
        torch.testing.assert_close(got.double(), want, rtol=1e-4, atol=1e-5)


def test_the_softmax_cross_entropy_in_bf16_rounds_the_matmul_inputs_only():
    generator = torch.Generator().manual_seed(1)
    users, items = torch.randn(64, 16, generator=generator), torch.randn(300, 16, generator=generator)
    residual = torch.randn(64, 300, generator=generator).half()
    targets = torch.randint(1, 300, (64,), generator=generator)
    losses = [
        softmax_cross_entropy(users, items, targets, 0.2, residual, 0.5, dtype) for dtype in (None, torch.bfloat16)
    ]
    assert losses[1].dtype == torch.float32
    torch.testing.assert_close(losses[1], losses[0], rtol=2e-2, atol=2e-2)
    assert not torch.equal(losses[1], losses[0])  # the rounding is real


@pytest.mark.parametrize("n_users, n_items", [(5, 5), (3, 7), (1, 4), (4, 1), (1, 1)])
@pytest.mark.parametrize("weighted", [False, True])
def test_the_uniformity_of_users_and_items_is_the_sum_of_both_sides_terms(n_users, n_items, weighted):
    """Sides of one length or not (the user protocol's distinct users beside its pairs' items), the users weighted
    by their pairs or not; a side of one row has no pair of rows and adds 0."""
    generator = torch.Generator().manual_seed(2)
    users, items = torch.randn(n_users, 3, generator=generator), torch.randn(n_items, 3, generator=generator)
    counts = torch.arange(1, n_users + 1).float() if weighted else None
    users_term, items_term = (torch.nn.functional.normalize(side, dim=-1) for side in (users, items))
    users_term = (
        torch.zeros(())
        if n_users < 2
        else (uniformity_of_repeated_rows(users_term, counts) if weighted else uniformity_loss(users_term))
    )
    items_term = torch.zeros(()) if n_items < 2 else uniformity_loss(items_term)
    torch.testing.assert_close(uniformity_of_users_and_items(users, items, user_counts=counts), users_term + items_term)


def test_the_softmax_loss_of_mgformer_written_out(tiny_setup):
    _, model, _, (train, _, _) = tiny_setup(
        attention=False, seed=3, precision="fp32", filter_residual_weight=0.6, **TRAINED
    )
    batch = next(iter(train))
    users, items = batch[model.USER_ID], batch[model.ITEM_ID]
    tokens = model.forward()  # (n, w): every node's output, users then items
    user_tokens, item_tokens = tokens[users], tokens[model.n_users :]
    cosine = torch.nn.functional.normalize(user_tokens, dim=-1) @ torch.nn.functional.normalize(item_tokens, dim=-1).T
    spread = cosine.detach().std(dim=1, correction=0, keepdim=True)  # a scale, no gradient
    scores = cosine + 0.6 * spread * model.training_residual[users].float()
    scores[:, 0] = float("-inf")
    cross_entropy = torch.nn.functional.cross_entropy(scores / 0.2, items)
    pairs = torch.nn.functional.normalize(torch.stack([user_tokens, item_tokens[items]]), dim=-1)
    uniform = uniformity_loss(pairs[0]) + uniformity_loss(pairs[1])
    expected = cross_entropy + model.uniformity_weight * uniform
    loss = model.calculate_loss(batch)
    torch.testing.assert_close(loss, expected, rtol=1e-5, atol=1e-5)
    parameters = [p for p in model.parameters() if p.requires_grad]
    got, want = (torch.autograd.grad(x, parameters, allow_unused=True, retain_graph=True) for x in (loss, expected))
    assert [g is None for g in got] == [w is None for w in want] and any(g is not None for g in got)
    for ours, exact in zip(got, want):
        if exact is not None:
            torch.testing.assert_close(ours, exact, rtol=1e-4, atol=1e-6)


def test_the_softmax_loss_of_whole_users_written_out(tiny_setup):
    """``train_protocol: user``: a batch holds all pairs of its users; the loss is the mean cross-entropy over the
    pairs (each user's logits made once), the uniformity of the distinct users each weighted by its pairs, and that
    of the pairs' items."""
    _, model, _, (train, _, _) = tiny_setup(
        attention=False, seed=3, precision="fp32", filter_residual_weight=0.6, train_protocol="user", **TRAINED
    )
    batch = next(iter(train))
    users, items = batch[model.USER_ID], batch[model.ITEM_ID]
    assert len(torch.unique(users)) < len(users)  # users with several pairs: the case the protocol is for
    tokens = model.forward()
    user_tokens, item_tokens = tokens[users], tokens[model.n_users :]
    cosine = torch.nn.functional.normalize(user_tokens, dim=-1) @ torch.nn.functional.normalize(item_tokens, dim=-1).T
    spread = cosine.detach().std(dim=1, correction=0, keepdim=True)
    scores = cosine + 0.6 * spread * model.training_residual[users].float()
    scores[:, 0] = float("-inf")
    cross_entropy = torch.nn.functional.cross_entropy(scores / 0.2, items)  # pair by pair
    normalize = torch.nn.functional.normalize
    distinct, pairs_of_user = torch.unique(users, return_counts=True)
    uniform = uniformity_of_repeated_rows(normalize(tokens[distinct], dim=-1), pairs_of_user.float())
    uniform = uniform + uniformity_loss(normalize(item_tokens[items], dim=-1))
    expected = cross_entropy + model.uniformity_weight * uniform
    loss = model.calculate_loss(batch)
    torch.testing.assert_close(loss, expected, rtol=1e-5, atol=1e-5)
    parameters = [p for p in model.parameters() if p.requires_grad]
    got, want = (torch.autograd.grad(x, parameters, allow_unused=True, retain_graph=True) for x in (loss, expected))
    for ours, exact in zip(got, want):
        if exact is not None:
            torch.testing.assert_close(ours, exact, rtol=1e-4, atol=1e-6)
    assert model.cuda_graph_blocker() is not None  # batches of whole users change size


def test_the_residual_in_training_changes_the_gradient_and_at_weight_zero_nothing(tiny_setup):
    _, softmax, _, (train, _, _) = tiny_setup(attention=False, seed=3, precision="fp32", loss="softmax")
    _, at_zero, _, _ = tiny_setup(attention=False, seed=3, precision="fp32", filter_residual_weight=0.0, **TRAINED)
    _, trained, _, _ = tiny_setup(attention=False, seed=3, precision="fp32", filter_residual_weight=1.0, **TRAINED)
    batch = next(iter(train))
    losses = [model.calculate_loss(batch) for model in (softmax, at_zero, trained)]
    torch.testing.assert_close(losses[1], losses[0], rtol=0, atol=0)
    assert abs(float(losses[2].detach() - losses[0].detach())) > 1e-4
    gradients = []
    for model, loss in zip((softmax, trained), (losses[0], losses[2])):
        loss.backward()
        gradients.append(model.user_embedding.weight.grad.clone())
    assert (gradients[0] - gradients[1]).abs().max() > 1e-6
    # derived from the data when the model is built, not saved with it
    assert not any(name == "training_residual" for name in trained.state_dict())


def test_the_softmax_loss_trains_and_its_entry_trains_as_itself(tiny_setup):
    from recbole_mgformer.benchmark.tuning import trained_overrides

    _, model, trainer, (train, valid, _) = tiny_setup(attention=False, seed=4, epochs=2, **TRAINED)
    trainer.fit(train, valid, saved=False, show_progress=False)
    assert np.isfinite(full_sort(model)).all()
    post_hoc = {"attention": False, **RESIDUAL}
    assert trained_overrides("MGFormer", post_hoc) == {"attention": False}
    assert trained_overrides("MGFormer", {"attention": False, **TRAINED}) == {"attention": False, **TRAINED}


@pytest.mark.parametrize("trained", [False, True])
def test_kept_filter_scores_change_no_bit_of_training_or_scores(tiny_setup, trained):
    residual = {**RESIDUAL, "filter_residual": "bspm", "filter_residual_batch_size": 8}  # several blocks
    settings = {**TRAINED, **residual} if trained else {**residual, "loss": "softmax"}
    runs = []
    for cache in (False, True):
        _, model, trainer, (train, valid, _) = tiny_setup(
            attention=False, seed=5, epochs=2, filter_residual_cache=cache, **settings
        )
        assert model.residual_filter.keep_scores is cache
        trainer.fit(train, valid, saved=False, show_progress=False)  # validated each epoch
        runs.append((full_sort(model), trainer.best_valid_score, getattr(model, "training_residual", None)))
    np.testing.assert_array_equal(runs[1][0], runs[0][0])
    assert runs[1][1] == runs[0][1]
    if trained:
        assert torch.equal(runs[1][2], runs[0][2])


@pytest.mark.parametrize(("spare", "kept"), [(0, True), (-1, False), (2**40, True)])
def test_auto_keeps_the_filter_scores_when_they_fit_in_a_quarter_of_the_available_memory(
    tiny_setup, caplog, spare, kept
):
    _, model, _, _ = tiny_setup(attention=False, filter_residual_cache=False, **RESIDUAL)
    available = 4 * model.n_users * model.n_items * 4 + spare  # float32 scores: a quarter of it, give or take a byte
    with patch("recbole_mgformer.model.filter_residual.available_memory", return_value=available):
        with caplog.at_level(logging.INFO):
            _, model, _, _ = tiny_setup(attention=False, filter_residual_cache="auto", **RESIDUAL)
    assert model.residual_filter.keep_scores is kept
    assert f"MGFormer: filter_residual_cache auto -> {kept} (the filter's scores of every user take" in caplog.text


@pytest.mark.parametrize("value", ["yes", 1, 0.5, [True]])
def test_filter_residual_cache_takes_auto_true_or_false(tiny_setup, value):
    with pytest.raises(ValueError, match=r"unknown filter_residual_cache .*; choose one of auto, True, False"):
        tiny_setup(attention=False, filter_residual_cache=value, **RESIDUAL)


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({**RESIDUAL, "filter_residual_in_training": True}, "needs loss: softmax"),
        ({"loss": "softmax", "filter_residual_in_training": True}, "needs a filter"),
        ({"loss": "infonce"}, "loss"),
        ({"loss": "softmax", "softmax_temperature": 0.0}, "softmax_temperature"),
    ],
)
def test_bad_training_residual_settings_are_named(tiny_setup, overrides, message):
    with pytest.raises(ValueError, match=message):
        tiny_setup(attention=False, seed=3, **overrides)


def test_the_trained_hybrid_takes_its_tokens_tuned_file():
    from recbole_mgformer.benchmark.tuning import tuned_file_for

    tokens = tuned_file_for("MGFormer", {"attention": False}, "ml-100k")
    assert tokens is not None and tokens.endswith("mgformer-attention-false.yaml")
    for overrides in ({**TRAINED, "attention": False}, {"attention": False, "loss": "softmax"}):
        assert tuned_file_for("MGFormer", overrides, "ml-100k") == tokens
