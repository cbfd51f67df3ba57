import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.inspect_attention import main, projection_sizes  # noqa: E402


def test_projection_sizes_name_each_layers_largest_query_and_key_entry():
    state = {"layers.0.query.weight": torch.tensor([[0.5, -2.0]]), "layers.0.key.weight": torch.tensor([[1e-34]]),
             "layers.1.attention.query.weight": torch.tensor([[3.0]]),  # a layer inside an AttentionBlock
             "layers.1.attention.key.weight": torch.tensor([[-4.0]]), "user_embedding.weight": torch.ones(2, 2)}
    sizes = projection_sizes(state)
    assert sizes == {"layers.0": {"query_max_abs": 2.0, "key_max_abs": torch.tensor(1e-34).item()},
                     "layers.1": {"query_max_abs": 3.0, "key_max_abs": 4.0}}
    assert projection_sizes({"user_embedding.weight": torch.ones(2, 2)}) == {}


def test_main_reads_checkpoints_the_benchmark_writes(tiny_setup, tmp_path, capsys):
    rows = []
    for attention in (True, False):
        _, _, trainer, _ = tiny_setup(attention=attention, compile=False)
        trainer.saved_model_file = str(tmp_path / f"attention-{attention}.pth")
        with torch.no_grad():
            trainer.model.layers[0].key.weight.mul_(1e-30)
        trainer._save_checkpoint(3, verbose=False)
        rows.append(trainer.saved_model_file)
    lines = main(rows)
    assert lines[2].startswith("| attention-True.pth | 3 | layers.0 | ")
    query, key = float(lines[2].split("|")[4]), float(lines[2].split("|")[5])
    assert query > 1e-3 and 0 < key < 1e-29
    assert lines[3] == "| attention-False.pth | 3 | no attention | | |"
