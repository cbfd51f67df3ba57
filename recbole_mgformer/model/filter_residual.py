"""MGFormer's filter residual (beyond the papers): a training-free filter's scores added to the model's
at test time, ``s_ui = e_u . e_i + w * r_ui``. Training is unchanged: the DirectAU loss is on the outputs, so the
residual gets no gradient from it; the weight ``w`` is a fixed setting, chosen on validation.

The filter is this project's GF-CF, ChebyCF or BSPM (``model/general_recommender/``), fitted once on the training
split when the model is built. Each filters with ``R~``'s top singular vectors besides its polynomial or ODE part, so
``filter_residual_k`` and ``filter_residual_alpha`` set that low-rank part (GF-CF's ``k`` and ``alpha``, ChebyCF's
``eta`` and ``alpha``, BSPM's ``factor_dim`` and ``idl_beta``); its other settings are its
``properties/model/<Name>.yaml`` defaults (its paper's), over which ``filter_residual_settings`` writes (e.g. BSPM's
Yelp2018 solver: ``{'solver_sharpen': 'euler', 'T_s': 1.2, 't_point_combination': True}``).

Its scores grow with a user's number of interactions and the model's with the user's token norm, so neither scale means
anything against the other: ``r`` is the filter's scores of the user standardised over the items and given the spread of
the model's own scores of that user (:func:`matched_residual`). Each user's items then rank as ``z(model) + w
z(filter)`` would, so ``w`` is the filter's share whatever the scales: 1 gives it the same spread as the model's scores.

The hybrid trained as one model (``filter_residual_in_training``, issue 81): DirectAU's alignment term cannot see a
fixed residual (a constant added to a pair's score adds nothing to its gradient), so that hybrid trains with
``loss: softmax``, each positive pair's item against every item, and the residual joins those scores
(:func:`softmax_cross_entropy`), as it joins the model's at test time. A filter scores a user's training items from the
user's own row, each item's own interaction among its inputs, which the test items never have; in training each such
pair is scored as if that item were held out (:func:`training_residual`), so the tokens learn what the filter misses
on items it has not seen.

Shapes: ``b`` users (or pairs), ``items`` item ids (RecBole's padding id 0 included, as in the scores it receives).
"""

from logging import getLogger

import numpy as np
import torch
import torch.nn.functional as F

from recbole_mgformer.config.defaults import model_defaults
from recbole_mgformer.model.general_recommender.bspm import BSPM
from recbole_mgformer.model.general_recommender.chebycf import ChebyCF
from recbole_mgformer.model.general_recommender.gfcf import GFCF
from recbole_mgformer.model.loss import linear_cross_entropy
from recbole_mgformer.model.options import choice, non_negative_float, positive_int
from recbole_mgformer.model.sizing import AUTO, available_memory

# filter_residual value -> (filter class, its keys of the low-rank part: singular vectors, weight)
FILTERS = {"gfcf": (GFCF, "k", "alpha"), "chebycf": (ChebyCF, "eta", "alpha"), "bspm": (BSPM, "factor_dim", "idl_beta")}
FILTER_RESIDUALS = ("none", *FILTERS)
# the share of the available memory that filter_residual_cache: auto lets the filter's kept scores take: the
# run allocates its training residual and its step after that choice, and a second run may share the machine
KEPT_SCORES_SHARE = 0.25
# keys of a filter's YAML that configure RecBole's training of it alone, not the filter
TRAINING_KEYS = ("train_neg_sample_args", "epochs")


class FilterConfig:
    """What a filter model reads from a RecBole config: its own settings (``own``), everything else (the id
    fields, the device, the seed) from the config of the model it serves."""

    def __init__(self, config, own):
        self.config, self.own = config, dict(own)

    def __getitem__(self, key):
        return self.own[key] if key in self.own else self.config[key]


def residual_filter(config, dataset, model="MGFormer"):
    """``(filter, weight)`` of the ``filter_residual`` options: a fitted GF-CF, ChebyCF or BSPM (no trainable
    parameter) and ``w``, or ``(None, 0.0)`` for ``none``. A bad value is an error naming its ``filter_residual_*``
    key."""
    kind = choice(config, "filter_residual", FILTER_RESIDUALS, model)
    if kind == "none":
        _check_weight_unused(config, model)
        return None, 0.0
    weight = non_negative_float(config, "filter_residual_weight", model)
    k = positive_int(config, "filter_residual_k", model)
    alpha = non_negative_float(config, "filter_residual_alpha", model)
    batch_size = positive_int(config, "filter_residual_batch_size", model)
    # the filter's own check would name its key (k, eta); an SVD of the (users x items) matrix, padding ids included
    limit = min(dataset.user_num, dataset.item_num) - 1
    if alpha > 0 and k > limit:
        raise ValueError(
            f"{model}: filter_residual_k = {k} singular vectors is impossible for a {dataset.user_num} x "
            f"{dataset.item_num} interaction matrix (users and items with the padding id); ARPACK needs "
            f"filter_residual_k <= {limit}. Set a smaller --filter_residual_k=..., or "
            "--filter_residual_alpha=0 (no SVD)"
        )
    filter_class, rank_key, share_key = FILTERS[kind]
    given = config["filter_residual_settings"]
    own = filter_settings(filter_class.__name__, given, (rank_key, share_key), model)
    own.update({rank_key: k, share_key: alpha, "filter_batch_size": batch_size})
    try:
        fitted = filter_class(FilterConfig(config, own), dataset)
    except ValueError as error:
        if not given:
            raise
        # the filter names its own key (T_s); the user set it in filter_residual_settings
        raise ValueError(f"{model}: filter_residual_settings: {error}") from error
    fitted.fake_loss.requires_grad_(False)  # RecBole's trainer needs it in the filter alone; here nothing trains it
    return fitted, weight


def keep_filter_scores(config, fitted, model="MGFormer"):
    """The ``filter_residual_cache`` option: True keeps the filter's scores of every user once made (users x items
    float32, on the filter's device; ``ClosedFormRecommender.keep_scores``), so that each evaluation after the first
    adds the residual without filtering again: the model is validated every epoch, and the scores never change
    (BSPM filters Gowalla's 29,859 users in about 4 minutes on one CPU thread, against 20 s for the rest of a
    validation). ``auto``: True when they take at most :data:`KEPT_SCORES_SHARE` of the memory available now."""
    value = config["filter_residual_cache"]
    if value not in (AUTO, True, False) or isinstance(value, (int, float)) and not isinstance(value, bool):
        raise ValueError(
            f"{model}: unknown filter_residual_cache {value!r}; choose one of auto, True, False "
            "(set it in a config file or with --filter_residual_cache=...)"
        )
    if value != AUTO:
        return value
    needed = fitted.n_users * fitted.n_items * 4
    available = available_memory(fitted.fake_loss.device)
    keep = needed <= KEPT_SCORES_SHARE * available
    getLogger().info(
        f"{model}: filter_residual_cache auto -> {keep} (the filter's scores of every user take "
        f"{needed / 2**30:.2f} GiB; {available / 2**30:.1f} GiB of memory is available)"
    )
    return keep


def _check_weight_unused(config, model):
    """A ``filter_residual_weight`` set without a filter would leave the model's scores as they are, with no word:
    the user meant a hybrid. (The filter's other options are passed to every run of a benchmark, so they may stand
    unused.)"""
    weight = config["filter_residual_weight"]
    default = model_defaults(model).get("filter_residual_weight")
    if weight is not None and weight != default:
        raise ValueError(
            f"{model}: filter_residual_weight={weight} has no effect while filter_residual is none: set "
            "--filter_residual=gfcf (or chebycf, bspm) for the hybrid, or leave filter_residual_weight unset"
        )


def residual_in_training(config, loss, fitted, model="MGFormer"):
    """The ``filter_residual_in_training`` option, checked against the loss and the filter it needs."""
    value = choice(config, "filter_residual_in_training", (False, True), model)
    if value and loss != "softmax":
        raise ValueError(
            f"{model}: filter_residual_in_training needs loss: softmax (the {loss} loss's alignment term gets no "
            "gradient from a fixed residual); set --loss=softmax, or filter_residual_in_training: False to add the "
            "residual after training"
        )
    if value and fitted is None:
        raise ValueError(
            f"{model}: filter_residual_in_training needs a filter: set --filter_residual=gfcf (or chebycf, bspm)"
        )
    return value


def user_batches(config, loss, model="MGFormer"):
    """Whether the run trains under ``train_protocol: user`` (every pair of a batch's users together,
    :mod:`recbole_mgformer.data.user_batches`), which only ``loss: softmax`` uses: it makes a user's scores of every
    item once for all of their pairs, where DirectAU's loss has nothing per user to share."""
    protocol = config["train_protocol"]
    if protocol == "user" and loss != "softmax":
        raise ValueError(
            f"{model}: train_protocol: user batches a user's pairs for loss: softmax, which scores every item once a "
            f"user; the {loss} loss does not: set --loss=softmax, or leave train_protocol unset"
        )
    return protocol == "user"


def filter_settings(name, overrides, residual_keys, model="MGFormer"):
    """Filter ``name``'s settings: its YAML defaults with ``overrides`` (``filter_residual_settings``, a mapping of
    its own keys) written over them. The keys the residual sets itself (``residual_keys``, the low-rank part, and
    ``filter_batch_size``) are refused there, so each setting has one place."""
    defaults = filter_defaults(name)
    overrides = {} if overrides is None else overrides
    if not isinstance(overrides, dict):
        raise ValueError(
            f"{model}: filter_residual_settings must be a mapping of {name}'s settings, got {overrides!r} (e.g. "
            "--filter_residual_settings=\"{'T_s': 1.2}\")"
        )
    owned = {residual_keys[0]: "filter_residual_k", residual_keys[1]: "filter_residual_alpha"}
    owned["filter_batch_size"] = "filter_residual_batch_size"
    for key in overrides:
        if key in owned:
            raise ValueError(f"{model}: set {name}'s {key} with --{owned[key]}=..., not in filter_residual_settings")
        if key not in defaults:
            raise ValueError(
                f"{model}: filter_residual_settings: {name} has no setting {key!r}; its settings are "
                f"{', '.join(sorted(set(defaults) - set(owned), key=str.lower))} (properties/model/{name}.yaml)"
            )
    return {**defaults, **overrides}


def filter_defaults(name):
    """The settings of filter model ``name`` in its ``properties/model/<name>.yaml``, less RecBole's training keys."""
    return {key: value for key, value in model_defaults(name).items() if key not in TRAINING_KEYS}


def matched_residual(model_scores, filter_scores):
    """The residual ``r`` of each user (row): the filter's scores standardised over the items, times the standard
    deviation of the model's own scores of that user, (b, items) each -> (b, items). A user whose filter scores are
    all equal (no training interactions) gets 0; the model's scores give only a scale, not a gradient."""
    centred = filter_scores - filter_scores.mean(dim=1, keepdim=True)
    filter_spread = centred.pow(2).mean(dim=1, keepdim=True).sqrt()
    model_spread = model_scores.detach().std(dim=1, correction=0, keepdim=True)
    scale = model_spread / filter_spread.clamp_min(torch.finfo(filter_spread.dtype).tiny)
    return centred * torch.where(filter_spread > 0, scale, torch.zeros_like(scale))


def filter_self_weights(filter_model):
    """``diag(F)`` (items,): the weight of an item's own interaction in its score. Every filter here is linear in
    the user's row (scores = row F: GF-CF's and ChebyCF's polynomials, BSPM's linear ODEs, the low-rank parts), so
    ``F``'s diagonal is the filter of one-hot rows, a block of items at a time."""
    n_items, block = filter_model.n_items, filter_model.filter_batch_size
    device = filter_model.fake_loss.device
    diagonal = torch.empty(n_items, device=device)
    with torch.no_grad():
        for start in range(0, n_items, block):
            items = torch.arange(start, min(start + block, n_items), device=device)
            one_hot = torch.zeros(len(items), n_items, device=device)
            one_hot[torch.arange(len(items), device=device), items] = 1.0
            diagonal[items] = filter_model.filter_rows(one_hot)[torch.arange(len(items), device=device), items]
    return diagonal


def training_pairs(rows, device):
    """The (row, item) positions of a scipy CSR block's stored entries (its users' training pairs), on ``device``."""
    counts = torch.from_numpy(np.diff(rows.indptr))
    pairs = torch.repeat_interleave(torch.arange(rows.shape[0]), counts)
    return pairs.to(device), torch.from_numpy(rows.indices.astype(np.int64)).to(device)


def training_residual(filter_model, dtype=torch.float16):
    """``Z`` (users, items) in ``dtype``: every user's filter scores standardised over the items, as
    :func:`matched_residual` standardises them at test time, except that each training pair ``(u, i)`` is scored
    as if ``i`` were held out: ``s_ui - F_ii``, the score of ``u``'s row without ``i`` (the filter is linear),
    standardised with the stats of the user's whole row, as a test item's score is. fp16 keeps a z-score to about
    3 digits and halves the memory (Yelp2018: 31,669 x 38,049, 2.4 GB)."""
    self_weights = filter_self_weights(filter_model)
    n_users, block = filter_model.n_users, filter_model.filter_batch_size
    residual = torch.empty(n_users, filter_model.n_items, dtype=dtype, device=self_weights.device)
    with torch.no_grad():
        for start in range(0, n_users, block):
            stop = min(start + block, n_users)
            scores = filter_model.score_block(start // block)  # (block, items), kept with keep_scores: not written
            mean, spread = scores.mean(dim=1, keepdim=True), scores.std(dim=1, correction=0, keepdim=True)
            # s_ui - F_ii at the user's training items only, in place on one copy: the same numbers as
            # scores - rows * F_ii over the dense rows, without their (block, items) temporaries
            pairs, items = training_pairs(filter_model.interactions[start:stop], self_weights.device)
            z = scores.clone()
            z[pairs, items] -= self_weights[items]
            z.sub_(mean).div_(spread.clamp_min(torch.finfo(scores.dtype).tiny)).masked_fill_(~(spread > 0), 0.0)
            residual[start:stop].copy_(z)
    return residual


def softmax_cross_entropy(
    user_outputs, item_outputs, items, temperature, residual_rows=None, weight=0.0, dtype=None, rows=None
):
    """The cross-entropy of ``loss: softmax``: each pair's item ``items`` (b,) against every item, the logits being
    the user's cosine scores of every item plus, for the hybrid trained as one model, ``weight`` times the residual
    ``residual_rows`` (b, items; :func:`training_residual`'s rows of the users) given the spread of the user's cosine
    scores (no gradient), as :func:`matched_residual` gives it the model's spread at test time; all over
    ``temperature``; the padding item never a candidate. Outputs: users (b, w), every item (items, w), the padding
    id's row 0 included. The (b, items) logits are made a cached block of rows at a time, never whole
    (:func:`~recbole_mgformer.model.loss.linear_cross_entropy`); ``dtype``: its matmuls' input format (None: fp32).
    ``rows`` (p,) or None: the p pairs' users are rows of ``user_outputs`` and ``residual_rows`` (u of them, each
    user once), so a user's logits are made once for all of their pairs; ``items`` (p,)."""
    padding = torch.zeros(len(item_outputs), device=item_outputs.device)
    padding[0] = float("-inf")
    # cos / t = (u / t) . i over unit vectors; the spread of cos / t is that of cos over t, so t scales all alike
    queries = F.normalize(user_outputs, dim=-1) / temperature
    keys = F.normalize(item_outputs, dim=-1)
    return linear_cross_entropy(queries, keys, padding, items, dtype or torch.float32, residual_rows, weight, rows)
