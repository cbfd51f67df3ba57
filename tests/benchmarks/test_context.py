import argparse
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.context import _model_entries, render  # noqa: E402


def record(model, rho, auc, seed=2020):
    return {"model": model, "rho": rho, "seed": seed, "overrides": {}, "test": {"auc": auc, "logloss": 0.6},
            "seconds": 60, "command": "python benchmarks/context.py", "commit": "abc", "machine": "m",
            "versions": {"torch": "t", "recbole": "r"}}


def test_models_and_their_variants_are_read_and_checked():
    parser = argparse.ArgumentParser()
    assert _model_entries("CSA[first_order=True; n_heads=1],AutoInt", parser) == [
        "CSA[first_order=True; n_heads=1]", "AutoInt"]
    with pytest.raises(SystemExit):
        _model_entries("CSB", parser)


def test_a_variant_is_its_own_row_and_the_best_mean_is_bold():
    records = [record("CSA", 0.8, 0.77), record("CSA first_order=True", 0.8, 0.78),
               record("AutoInt", 0.8, 0.775), record("AutoInt", 0.8, 0.777, seed=2021)]
    table = render(records, Path("results/runs/context"))
    assert "| CSA | 0.7700 |" in table
    assert "| CSA first_order=True | **0.7800** |" in table
    assert "| AutoInt | 0.7760 ± 0.0014 |" in table


def test_the_hand_written_reading_follows_the_tables(tmp_path):
    notes = tmp_path / "context.md"
    notes.write_text("CSA is below AutoInt here.")
    table = render([], Path("results/runs/context"), notes)
    assert table.rstrip().endswith("CSA is below AutoInt here.")
