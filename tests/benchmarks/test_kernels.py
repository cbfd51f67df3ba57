import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.kernels import main, module_at  # noqa: E402


def test_a_baseline_module_is_read_from_git():
    baseline = module_at("HEAD", "recbole_mgformer/model/loss.py", "head_loss")
    assert baseline.__name__ == "head_loss" and callable(baseline.uniformity_loss)


def test_main_times_both_kernels_against_the_baseline(tmp_path):
    times = main(["--baseline", "HEAD", "--nodes", "300", "--embedding_size", "4", "--batch_size", "64",
                  "--chunk_size", "100", "--repeats", "1", "--results", str(tmp_path)])
    assert len(times) == 6 and all(len(t) == 1 and t[0] > 0 for t in times.values())
    table = (tmp_path / "kernels.md").read_text()
    assert "| key side, this checkout, keep |" in table and "| uniformity loss, HEAD |" in table
