"""Exact against randomized truncated SVD for MGFormer's structural encodings (Eq. 3): time and error.

    python experiments/svd.py                                   # Beauty's training matrix + 10^4 .. 10^6 node graphs
    python experiments/svd.py --nodes 10000,100000 --no-beauty

For each matrix it computes the rank-``d`` SVD with ARPACK (exact to solver tolerance) and with the randomized
solver (``svd_solver: randomized``), each in a fresh process, and reports their times and the randomized one's error:
the largest relative error of a singular value, how much of the exact leading subspace it spans
(``||U_exact^T U||_F^2 / d``, 1 = all of it) and its reconstruction error ``||A - U S V^T||_F`` relative to the
optimal ``||A - A_d||_F``. Writes results/svd.md and results/runs/performance/svd-*.json.
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from experiments.isolated import measure_in_subprocess  # noqa: E402
from experiments.scaling import power_law_graph  # noqa: E402

BEAUTY_TRAIN_SHARE = 0.8  # the paper's protocol trains on 80% of each user's interactions


def synthetic_matrix(n_nodes, seed=0):
    n_users, n_items, users, items = power_law_graph(n_nodes, 5, 1.0, seed)
    return sp.csr_matrix((np.ones(len(users)), (users, items)), shape=(n_users, n_items))


def beauty_matrix(data_path, seed=0):
    """Beauty's interactions, 80% of each user's kept at random, as in the RS 8:1:1 protocol."""
    from recbole_mgformer.data.sources import ensure_dataset

    inter_file = ensure_dataset("amazon-beauty", data_path)
    table = np.loadtxt(inter_file, dtype=str, skiprows=1, usecols=(0, 1))
    _, users = np.unique(table[:, 0], return_inverse=True)
    _, items = np.unique(table[:, 1], return_inverse=True)
    keep = np.random.default_rng(seed).random(len(users)) < BEAUTY_TRAIN_SHARE
    return sp.csr_matrix((np.ones(keep.sum()), (users[keep], items[keep])))


def load_matrix(source, data_path):
    return beauty_matrix(data_path) if source == "amazon-beauty" else synthetic_matrix(int(source))


def solve(source, rank, solver, data_path, out_path):
    """Time one solver on one matrix in this process; the factors go to ``out_path`` for the error."""
    from recbole_mgformer.model.mgformer.structural import truncated_svd

    matrix = load_matrix(source, data_path)
    started = time.perf_counter()
    u, s, vt = truncated_svd(matrix, rank, seed=0, solver=solver)
    seconds = time.perf_counter() - started
    np.savez(out_path, u=u, s=s, vt=vt)
    return {"seconds": seconds, "shape": list(matrix.shape), "nnz": int(matrix.nnz)}


def errors(matrix, exact, approximate):
    """Relative singular value error, captured subspace and reconstruction error ratio of ``approximate``."""
    u, s, vt = approximate["u"], approximate["s"], approximate["vt"]
    frobenius_squared = float(matrix.multiply(matrix).sum())
    optimal = np.sqrt(max(frobenius_squared - float((exact["s"] ** 2).sum()), 0.0))
    # ||A - U S V^T||^2 = ||A||^2 - 2 tr(S U^T A V) + ||S||^2 for orthonormal U and V.
    cross = np.einsum("ij,ji->i", u.T @ matrix, vt.T)
    achieved = np.sqrt(max(frobenius_squared - 2 * float(s @ cross) + float(s @ s), 0.0))
    return {
        "max_singular_value_error": float(np.max(np.abs(s - exact["s"]) / exact["s"])),
        "subspace_captured": float(np.linalg.norm(exact["u"].T @ u) ** 2 / len(s)),
        "reconstruction_error_ratio": achieved / optimal if optimal > 0 else 1.0,
    }


def render(rows, rank, provenance):
    lines = [
        "# Truncated SVD for the structural encodings",
        "",
        f"Produced by `python experiments/svd.py`. Rank {rank} (MGFormer's d). ARPACK is "
        "`scipy.sparse.linalg.svds`; "
        "randomized is `recbole_mgformer.model.mgformer.structural.randomized_svd` (16 extra columns, "
        "4 power iterations). "
        "Synthetic graphs: power-law bipartite, 5 edges per node (`experiments/scaling.py`). "
        "Amazon-beauty: 80% of each user's interactions. Single-run wall times, each solver in a fresh "
        "process.",
        "",
        "| matrix | users x items | nnz | ARPACK s | randomized s | speed-up | max singular value error | "
        "subspace captured | reconstruction error / optimal |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row['source']} | {row['shape'][0]:,} x {row['shape'][1]:,} | {row['nnz']:,} | "
            f"{row['arpack_seconds']:.2f} | "
            f"{row['randomized_seconds']:.2f} | {row['arpack_seconds'] / row['randomized_seconds']:.1f}x | "
            f"{row['max_singular_value_error']:.2e} | {row['subspace_captured']:.4f} | "
            f"{row['reconstruction_error_ratio']:.6f} |"
        )
    lines += ["", provenance, ""]
    return "\n".join(lines)


def main(argv=None):
    import tempfile

    from recbole_mgformer.records import git_commit, machine, package_versions, write_record

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", default="10000,100000,1000000")
    parser.add_argument("--rank", type=int, default=64)
    parser.add_argument("--no-beauty", dest="beauty", action="store_false")
    parser.add_argument("--data_path", default=str(ROOT / "dataset"))
    parser.add_argument("--results", default=str(ROOT / "results" / "performance"))
    args = parser.parse_args(argv)
    sources = (["amazon-beauty"] if args.beauty else []) + args.nodes.split(",")
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        for source in sources:
            factors, row = {}, {"source": source if source == "amazon-beauty" else f"{int(source):,} nodes"}
            for solver in ("arpack", "randomized"):
                path = str(Path(scratch) / f"{solver}.npz")
                timing = measure_in_subprocess("svd", "solve", source, args.rank, solver, args.data_path, path)
                row.update(shape=timing["shape"], nnz=timing["nnz"], **{f"{solver}_seconds": timing["seconds"]})
                factors[solver] = dict(np.load(path))
            row.update(errors(load_matrix(source, args.data_path), factors["arpack"], factors["randomized"]))
            rows.append(row)
            print(
                f"{row['source']}: ARPACK {row['arpack_seconds']:.2f} s, randomized "
                f"{row['randomized_seconds']:.2f} s, "
                f"subspace {row['subspace_captured']:.4f}, reconstruction x{row['reconstruction_error_ratio']:.6f}",
                flush=True,
            )
    provenance = f"Commit {git_commit(ROOT)}, {machine()}, numpy {np.__version__}, {time.strftime('%Y-%m-%d')}."
    results = Path(args.results)
    write_record(
        results / "runs" / "performance" / f"svd-{time.strftime('%Y%m%d-%H%M%S')}.json",
        {"rows": rows, "rank": args.rank, "provenance": provenance, "versions": package_versions()},
    )
    (results / "svd.md").write_text(render(rows, args.rank, provenance))
    print(f"wrote {results / 'svd.md'}")


if __name__ == "__main__":
    main()
