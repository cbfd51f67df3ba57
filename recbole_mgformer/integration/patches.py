"""Every change this project makes to RecBole, declared in one list and applied once by :func:`register`.

Three kinds, all applied in place of RecBole's own lines, none by editing RecBole's files:

- repairs (:mod:`recbole_mgformer.integration.compat`): RecBole 1.2.1 on today's numpy, scipy, pandas, torch and
  hyperopt, each applied only on the versions that break it;
- safety (:mod:`recbole_mgformer.safety`): nothing RecBole loads runs code, on every stack;
- the plugin (:mod:`recbole_mgformer.integration.plugin`): RecBole's own entry points find and load this project's
  models.

They apply in the order listed. Each entry names what it patches, the RecBole lines it replaces (RecBole 1.2.1)
and the versions it applies to. Importing this module, or any other, patches nothing: :func:`register`
(``recbole_mgformer.register``) does, and every entry point calls it.
"""

from dataclasses import dataclass
from typing import Callable

from recbole_mgformer import safety
from recbole_mgformer.integration import compat


def _always():
    return True


@dataclass(frozen=True)
class Patch:
    name: str
    patches: str  # what in RecBole it changes
    replaces: str  # the RecBole 1.2.1 lines it replaces, file:line
    versions: str  # where it applies, in words; ``needed`` decides
    apply: Callable[[], None]
    needed: Callable[[], bool] = _always


def _plugin(hook):
    """A hook of :mod:`recbole_mgformer.integration.plugin`, imported when applied (it imports RecBole's models)."""

    def apply():
        from recbole_mgformer.integration import plugin

        getattr(plugin, hook)()

    return apply


def _needed(repair):
    return lambda: compat.NEEDED[repair]


PATCHES = (
    # ---------------------------------------------------------------- repairs for today's libraries
    Patch(
        "numpy2_aliases",
        "Config.compatibility_settings",
        "recbole/config/configurator.py:625-636",
        "numpy >= 2",
        compat.repair_numpy2_aliases,
        _needed("numpy2_aliases"),
    ),
    Patch(
        "scipy_dok_update",
        "scipy.sparse.dok_matrix._update",
        "recbole/model/general_recommender/lightgcn.py:111, ngcf.py:110, ncl.py:131, spectralcf.py:123, gcmc.py:174; "
        "knowledge_aware_recommender/kgin.py:356, mcclk.py:425",
        "scipy >= 1.13",
        compat.repair_scipy_dok_update,
        _needed("scipy_dok_update"),
    ),
    Patch(
        "pandas3_fillna",
        "Dataset._load_feat, Dataset._fill_nan",
        "recbole/data/dataset/dataset.py:501, 648, 650",
        "pandas >= 3",
        compat.repair_pandas3_fillna,
        _needed("pandas3_fillna"),
    ),
    Patch(
        "pandas3_agg_len",
        "Dataset._normalize, _discretization, _remap; SequentialDataset._benchmark_presets; "
        "KnowledgeBasedDataset._reset_ent_remapID",
        "recbole/data/dataset/dataset.py:712, 792, 809, 1217; sequential_dataset.py:165; kg_dataset.py:316",
        "pandas >= 3",
        compat.repair_pandas3_agg_len,
        _needed("pandas3_agg_len"),
    ),
    Patch(
        "torch_weights_only_checkpoints",
        "Trainer._save_checkpoint, _load_model_state, resume_checkpoint, evaluate, fit",
        "recbole/trainer/trainer.py:300, 323, 583",
        "every torch (broken from torch 2.6), so that every checkpoint is weights-only",
        compat.repair_torch_weights_only_checkpoints,
        _needed("torch_weights_only_checkpoints"),
    ),
    Patch(
        "hyperopt_generator",
        "hyper_tuning.exhaustive_search",
        "recbole/trainer/hyper_tuning.py:118",
        "hyperopt >= 0.2.7",
        compat.repair_hyperopt_generator,
        _needed("hyperopt_generator"),
    ),
    # ---------------------------------------------------------------- the plugin: RecBole's entry points (1)
    Patch(
        "model_modules",
        "sys.modules['recbole.model.<type>.<name>'] for each project model",
        "recbole/utils/utils.py:76 (get_model's find_spec)",
        "every version",
        _plugin("alias_model_modules"),
    ),
    Patch(
        "model_trainers",
        "recbole.trainer.CSATrainer",
        "recbole/utils/utils.py:99 (get_trainer's <Model>Trainer lookup)",
        "every version",
        _plugin("install_trainers"),
    ),
    Patch(
        "model_defaults",
        "Config._load_internal_config_dict",
        "recbole/config/configurator.py:238",
        "every version",
        _plugin("install_model_defaults"),
    ),
    # ---------------------------------------------------------------- safety: nothing loaded runs code; after the
    # project's models are imported, since the dataset readers are replaced in every module imported before
    Patch(
        "literal_settings",
        "Config._build_yaml_loader, _convert_config_dict, _load_config_files",
        "recbole/config/configurator.py:107 (yaml.FullLoader), 131 (eval of each string setting), 149",
        "every version",
        safety.install_config,
    ),
    Patch(
        "pickle_free_data",
        "recbole.data.utils.create_dataset, load_split_dataloaders, save_split_dataloaders (wherever imported); "
        "Dataset.save",
        "recbole/data/utils.py:61, 78, 122; recbole/data/dataset/dataset.py:1875",
        "every version",
        safety.install_data,
    ),
    Patch(
        "literal_hyper_tuning_files",
        "HyperTuning._build_space_from_file",
        "recbole/trainer/hyper_tuning.py:239",
        "every version",
        safety.install_hyper_tuning,
    ),
    Patch(
        "model_files_without_code",
        "KD_DAGFM.__init__ (its teacher setting), LDiffRec.__init__ (item_emb.npy)",
        "recbole/model/context_aware_recommender/kd_dagfm.py:44; general_recommender/ldiffrec.py:232",
        "every version",
        safety.install_models,
    ),
    Patch(
        "weights_only_pretraining",
        "ConvNCF, NAIS, RaCT, NeuMF, S3Rec, KD_DAGFM __init__ (their pretrained files)",
        "recbole/model/general_recommender/convncf.py:82, nais.py:127, ract.py:75, 84, neumf.py:84; "
        "sequential_recommender/s3rec.py:120; context_aware_recommender/kd_dagfm.py:56",
        "every version (torch before 2.6 unpickles by default)",
        safety.install_weights_only_pretraining,
    ),
    # ---------------------------------------------------------------- the plugin (2)
    Patch(
        "weights_only_loader",
        "recbole.quick_start.load_data_and_model (when recbole.quick_start is imported)",
        "recbole/quick_start/quick_start.py:233-250 (torch.load of a pickled Config)",
        "every version",
        _plugin("install_checkpoint_loader"),
    ),
)

APPLIED = []  # names of the patches applied in this process, in order


def register():
    """Apply every patch of :data:`PATCHES` this stack needs, in order, once per process; returns their names.
    Afterwards RecBole's ``get_model``, ``run_recbole``, ``load_data_and_model`` and ``HyperTuning`` find and load
    this project's models, and nothing RecBole loads runs code."""
    for patch in PATCHES:
        if patch.name not in APPLIED and patch.needed():
            patch.apply()
            APPLIED.append(patch.name)
    return list(APPLIED)
