"""Checkpoint files that load with ``torch.load(weights_only=True)``: written atomically, loaded and checked.

RecBole's trainers pickle the whole ``Config`` into each checkpoint; torch >= 2.6 refuses to load
that by default, and allowing it would let a checkpoint run arbitrary code. Here a checkpoint holds
only state dicts and plain values, and every load goes through :func:`load_checkpoint`.
"""

import numbers
import os
import zipfile

import numpy
import scipy.sparse
import torch
from recbole.utils import ModelType

from recbole_mgformer.config.input_checks import write_new_file


def plain_value(value):
    """``value`` as None/bool/int/float/str and lists/dicts of them; anything else as its str.

    Numbers become builtins: numpy's float64 is a float subclass, but it pickles as a numpy global that
    ``weights_only=True`` refuses."""
    if value is None:
        return None
    if isinstance(value, str):
        return str(value)  # numpy's str_ too
    if isinstance(value, (bool, numpy.bool_)):
        return bool(value)
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    if isinstance(value, (list, tuple)):
        return [plain_value(v) for v in value]
    if isinstance(value, dict):
        return {str(k): plain_value(v) for k, v in value.items()}
    return str(value)


def load_checkpoint(path, device="cpu"):
    """Load a checkpoint of this project safely; a file that needs pickled objects is refused."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no checkpoint at {path}; check the file name and checkpoint_dir")
    if not is_archive_start(path):
        raise ValueError(
            f"{path} is not a checkpoint: torch.save writes a zip archive, and this file does not begin as one; pass "
            "the .pth file a run saved (saved/<Model>-<time>.pth, or the checkpoint_dir it used)"
        )
    damaged = checkpoint_damage(path)
    if damaged:
        raise ValueError(
            f"{path} is damaged: {damaged}. Delete it and resume from another checkpoint "
            "(the .latest.pth beside a best checkpoint, or the reverse) or retrain"
        )
    try:
        return torch.load(path, map_location=device, weights_only=True)
    except Exception as error:  # torch raises UnpicklingError or RuntimeError, depending on the content
        raise ValueError(
            f"{path} is not a checkpoint that loads with weights_only=True ({error}). "
            "Checkpoints written by recbole_mgformer hold only tensors and plain values; "
            "a checkpoint written by RecBole's own trainer pickles its Config and must be retrained."
        ) from error


def is_archive_start(path):
    """Whether ``path`` begins as a zip archive (as every torch.save file does) or is empty: a file that does not is
    some other file, not a damaged checkpoint (whose advice, to delete it, would be wrong)."""
    with open(path, "rb") as file:
        head = file.read(4)
    return not head or head == b"PK\x03\x04"


def checkpoint_damage(path):
    """Why ``path`` cannot be a whole checkpoint (torch.save writes a zip archive), or None if it may be one.
    A 0-byte or truncated file comes from a copy or a disk that failed; this project writes atomically."""
    size = os.path.getsize(path)
    if size == 0:
        return "the file is empty (0 bytes)"
    if not zipfile.is_zipfile(path):
        return f"its {size} bytes are not a complete torch.save archive (truncated, or not a checkpoint)"
    try:
        with zipfile.ZipFile(path) as archive:
            broken = archive.testzip()
    except (zipfile.BadZipFile, OSError) as error:
        return f"its archive cannot be read ({error})"
    return f"its entry {broken} fails its checksum" if broken else None


def check_model_state(model, checkpoint, source="the checkpoint"):
    """Refuse another model's weights: a recorded ``model_class`` other than ``model``'s, or ``state_dict`` names or
    shapes that differ. Keys alone do not tell models apart: BPR's weights have LightGCN's names and shapes."""
    recorded, name = checkpoint.get("model_class"), type(model).__name__
    if recorded is not None and recorded != name:
        raise ValueError(
            f"{source} holds the weights of a {recorded} model, not of {name} (the model its config or "
            f"this run names); load it as {recorded}, or use a checkpoint of {name}"
        )
    expected = {key: tuple(value.shape) for key, value in model.state_dict().items()}
    found = {key: tuple(value.shape) for key, value in checkpoint["state_dict"].items()}
    problems = []
    missing, unexpected = sorted(set(expected) - set(found)), sorted(set(found) - set(expected))
    if missing:
        problems.append(f"missing {', '.join(missing[:3])}{', ...' if len(missing) > 3 else ''}")
    if unexpected:
        problems.append(f"unexpected {', '.join(unexpected[:3])}{', ...' if len(unexpected) > 3 else ''}")
    reshaped = [
        f"{key} {found[key]} there, {expected[key]} here"
        for key in sorted(set(found) & set(expected))
        if found[key] != expected[key]
    ]
    if reshaped:
        problems.append(f"other shapes: {'; '.join(reshaped[:3])}{'; ...' if len(reshaped) > 3 else ''}")
    if problems:
        raise ValueError(
            f"{source} does not hold {name}'s parameters ({'; '.join(problems)}): it was written by "
            f"{recorded or 'another model'} or with other sizes or data; load it with the model and "
            "settings that trained it"
        )


def save_atomically(state, path):
    """``torch.save`` through a temporary file, so a reader never sees half a checkpoint: not after a crash,
    and not while the first process of each machine writes its copy into a checkpoint_dir they share. The
    temporary is this call's own (two writers never share one); the checkpoint is replaced, as a run updates its
    own file each better epoch: the name is the run's, claimed when first written
    (:func:`recbole_mgformer.training.trainer.claim_file`), or a benchmark run's, which its claim holds."""
    write_new_file(path, lambda temporary: torch.save(state, temporary), option="checkpoint", overwrite=True)


def checkpoint_other_parameter(model):
    """What a checkpoint keeps of ``model.other_parameter()``: all but numpy arrays and scipy matrices.

    A traditional model (EASE, ItemKNN, SLIMElastic, ...) holds such matrices, which its constructor computes from
    the config and the training set alone; they do not load under ``weights_only=True`` (RecBole pickles them), and
    EASE's item-item matrix grows with the square of the item count (gigabytes on Gowalla). They are left out: the
    model built to receive the checkpoint (the trainer's own, or
    :func:`recbole_mgformer.integration.checkpoints.load_data_and_model`'s) has computed them already. Any other model
    must keep its state as tensors and plain values, or its checkpoint would load without it: an error."""
    other = model.other_parameter()
    left_out = sorted(
        key for key, value in other.items() if isinstance(value, numpy.ndarray) or scipy.sparse.issparse(value)
    )
    if left_out and getattr(model, "type", None) != ModelType.TRADITIONAL:
        raise TypeError(
            f"{type(model).__name__}.other_parameter() holds {', '.join(left_out)}, numpy or scipy "
            "arrays: a checkpoint must load with weights_only=True, so keep them as tensors"
        )
    return {key: value for key, value in other.items() if key not in left_out}
