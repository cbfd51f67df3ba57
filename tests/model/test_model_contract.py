"""The contract between a model and the runner: every optional hook declared once, with its default, on
ModelContract; RecBole's own models read as the defaults."""

import ast
from pathlib import Path

from recbole.model.general_recommender.bpr import BPR

from recbole_mgformer.model.abstract_recommender import ModelContract, model_contract
from recbole_mgformer.model.general_recommender.lightgcn import LightGCN
from recbole_mgformer.model.general_recommender.mgformer import MGFormer
from recbole_mgformer.model.general_recommender.sgl import SGL
from recbole_mgformer.model.general_recommender.simgcl import SimGCL

PACKAGE = Path(__file__).resolve().parents[2] / "recbole_mgformer"
HOOKS = [name for name in vars(ModelContract) if not name.startswith("_")]


def test_recboles_own_models_read_as_the_defaults():
    hooks = model_contract(BPR)
    assert hooks is model_contract(BPR.__new__(BPR))
    assert not hooks.CUDA_GRAPH_SAFE and not hooks.REFINES_RECBOLE and hooks.before_step is None
    assert hooks.SCORING_OPTIONS == frozenset() and hooks.deterministic is None and hooks.matmul_dtype is None
    assert hooks.cuda_graph_blocker() is None and list(hooks.cuda_graph_generators()) == []


def test_the_projects_models_declare_their_own_hooks():
    assert model_contract(MGFormer) is MGFormer and MGFormer.CUDA_GRAPH_SAFE and MGFormer.SCORING_OPTIONS
    assert model_contract(LightGCN).REFINES_RECBOLE
    assert model_contract(SGL).CUDA_GRAPH_SAFE and model_contract(SimGCL).CUDA_GRAPH_SAFE


def test_every_hook_has_a_docstring_or_is_a_documented_method():
    source = ast.parse((PACKAGE / "model" / "abstract_recommender.py").read_text())
    (contract,) = [node for node in source.body if isinstance(node, ast.ClassDef) and node.name == "ModelContract"]
    documented = set()
    for before, after in zip(contract.body, contract.body[1:]):
        if isinstance(before, ast.Assign) and isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant):
            documented |= {target.id for target in before.targets}
    documented |= {node.name for node in contract.body if isinstance(node, ast.FunctionDef) and ast.get_docstring(node)}
    assert set(HOOKS) <= documented


def test_the_runner_reads_no_hook_with_a_getattr_default():
    """Outside the models, a hook is read through model_contract, never ``getattr(model, "<hook>", default)``."""
    found = []
    for path in PACKAGE.rglob("*.py"):
        if path.parts[-2] == "model" or "model" in path.relative_to(PACKAGE).parts[:1]:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and getattr(node.func, "id", None) in ("getattr", "hasattr")
                and len(node.args) >= 2
                and isinstance(node.args[1], ast.Constant)
                and node.args[1].value in HOOKS
            ):
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {node.args[1].value}")
    assert not found
