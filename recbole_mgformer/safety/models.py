"""RecBole's models load no code from their files: KD_DAGFM's ``teacher``, LDiffRec's embeddings, pretrained weights.

KD_DAGFM ``eval``s its ``teacher`` setting (kd_dagfm.py:44), LDiffRec loads ``item_emb.npy`` with
``allow_pickle=True`` (ldiffrec.py:232), and six models ``torch.load`` a pretrained file without ``weights_only``.
"""

import contextlib
import functools
import importlib
import unittest.mock

import numpy

from recbole_mgformer.safety.settings import UnsafeSettingError, patched_builtin_eval

KD_DAGFM_TEACHERS = ("CrossNet", "CIN")  # the teacher networks kd_dagfm.py defines


@contextlib.contextmanager
def anomaly_mode_kept():
    """Undo one side effect of importing RecBole's models: ``sine.py``, imported with any of RecBole's
    sequential models, switches autograd anomaly detection on for the whole process: every forward op then
    records its stack and every backward op checks its gradient for NaN, which slowed SASRec's training
    step on ml-100k about 1.7 times here. Every import of RecBole's model packages goes through it."""
    import torch

    anomaly, check_nan = torch.is_anomaly_enabled(), torch.is_anomaly_check_nan_enabled()
    try:
        yield
    finally:
        torch.set_anomaly_enabled(anomaly, check_nan)


def install_models():
    """KD_DAGFM evals its ``teacher`` setting, LDiffRec unpickles its dataset's ``item_emb.npy``."""
    from recbole.model.context_aware_recommender import kd_dagfm
    from recbole.model.general_recommender import ldiffrec

    kd_init = kd_dagfm.KD_DAGFM.__init__

    def teacher_network(name):
        if name not in KD_DAGFM_TEACHERS:
            raise UnsafeSettingError(
                f"setting teacher: {name!r} is not one of KD_DAGFM's teacher networks ({', '.join(KD_DAGFM_TEACHERS)})"
            )
        return getattr(kd_dagfm, name)

    @functools.wraps(kd_init)
    def kd_dagfm_init(self, config, dataset):
        with patched_builtin_eval(teacher_network, kd_dagfm):
            kd_init(self, config, dataset)

    kd_dagfm.KD_DAGFM.__init__ = kd_dagfm_init

    ld_init = ldiffrec.LDiffRec.__init__
    numpy_load = numpy.load

    def load_without_pickles(file, *args, **kwargs):
        try:
            return numpy_load(file, *args, **{**kwargs, "allow_pickle": False})
        except ValueError as error:
            if "allow_pickle" not in str(error):
                raise
            raise UnsafeSettingError(
                f"{file} holds pickled objects, and loading a pickle runs code; LDiffRec's "
                "item embeddings must be a plain numeric array (numpy.save of a float "
                "array)"
            ) from None

    @functools.wraps(ld_init)
    def ldiffrec_init(self, config, dataset):
        saved, ldiffrec.np = ldiffrec.np, _NumpyWithoutPickles(load_without_pickles)
        try:
            ld_init(self, config, dataset)
        finally:
            ldiffrec.np = saved

    ldiffrec.LDiffRec.__init__ = ldiffrec_init


class _NumpyWithoutPickles:
    """numpy, with a ``load`` that refuses pickled arrays (for one module's global ``np``)."""

    def __init__(self, load):
        self.load = load

    def __getattr__(self, name):
        return getattr(numpy, name)


# RecBole models that torch.load a pretrained model named by a setting, in __init__: module, class.
PRETRAINED_MODELS = (
    ("general_recommender.convncf", "ConvNCF"),
    ("general_recommender.nais", "NAIS"),
    ("general_recommender.ract", "RaCT"),
    ("general_recommender.neumf", "NeuMF"),
    ("sequential_recommender.s3rec", "S3Rec"),
    ("context_aware_recommender.kd_dagfm", "KD_DAGFM"),
)


def install_weights_only_pretraining():
    """ConvNCF, NAIS, RaCT, NeuMF, S3Rec and KD_DAGFM ``torch.load`` a pretrained file without ``weights_only``
    (convncf.py:82, nais.py:127, ract.py:75/84, neumf.py:84, s3rec.py:120, kd_dagfm.py:56): torch before 2.6 (or
    ``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD``) unpickles it. Their construction loads weights only."""
    import torch

    torch_load = torch.load

    def load_weights_only(*args, **kwargs):
        return torch_load(*args, **{**kwargs, "weights_only": True})

    for module_name, class_name in PRETRAINED_MODELS:
        with anomaly_mode_kept():
            cls = getattr(importlib.import_module(f"recbole.model.{module_name}"), class_name)
        init = cls.__init__

        def weights_only_init(self, *args, _init=init, **kwargs):
            with unittest.mock.patch.object(torch, "load", load_weights_only):
                _init(self, *args, **kwargs)

        cls.__init__ = functools.wraps(init)(weights_only_init)
