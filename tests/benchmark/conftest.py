"""Datasets with a config of their own for the benchmark tests: a copy of properties/ with extra dataset YAMLs."""

import shutil

import pytest

import recbole_mgformer.defaults as defaults


@pytest.fixture
def dataset_configs(tmp_path, monkeypatch):
    """``add(name, text)`` writes ``properties/dataset/<name>.yaml`` into a copy of properties/ the code then reads."""
    properties = tmp_path / "properties"
    shutil.copytree(defaults.properties_dir(), properties)
    monkeypatch.setattr(defaults, "properties_dir", lambda: properties)

    def add(name, text):
        (properties / "dataset" / f"{name}.yaml").write_text(text)

    return add
