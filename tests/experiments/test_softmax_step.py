"""experiments/softmax_step.py: times a step of MGFormer's softmax loss in each form (written out, blocked, blocked
over batches of whole users), with and without the residual, at both matmul formats, and writes its table."""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import experiments.softmax_step as softmax_step  # noqa: E402
from recbole_mgformer.model.general_recommender import mgformer as mgformer_module  # noqa: E402


def test_the_table_times_each_form_and_format_with_and_without_the_residual(tiny_data, tmp_path):
    blocked = mgformer_module.softmax_cross_entropy
    options = ["--dataset", "tiny", "--data-path", str(tiny_data), "--batch-size", "64", "--embedding-size", "8"]
    softmax_step.main([*options, "--filter-k", "8", "--repeats", "1", "--steps", "2", "--results", str(tmp_path)])
    page = (tmp_path / "softmax_step-tiny.md").read_text()
    assert page.count("| softmax | ") == 6 and page.count("| softmax + GF-CF residual in training (weight 1) | ") == 6
    assert page.count("| written out | fp32 |") == 2 and page.count("| blocked | bf16 |") == 2
    assert page.count("| blocked, whole users | bf16 |") == 2 and "users a timed step on average" in page
    record = json.loads((tmp_path / "softmax_step-tiny.json").read_text())
    assert len(record["settings"]) == 12 and all(seconds > 0 for seconds in record["settings"].values())
    assert mgformer_module.softmax_cross_entropy is blocked  # the model's form is put back


def test_the_written_out_form_is_the_models_loss():
    import torch

    generator = torch.Generator().manual_seed(0)
    users, items = torch.randn(5, 4, generator=generator), torch.randn(9, 4, generator=generator)
    residual, targets = torch.randn(5, 9, generator=generator).half(), torch.tensor([1, 8, 3, 3, 2])
    pair_rows = torch.tensor([4, 0, 0, 2, 4, 1, 4])
    for residual_rows, weight in ((None, 0.0), (residual, 0.7)):
        torch.testing.assert_close(
            softmax_step.written_out_cross_entropy(users, items, targets, 0.2, residual_rows, weight),
            mgformer_module.softmax_cross_entropy(users, items, targets, 0.2, residual_rows, weight),
        )
        pair_targets = torch.tensor([1, 8, 3, 3, 2, 5, 8])
        torch.testing.assert_close(
            softmax_step.written_out_cross_entropy(
                users, items, pair_targets, 0.2, residual_rows, weight, rows=pair_rows
            ),
            mgformer_module.softmax_cross_entropy(
                users, items, pair_targets, 0.2, residual_rows, weight, rows=pair_rows
            ),
        )
