import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from experiments.svd import errors, main, synthetic_matrix  # noqa: E402
from recbole_mgformer.model.mgformer.structural import truncated_svd  # noqa: E402


def factors(matrix, rank, solver):
    u, s, vt = truncated_svd(matrix, rank, seed=0, solver=solver)
    return {"u": u, "s": s, "vt": vt}


def test_errors_are_exact_for_the_exact_solution_and_grow_for_a_worse_one():
    matrix = synthetic_matrix(1500)
    exact = factors(matrix, 8, "arpack")
    same = errors(matrix, exact, exact)
    assert same["max_singular_value_error"] < 1e-9
    assert same["subspace_captured"] == pytest.approx(1.0)
    assert same["reconstruction_error_ratio"] == pytest.approx(1.0, abs=1e-6)
    # Dropping the leading triplet leaves a subspace and reconstruction that are measurably worse.
    worse = {"u": exact["u"][:, 1:], "s": exact["s"][1:], "vt": exact["vt"][1:]}
    truncated = errors(matrix, factors(matrix, 7, "arpack"), worse)
    assert truncated["subspace_captured"] < 0.99 and truncated["reconstruction_error_ratio"] > 1.0


def test_main_writes_the_table_and_a_record(tmp_path):
    main(["--nodes", "1500", "--rank", "8", "--no-beauty", "--results", str(tmp_path)])
    table = (tmp_path / "svd.md").read_text()
    assert "| 1,500 nodes |" in table and "Commit" in table
    assert len(list((tmp_path / "runs" / "performance").glob("svd-*.json"))) == 1


def test_beauty_matrix_reads_the_imported_atomic_file(tmp_path):
    from experiments.svd import beauty_matrix

    folder = tmp_path / "amazon-beauty"
    folder.mkdir()
    pairs = [(f"u{u}", f"i{(u * 7 + k) % 13}") for u in range(40) for k in range(5)]
    (folder / "amazon-beauty.inter").write_text(
        "user_id:token\titem_id:token\n" + "".join(f"{u}\t{i}\n" for u, i in pairs)
    )
    matrix = beauty_matrix(tmp_path)
    assert matrix.shape == (40, 13)
    assert 0.7 * len(pairs) < matrix.nnz < 0.9 * len(pairs)  # about 80% of the interactions kept
