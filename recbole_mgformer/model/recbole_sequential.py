"""RecBole's sequential models, imported without their package's side effect.

Importing any module of ``recbole.model.sequential_recommender`` runs the package's ``sine.py``, which switches
autograd anomaly detection on for the whole process (every op then records its stack and every backward op checks
for NaN: several times slower). The registry imports model modules with it kept as it was; a model of this project
that subclasses RecBole's must do the same when imported directly."""

import importlib

import torch


def recbole_sequential_model(name):
    """RecBole's sequential model class ``name`` (``"SASRec"``), anomaly detection left as it was."""
    anomaly, check_nan = torch.is_anomaly_enabled(), torch.is_anomaly_check_nan_enabled()
    try:
        module = importlib.import_module(f"recbole.model.sequential_recommender.{name.lower()}")
    finally:
        torch.set_anomaly_enabled(anomaly, check_nan)
    return getattr(module, name)
