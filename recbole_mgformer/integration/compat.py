"""RecBole 1.2.1 on today's numpy, scipy, pandas, torch and hyperopt: the repairs.

Each repair names the RecBole lines it mends; :data:`recbole_mgformer.integration.patches.PATCHES` lists them with
the versions they apply to (:data:`NEEDED`), so the tested 3.11 pin set runs RecBole's own code. Nothing global is
switched off: ``torch.load`` keeps ``weights_only=True``, and the pandas repairs act only while RecBole's own dataset
methods run. ``tests/integration/test_compat.py`` shows each breakage on the stack that has it, and the repair. One
mend on every stack is a function to call instead of RecBole's, not a patch: :func:`init_logger`, without its
log-folder race.
"""

import contextlib
import functools
import re
import warnings
from importlib import metadata

import numpy
import pandas
import scipy.sparse

ORIGINALS = {}  # "Class.method" -> RecBole's function, kept for the tests and for callers that need it


def _parse(version):
    """'2.13.0+cpu' -> (2, 13, 0); '3.0.0rc1' -> (3, 0, 0)."""
    return tuple(int(number) for number in re.findall(r"^\d+|(?<=\.)\d+", version)[:3])


def _installed_version(distribution):
    """(major, minor, micro) of an installed distribution, without importing it; (0,) when absent."""
    try:
        return _parse(metadata.version(distribution))
    except metadata.PackageNotFoundError:
        return (0,)


# Does this stack have the breakage each repair mends?
NEEDED = {
    "numpy2_aliases": _parse(numpy.__version__) >= (2, 0),
    "scipy_dok_update": not hasattr(scipy.sparse.dok_matrix, "_update"),
    "pandas3_fillna": _parse(pandas.__version__) >= (3, 0),
    "pandas3_agg_len": _parse(pandas.__version__) >= (3, 0),
    # broken from torch 2.6 on; applied on every torch so that every checkpoint is weights-only, as
    # load_data_and_model (recbole_mgformer.integration.checkpoints) reads them
    "torch_weights_only_checkpoints": True,
    "hyperopt_generator": _installed_version("hyperopt") >= (0, 2, 7),
}


def _replace(cls, name, function):
    ORIGINALS.setdefault(f"{cls.__name__}.{name}", getattr(cls, name))
    setattr(cls, name, functools.wraps(ORIGINALS[f"{cls.__name__}.{name}"])(function))


# ------------------------------------------------------------------------------------------------ numpy 2


def repair_numpy2_aliases():
    """recbole/config/configurator.py:625-636 (``Config.compatibility_settings``, run by every Config) sets
    ``np.float = np.float_``, ``np.complex = np.complex_`` and ``np.unicode = np.unicode_``; numpy 2 removed
    those right-hand sides, so every Config raised AttributeError. The same aliases from names numpy 2 has
    (RecBole's metrics.py:90, interaction.py:31 and dataset.py:652 read ``np.float``)."""
    from recbole.config import Config

    def compatibility_settings(self):
        aliases = {
            "bool": numpy.bool_,
            "int": numpy.int_,
            "float": numpy.float64,
            "complex": numpy.complex128,
            "object": numpy.object_,
            "str": numpy.str_,
            "long": numpy.int_,
            "unicode": numpy.str_,
        }
        for name, value in aliases.items():
            setattr(numpy, name, value)

    _replace(Config, "compatibility_settings", compatibility_settings)


# ------------------------------------------------------------------------------------------------ scipy


def repair_scipy_dok_update():
    """LightGCN, NGCF, NCL, SpectralCF, GCMC, KGIN and MCCLK build their normalised adjacency with
    ``dok_matrix._update(data_dict)`` (recbole/model/general_recommender/lightgcn.py:111, ngcf.py:110,
    ncl.py:131, spectralcf.py:123, gcmc.py:174; knowledge_aware_recommender/kgin.py:356, mcclk.py:425).
    scipy 1.13 rewrote dok_matrix without that dict method; it is the same bulk update of the stored entries."""

    def _update(self, entries):
        self._dict.update(entries)

    scipy.sparse.dok_matrix._update = _update


# ------------------------------------------------------------------------------------------------ pandas 3


@contextlib.contextmanager
def _patched(owner, name, value):
    saved = getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, saved)


def _while_running(cls, method_name, context):
    """``cls.method_name`` runs inside ``context()``: a pandas-2 behaviour for RecBole's own lines only."""
    method = getattr(cls, method_name)

    def wrapped(self, *args, **kwargs):
        with context():
            return method(self, *args, **kwargs)

    _replace(cls, method_name, wrapped)


def _read_csv_filling_sequences(read_csv):
    """``pandas.read_csv`` that leaves missing ``token_seq``/``float_seq`` cells as '', what RecBole's
    ``df[field].fillna(value="", inplace=True)`` did before Copy-on-Write."""

    def read(*args, **kwargs):
        frame = read_csv(*args, **kwargs)
        sequences = [c for c in frame.columns if str(c).endswith(("token_seq", "float_seq"))]
        return frame.fillna({c: "" for c in sequences}) if sequences else frame

    return read


def repair_pandas3_fillna():
    """pandas 3 (Copy-on-Write) makes ``df[field].fillna(..., inplace=True)`` a no-op on the frame.
    recbole/data/dataset/dataset.py:501 (``_load_feat``): a missing sequence cell stayed NaN and
    ``NaN.split`` raised; dataset.py:648/650 (``_fill_nan``): missing tokens and floats silently stayed NaN
    instead of 0 and the field's mean."""
    from recbole.data.dataset import Dataset
    from recbole.utils import FeatureType

    @contextlib.contextmanager
    def sequences_filled():
        with _patched(pandas, "read_csv", _read_csv_filling_sequences(pandas.read_csv)), warnings.catch_warnings():
            warnings.simplefilter("ignore", pandas.errors.ChainedAssignmentError)  # line 501, now a harmless no-op
            yield

    _while_running(Dataset, "_load_feat", sequences_filled)

    def _fill_nan(self):  # RecBole's method with its two fillna calls as assignments
        for feat_name in self.feat_name_list:
            feat = getattr(self, feat_name)
            for field in feat:
                ftype = self.field2type[field]
                if ftype == FeatureType.TOKEN:
                    feat[field] = feat[field].fillna(value=0)
                elif ftype == FeatureType.FLOAT:
                    feat[field] = feat[field].fillna(value=feat[field].mean())
                else:
                    empty = numpy.array([], dtype=numpy.int64 if ftype == FeatureType.TOKEN_SEQ else numpy.float64)
                    feat[field] = feat[field].apply(lambda x, empty=empty: empty.copy() if isinstance(x, float) else x)

    _replace(Dataset, "_fill_nan", _fill_nan)


def _series_agg(agg):
    def series_agg(self, func=None, axis=0, *args, **kwargs):
        if func is len:  # pandas 2 applied a lone callable per element first; pandas 3 passes the whole Series
            return self.map(len)
        return agg(self, func, axis, *args, **kwargs)

    return series_agg


def repair_pandas3_agg_len():
    """``feat[field].agg(len)`` means each sequence's length to RecBole (dataset.py:712 ``_normalize``,
    :792/:809 ``_discretization``, :1217 ``_remap``; sequential_dataset.py:165 ``_benchmark_presets``;
    kg_dataset.py:316 ``_reset_ent_remapID``); pandas 3 returns the Series' length, so every
    token_seq field (ml-100k's genres) failed to remap. Those methods run with the per-element meaning."""
    from recbole.data.dataset import Dataset, KnowledgeBasedDataset, SequentialDataset

    def context():
        return _patched(pandas.Series, "agg", _series_agg(pandas.Series.agg))

    for cls, name in (
        (Dataset, "_normalize"),
        (Dataset, "_discretization"),
        (Dataset, "_remap"),
        (SequentialDataset, "_benchmark_presets"),
        (KnowledgeBasedDataset, "_reset_ent_remapID"),
    ):
        _while_running(cls, name, context)


# ------------------------------------------------------------------------------------------------ torch >= 2.6


def repair_torch_weights_only_checkpoints():
    """RecBole's Trainer pickles its whole Config into each checkpoint (recbole/trainer/trainer.py:300) and
    reads it back with ``torch.load`` (trainer.py:323 ``resume_checkpoint``, :583 ``evaluate``); since
    torch 2.6 ``torch.load`` is ``weights_only=True``, so ``run_recbole`` failed after training every model.
    RecBole's trainers now write and read this project's weights-only checkpoints
    (:class:`recbole_mgformer.training.trainer.SafeCheckpointMixin`): tensors and plain values, no pickled objects."""
    from recbole.trainer import Trainer

    from recbole_mgformer.training.checkpoint_files import load_checkpoint
    from recbole_mgformer.training.trainer import SafeCheckpointMixin
    from recbole_mgformer.training.vocabulary import dataset_vocabulary

    recbole_evaluate, recbole_fit = Trainer.evaluate, Trainer.fit
    for name in ("_save_checkpoint", "_load_model_state", "resume_checkpoint"):
        ORIGINALS.setdefault(f"Trainer.{name}", getattr(Trainer, name, None))
        setattr(Trainer, name, getattr(SafeCheckpointMixin, name))

    def evaluate(self, eval_data, load_best_model=True, model_file=None, show_progress=False):
        if eval_data and load_best_model:
            checkpoint_file = model_file or self.saved_model_file
            self._load_model_state(load_checkpoint(checkpoint_file, self.device))
            self.logger.info(f"Loading model structure and parameters from {checkpoint_file}")
        return recbole_evaluate(self, eval_data, load_best_model=False, show_progress=show_progress)

    _replace(Trainer, "evaluate", evaluate)

    def fit(self, train_data, *args, **kwargs):
        # the vocabularies _save_checkpoint keeps (SafeCheckpointMixin.fit sets them for this project's trainers)
        if not isinstance(self, SafeCheckpointMixin):
            self.vocabulary = dataset_vocabulary(getattr(train_data, "_dataset", None))
        return recbole_fit(self, train_data, *args, **kwargs)

    _replace(Trainer, "fit", fit)


# ------------------------------------------------------------------------------------------------ hyperopt >= 0.2.7


def repair_hyperopt_generator():
    """RecBole's exhaustive search (``HyperTuning(algo="exhaustive")``, its default) draws with
    ``np.random.RandomState(seed)`` (recbole/trainer/hyper_tuning.py:118); hyperopt 0.2.7 samples with
    ``rng.integers``, a ``numpy.random.Generator`` method, so every search failed on its first draw. The search
    runs with a Generator in that one place."""
    from recbole.trainer import hyper_tuning

    search = hyper_tuning.exhaustive_search
    ORIGINALS.setdefault("hyper_tuning.exhaustive_search", search)

    @functools.wraps(search)
    def exhaustive_search(*args, **kwargs):
        generator = numpy.random.Generator  # not default_rng: it checks isinstance(seed, numpy.random.RandomState)
        with _patched(numpy.random, "RandomState", lambda seed=None: generator(numpy.random.PCG64(seed))):
            return search(*args, **kwargs)

    hyper_tuning.exhaustive_search = exhaustive_search


def init_logger(config):
    """RecBole's ``init_logger``, safe for runs started together in one folder.

    RecBole creates ``./log/<model>`` by checking and then creating it, so two runs of one model started at
    the same moment (two benchmark seeds side by side) can both see it missing and one dies with
    ``FileExistsError``. Creating the folder first, idempotently, closes that window. RecBole names the file
    ``<model>-<dataset>-<local time>-<config hash>.log``: two runs of one config started in the same second
    wrote into one file, so the time here carries the process id and a random suffix."""
    import os
    import secrets

    import recbole.utils.logger as recbole_logger

    folder = os.path.join("log", str(config["model"]))
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as error:  # RecBole writes its log (and TensorBoard's) under the working folder
        raise PermissionError(
            f"cannot create the run's log folder {os.path.abspath(folder)} ({error.strerror}): RecBole writes its "
            "logs under the working folder; run from a folder you can write to"
        ) from None
    started = f"{recbole_logger.get_local_time()}-{os.getpid()}-{secrets.token_hex(2)}"
    with _patched(recbole_logger, "get_local_time", lambda: started):
        recbole_logger.init_logger(config)
