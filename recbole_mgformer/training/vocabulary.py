"""The user and item vocabularies a checkpoint was trained with, and the check that the data rebuilt for it still
numbers users and items the same way.

RecBole numbers tokens in order of first appearance in the data files, so rows reordered, added or removed since
training renumber them, and a checkpoint's embedding rows would be read for other users and items. A checkpoint
keeps its vocabularies (lists of str: ``torch.load(weights_only=True)`` reads them) and a fingerprint of its
training split; :func:`check_dataset` and :func:`check_training_split` refuse data that no longer matches, naming
the change. Checkpoints written before they kept them load with a warning.
"""

import hashlib
import warnings

import numpy as np

EXAMPLES = 3  # tokens named per kind of change


def _field_tokens(dataset, field):
    return [str(token) for token in dataset.field2id_token[field]] if field else None


def split_fingerprint(dataset):
    """``{"interactions": n, "sha256": hex}`` of a split's (user id, item id) pairs, whatever their row order."""
    uid, iid = dataset.uid_field, dataset.iid_field
    if not uid or not iid:
        return None
    users = np.asarray(dataset.inter_feat[uid], dtype=np.int64)
    items = np.asarray(dataset.inter_feat[iid], dtype=np.int64)
    order = np.lexsort((items, users))
    pairs = np.stack([users[order], items[order]]).astype("<i8")
    return {"interactions": int(len(users)), "sha256": hashlib.sha256(pairs.tobytes()).hexdigest()}


def dataset_vocabulary(train_dataset):
    """A checkpoint's ``vocabulary``: user and item tokens by internal id (index 0 is RecBole's padding) and the
    training split's fingerprint, as plain values; None for data without RecBole's token vocabularies."""
    if train_dataset is None or not hasattr(train_dataset, "field2id_token"):
        return None
    uid, iid = train_dataset.uid_field, train_dataset.iid_field
    return {
        "user_field": uid,
        "item_field": iid,
        "users": _field_tokens(train_dataset, uid),
        "items": _field_tokens(train_dataset, iid),
        "train": split_fingerprint(train_dataset),
    }


def _examples(tokens):
    shown = ", ".join(repr(token) for token in tokens[:EXAMPLES])
    return shown + (", ..." if len(tokens) > EXAMPLES else "")


def vocabulary_changes(recorded, current, kind):
    """How ``current`` tokens (list index = internal id) differ from ``recorded``: phrases, none when equal."""
    if recorded == current:
        return []
    recorded_ids = {token: i for i, token in enumerate(recorded) if i}
    current_ids = {token: i for i, token in enumerate(current) if i}
    added = [token for token in current[1:] if token not in recorded_ids]
    removed = [token for token in recorded[1:] if token not in current_ids]
    moved = [token for token in current[1:] if recorded_ids.get(token, current_ids[token]) != current_ids[token]]
    changes = []
    if added:
        changes.append(f"{len(added)} {kind} added ({_examples(added)})")
    if removed:
        changes.append(f"{len(removed)} {kind} removed ({_examples(removed)})")
    if moved:
        shown = ", ".join(
            f"{token!r} id {recorded_ids[token]} then, {current_ids[token]} now" for token in moved[:EXAMPLES]
        )
        changes.append(
            f"{len(moved)} {kind} renumbered ({shown}{', ...' if len(moved) > EXAMPLES else ''})"
            + ("; the same tokens in another order: the rows were reordered" if not added and not removed else "")
        )
    return changes


class DatasetChangedError(ValueError):
    """The data rebuilt for a checkpoint is not the data it was trained on."""


FIX = (
    "RecBole numbers users and items in order of first appearance, so the checkpoint's embeddings would be read "
    "for other users and items. Restore the data files the model was trained on (same rows in the same order; "
    "--data_path if they moved), or retrain on the new data"
)


def _where(dataset):
    return f"dataset {dataset.dataset_name!r} in {dataset.config['data_path']}"


def legacy_warning(source):
    warnings.warn(
        f"{source} records no user and item vocabularies (written before checkpoints kept them): "
        "nothing checks that the data still numbers users and items as in training. If the data "
        "files changed since, the recommendations are for other users and items; retrain to get a "
        "checkpoint that checks this",
        UserWarning,
        stacklevel=3,
    )


def check_dataset(checkpoint, dataset, source="the checkpoint"):
    """Raise :class:`DatasetChangedError` naming the users and items added, removed or renumbered in ``dataset``
    since ``checkpoint`` was trained; warn when the checkpoint records no vocabulary."""
    vocabulary = checkpoint.get("vocabulary")
    if not vocabulary:
        legacy_warning(source)
        return
    changes = []
    for kind, key, field in (("users", "users", dataset.uid_field), ("items", "items", dataset.iid_field)):
        if vocabulary.get(key) is not None and field:
            changes += vocabulary_changes(vocabulary[key], _field_tokens(dataset, field), kind)
    if changes:
        raise DatasetChangedError(
            f"{source} was trained on other data than {_where(dataset)} holds now: {'; '.join(changes)}. {FIX}."
        )


def check_training_split(checkpoint, train_dataset, source="the checkpoint"):
    """Raise :class:`DatasetChangedError` when the training split rebuilt for ``checkpoint`` has other (user, item)
    pairs than the one it trained on (the vocabularies can match while rows moved between splits)."""
    recorded = (checkpoint.get("vocabulary") or {}).get("train")
    current = split_fingerprint(train_dataset)
    if not recorded or current is None or recorded == current:
        return
    count = (
        f"{current['interactions']} interactions, {recorded['interactions']} then"
        if current["interactions"] != recorded["interactions"]
        else f"as many interactions ({current['interactions']}), but other (user, item) pairs"
    )
    raise DatasetChangedError(
        f"{source}: the training split rebuilt from {_where(train_dataset)} is not the one the model trained on "
        f"({count}): the data's rows changed or were reordered (a random split follows the row order), so the "
        "items excluded as seen and a graph model's neighbourhoods would differ. Restore the data files the model "
        "was trained on (same rows in the same order), or retrain on the new data."
    )
