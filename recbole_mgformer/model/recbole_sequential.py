"""RecBole's sequential models, imported without their package's side effect, and their encoders' precision.

Importing any module of ``recbole.model.sequential_recommender`` runs the package's ``sine.py``, which switches
autograd anomaly detection on for the whole process (every op then records its stack and every backward op checks
for NaN: several times slower). The registry imports model modules with it kept as it was; a model of this project
that subclasses RecBole's must do the same when imported directly."""

import importlib

import torch

from recbole_mgformer.model.loss import linear_cross_entropy
from recbole_mgformer.model.precision import resolve_precision
from recbole_mgformer.safety.models import anomaly_mode_kept


def recbole_sequential_model(name):
    """RecBole's sequential model class ``name`` (``"SASRec"``), anomaly detection left as it was."""
    with anomaly_mode_kept():
        module = importlib.import_module(f"recbole.model.sequential_recommender.{name.lower()}")
    return getattr(module, name)


def encoder_precision(name, device, model):
    """The dtype of a sequential model's encoder matmuls from its ``precision`` option ``name`` (``fp32``, the
    default when unset, RecBole's arithmetic | ``bf16`` | ``auto``: bf16 where ``device`` multiplies it natively);
    see :mod:`recbole_mgformer.model.precision`. The model reads the option itself (the config check finds the keys
    a model reads in its source)."""
    name = name or "fp32"
    try:
        return resolve_precision(name, device)
    except ValueError as error:
        raise ValueError(f"{model}: precision={name!r}: {error}") from None


def encoder_autocast(dtype, device):
    """bf16 autocast over an encoder where ``dtype`` is bf16 (matmuls in bf16 with fp32 accumulation; norms,
    softmax and the parameters stay fp32), else nothing."""
    return torch.autocast(torch.device(device).type, dtype=dtype, enabled=dtype == torch.bfloat16)


TRAIN_PROTOCOLS = ("prefix", "sequence")  # RecBole's prefix rows; whole windows (data/sequence_windows.py)


def train_protocol(config):
    """The run's ``train_protocol``: ``prefix`` (RecBole's, the default) or ``sequence``."""
    value = config["train_protocol"]
    return "prefix" if value is None else value


def window_stride(config):
    """``train_window_stride`` under the whole-sequence protocol: a window trains its last ``stride`` positions and
    the next window ends ``stride`` targets earlier (default ``MAX_ITEM_LIST_LENGTH``: windows side by side)."""
    stride = config["train_window_stride"]
    return config["MAX_ITEM_LIST_LENGTH"] if stride is None else stride


def next_item_targets(item_seq, item_seq_len, target, stride=None):
    """The item each position of a window is trained to predict: item_seq (B, L) left-aligned, item_seq_len (B,),
    target (B,) the row's own target -> (B, L): ``item_seq[:, t + 1]`` before the last item, ``target`` at it, 0
    (no target) at the padding and, with ``stride``, before the window's last ``stride`` positions."""
    targets = torch.zeros_like(item_seq)
    targets[:, :-1] = item_seq[:, 1:]  # the padding after the last item shifts in as 0
    targets.scatter_(1, (item_seq_len - 1).unsqueeze(1), target.unsqueeze(1))
    if stride is not None and stride < item_seq.size(1):
        positions = torch.arange(item_seq.size(1), device=item_seq.device)
        targets.masked_fill_(positions.unsqueeze(0) < (item_seq_len - stride).unsqueeze(1), 0)
    return targets


def trained_positions(outputs, targets, stride, window):
    """The outputs (N, C) and targets (N,) of the positions with a target: all of a window's real positions at a
    ``stride`` of the whole ``window`` (no selection, so no host sync), else only those whose target is not 0 (a
    window trains its last ``stride`` positions)."""
    if stride >= window:
        return outputs, targets
    trained = targets != 0
    return outputs[trained], targets[trained]


def whole_sequence_stride(config, model):
    """The window stride where ``config`` trains ``model`` under ``train_protocol: sequence`` (a loss at every
    trained position of a window, :mod:`recbole_mgformer.data.sequence_windows`), else None (RecBole's prefix rows).
    The protocol scores every item at every position: a cross-entropy, never BPR's sampled negatives."""
    if train_protocol(config) != "sequence":
        return None
    if (config["loss_type"] or "CE") != "CE":
        raise ValueError(f"{model}: train_protocol: sequence trains with loss_type: CE, got {config['loss_type']!r}")
    return window_stride(config)


class WholeSequenceLoss:
    """``calculate_loss`` of a RecBole sequential model whose item embeddings score the items (SASRec, GRU4Rec):
    RecBole's under its prefix protocol, and under ``train_protocol: sequence`` a cross-entropy over every item at
    every trained position of a window. The model sets ``window_stride`` (:func:`whole_sequence_stride`) and
    ``encoder_dtype``, and gives ``every_position(item_seq, item_seq_len, targets)``: its outputs at the real
    positions (N, H) and their targets (N,), in one order."""

    TRAIN_PROTOCOLS = TRAIN_PROTOCOLS

    def calculate_loss(self, interaction):
        if self.window_stride is None:
            return super().calculate_loss(interaction)
        item_seq, item_seq_len = interaction[self.ITEM_SEQ], interaction[self.ITEM_SEQ_LEN]
        targets = next_item_targets(item_seq, item_seq_len, interaction[self.POS_ITEM_ID], self.window_stride)
        with encoder_autocast(self.encoder_dtype, item_seq.device):
            hidden, targets = self.every_position(item_seq, item_seq_len, targets)  # (N, H), (N,)
        hidden, targets = trained_positions(hidden.float(), targets, self.window_stride, item_seq.size(1))
        return linear_cross_entropy(hidden, self.item_embedding.weight, None, targets)
