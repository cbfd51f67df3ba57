import subprocess
import sys

import pytest

from recbole_mgformer.integration.registry import available_models, get_model, get_trainer
from recbole_mgformer.model.general_recommender.bspm import BSPM
from recbole_mgformer.model.general_recommender.chebycf import ChebyCF
from recbole_mgformer.model.general_recommender.directau import DirectAU
from recbole_mgformer.model.general_recommender.gfcf import GFCF
from recbole_mgformer.model.general_recommender.mgformer import MGFormer
from recbole_mgformer.model.general_recommender.sgl import SGL
from recbole_mgformer.model.general_recommender.simgcl import SimGCL
from recbole_mgformer.model.general_recommender.turbocf import TurboCF
from recbole_mgformer.model.general_recommender.xsimgcl import XSimGCL
from recbole_mgformer.training.trainer import SafeCheckpointMixin


@pytest.mark.parametrize(
    "cls", [MGFormer, SimGCL, XSimGCL, DirectAU, SGL, GFCF, BSPM, TurboCF, ChebyCF], ids=lambda cls: cls.__name__
)
def test_project_models_resolve_first_and_case_insensitively(cls):
    assert get_model(cls.__name__) is cls
    assert get_model(cls.__name__.lower()) is cls
    assert cls.__name__ in available_models()


@pytest.mark.parametrize("name", ["BPR", "NGCF", "Pop"])
def test_recbole_models_resolve_by_name(name):
    cls = get_model(name)
    assert cls.__name__ == name and cls.__module__.startswith("recbole.model")


def test_unknown_model_lists_the_available_ones():
    with pytest.raises(ValueError, match=r"unknown model 'NoSuchNet'; available models: .*BPR.*MGFormer"):
        get_model("NoSuchNet")
    assert {"MGFormer", "LightGCN", "SGL", "BPR"} <= set(available_models())


@pytest.mark.parametrize(
    ("typo", "suggested"),
    [("MGFormr", "MGFormer"), ("lightgnc", "LightGCN"), ("SimGLC", "SimGCL"), ("sasrec4", "SASRec")],
)
def test_a_misspelt_model_gets_the_close_names(typo, suggested):
    with pytest.raises(ValueError, match=r"did you mean [^?]*\b" + suggested + r"\b[^?]*\? available models: "):
        get_model(typo)


def test_a_name_like_no_model_gets_no_suggestion():
    with pytest.raises(ValueError) as raised:
        get_model("NoSuchNet")
    assert "did you mean" not in str(raised.value)


def test_every_trainer_writes_safe_checkpoints():
    from recbole.utils import ModelType

    for model_type, name in [
        (ModelType.GENERAL, "MGFormer"),
        (ModelType.GENERAL, "LightGCN"),
        (ModelType.TRADITIONAL, "Pop"),
        (ModelType.TRADITIONAL, "GFCF"),
    ]:
        assert issubclass(get_trainer(model_type, name), SafeCheckpointMixin)


def test_resolving_recbole_sequential_models_leaves_anomaly_detection_off():
    # A fresh process: RecBole's sine.py switches anomaly detection on when first imported.
    code = (
        "import torch; from recbole_mgformer.integration.registry import available_models, get_model; "
        "get_model('SASRec'); available_models(); print(torch.is_anomaly_enabled())"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "False"


def test_closed_form_models_fit_once_and_are_deterministic_unless_they_draw_random_numbers():
    from recbole_mgformer.integration.registry import fits_once, is_deterministic

    for name in ("EASE", "ItemKNN", "SLIMElastic", "Pop"):
        assert fits_once(name) and is_deterministic(name)
    for name in ("Random", "ADMMSLIM"):  # traditional, but their fit draws from the seeded streams
        assert fits_once(name) and not is_deterministic(name)
    for name in ("LightGCN", "MGFormer"):
        assert not fits_once(name) and not is_deterministic(name)

    class Filter(get_model("LightGCN")):  # a model may say it itself
        deterministic = True

    assert is_deterministic(Filter) and not fits_once(Filter)


def test_one_lookup_finds_every_project_model_under_the_one_list_of_model_types():
    import recbole_mgformer.model.general_recommender.mgformer as module
    from recbole_mgformer.integration.registry import MODEL_TYPES, model_class, model_modules

    found = {(model_type, cls.__name__) for model_type, _, _, cls in model_modules("recbole_mgformer.model")}
    assert {
        ("general_recommender", "MGFormer"),
        ("sequential_recommender", "EAGPS"),
        ("context_aware_recommender", "CSA"),
    } <= found
    assert {model_type for model_type, _ in found} <= set(MODEL_TYPES)
    assert model_class(module, "MGFORMER") is MGFormer and model_class(module, "attention") is None


@pytest.mark.parametrize("name", [None, 123, ["MGFormer"]])
def test_a_model_that_is_neither_a_name_nor_a_class_is_named_in_the_error(name):
    with pytest.raises(ValueError, match="is not a model name"):
        get_model(name)
