"""RecBole's sequential models, imported without their package's side effect, and their encoders' precision.

Importing any module of ``recbole.model.sequential_recommender`` runs the package's ``sine.py``, which switches
autograd anomaly detection on for the whole process (every op then records its stack and every backward op checks
for NaN: several times slower). The registry imports model modules with it kept as it was; a model of this project
that subclasses RecBole's must do the same when imported directly."""

import importlib

import torch

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
