import importlib.util
import subprocess
import sys
from pathlib import Path

import yaml

import recbole_mgformer.model.mgformer.option_names as option_names
from recbole_mgformer.config.defaults import model_config_file


def test_the_attention_options_are_options_of_mgformer():
    with open(model_config_file("MGFormer")) as file:
        assert option_names.ATTENTION_OPTIONS <= set(yaml.safe_load(file))


def test_the_names_load_without_torch():
    """A table renders from the names alone: the module must not pull in torch (nor the model, which needs it)."""
    spec = importlib.util.find_spec("recbole_mgformer.model.mgformer.option_names")
    script = (
        f"import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('option_names', {str(Path(spec.origin))!r})\n"
        f"spec.loader.exec_module(importlib.util.module_from_spec(spec))\n"
        f"print(sorted(name for name in sys.modules if name.split('.')[0] in ('torch', 'recbole')))"
    )
    shown = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert shown.stdout.strip() == "[]"
