"""How MGFormer's cost grows with the graph: synthetic bipartite graphs with power-law degrees, from 10^4 nodes up.

    python experiments/scaling.py                                  # 10^4 .. 10^6 nodes on CPU
    python experiments/scaling.py --nodes 10000,100000,1000000,10000000 --device cuda

For each size it times one training step of the MGFormer layer and loss (batch of ``--batch`` interactions, keys over
all nodes) and one full evaluation pass (every node's output), measures peak memory, and fits the log-log slope of
each against the number of nodes. Exact softmax attention with the same degree mask runs beside it while its n x n
matrix fits in ``--exact_limit_gib``. Writes results/runs/performance/scaling-*.json and results/scaling.md with a PNG.
"""

import argparse
import math
import resource
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from experiments.isolated import measure_in_subprocess  # noqa: E402


def power_law_graph(n_nodes, edges_per_node, exponent, seed):
    """A user-item graph: half the nodes are users; endpoints drawn with Zipf-like weights ``rank^-exponent``."""
    rng = np.random.default_rng(seed)
    n_users, n_items = n_nodes // 2, n_nodes - n_nodes // 2
    n_edges = int(n_nodes * edges_per_node)

    def draw(n):
        weights = np.arange(1, n + 1, dtype=np.float64) ** -exponent
        return rng.choice(n, size=n_edges, p=weights / weights.sum())

    return n_users, n_items, draw(n_users), draw(n_items)


def step_flops(n_nodes, batch, width):
    """Matmul FLOPs of one training step of :func:`measure` (forward and backward), m = v = width.

    Per node on the key side, and per query node (2 * batch of them): W_K or W_Q (3 w^2 MACs with the
    backward), random-feature logits (2 w m; the projection is fixed), the masked key sums or their readout
    (6 m (v + 1): two branches of m features, forward plus two backward products); then the loss's two
    batch x batch Gram matrices (2 b^2 w each: the Gram matmul and, in backward, the kernel times x).
    Checked against ``torch.utils.flop_counter`` in the tests.
    """
    m = v = width
    per_node = 3 * width * width + 2 * width * m + 6 * m * (v + 1)
    return 2 * ((n_nodes + 2 * batch) * per_node + 2 * 2 * batch * batch * width)


def matmul_throughput(device, size=2048, repeats=5):
    """The machine's dense fp32 matmul rate in FLOP/s, best of ``repeats``: the roof of the roofline."""
    import torch

    a, b = torch.randn(size, size, device=device), torch.randn(size, size, device=device)
    best = float("inf")
    for _ in range(repeats + 1):
        if device == "cuda":
            torch.cuda.synchronize()
        started = time.perf_counter()
        a @ b
        if device == "cuda":
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - started)
    return 2 * size**3 / best


def measure(n_nodes, batch, dim, exact_limit_gib, device, seed=0, repeats=3):
    """Step and evaluation time, and peak memory, of MGFormer's attention + loss on a synthetic graph."""
    import torch

    from recbole_mgformer.model.loss import directau_loss
    from recbole_mgformer.model.mgformer.attention import masked_kernel_attention
    from recbole_mgformer.model.mgformer.feature_maps import apply_feature_map, draw_projection

    torch.manual_seed(seed)
    n_users, _, users, items = power_law_graph(n_nodes, 5, 1.0, seed)
    degrees = np.bincount(users, minlength=n_users).tolist() + np.bincount(items, minlength=n_nodes - n_users).tolist()
    width = 2 * dim  # tokens [E, P]
    x = torch.randn(n_nodes, width, device=device, requires_grad=True)
    w_q = torch.randn(width, width, device=device, requires_grad=True)
    w_k = torch.randn(width, width, device=device, requires_grad=True)
    z = torch.sigmoid(torch.log1p(torch.tensor(degrees, dtype=torch.float32, device=device)) - 2)
    projection = draw_projection("simrf", width, width, torch.Generator().manual_seed(seed)).to(device)[None]
    user_batch = torch.as_tensor(users[:batch], device=device)
    item_batch = torch.as_tensor(items[:batch], device=device) + n_users
    query_nodes = torch.cat([user_batch, item_batch])

    def forward(query_index):
        queries = (x if query_index is None else x[query_index]) @ w_q
        phi_q = apply_feature_map("simrf", queries[None], projection, is_query=True)
        phi_k = apply_feature_map("simrf", (x @ w_k)[None], projection, is_query=False)
        query_z = z if query_index is None else z[query_index]
        return masked_kernel_attention(phi_q, phi_k, x[None], query_z, z)[0]

    def sync():
        if device == "cuda":
            torch.cuda.synchronize()

    def step():
        out = forward(query_nodes)
        loss = directau_loss(*out.split(len(user_batch)), 0.3)
        loss.backward()
        x.grad = w_q.grad = w_k.grad = None

    def evaluate():
        with torch.no_grad():
            forward(None)

    def peak_bytes():
        return (
            torch.cuda.max_memory_allocated()
            if device == "cuda"
            else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        )

    setup_bytes = peak_bytes()  # interpreter, torch, the graph and the n x 2d tokens
    results = {}
    for name, fn in (("step", step), ("evaluation", evaluate)):
        fn()  # warm-up
        times = []
        for _ in range(repeats):
            sync()
            started = time.perf_counter()
            fn()
            sync()
            times.append(time.perf_counter() - started)
        results[f"{name}_seconds"] = statistics.median(times)

    results["peak_memory_bytes"] = int(peak_bytes())
    results["working_memory_bytes"] = int(peak_bytes() - setup_bytes)  # what the step and evaluation add
    exact_bytes = 4 * n_nodes * n_nodes * 3  # scores, mask, weights
    if exact_bytes <= exact_limit_gib * 2**30:

        def exact():
            with torch.no_grad():
                q, k = x @ w_q, x @ w_k
                mask = torch.sin(math.pi / 4 * (z[:, None] + z[None, :]))
                weights = torch.softmax(q @ k.T / math.sqrt(width), dim=-1) * mask
                (weights / weights.sum(-1, keepdim=True)) @ x

        exact()
        sync()
        started = time.perf_counter()
        exact()
        sync()
        results["exact_evaluation_seconds"] = time.perf_counter() - started
    results["step_flops"] = step_flops(n_nodes, batch, width)
    return {"nodes": n_nodes, "edges": len(users), "batch": batch, "dim": dim, "device": device, **results}


def slope(records, key):
    """Least-squares slope of log(key) against log(nodes)."""
    points = [(math.log(r["nodes"]), math.log(r[key])) for r in records if r.get(key)]
    if len(points) < 2:
        return None
    mean_x = statistics.mean(p[0] for p in points)
    mean_y = statistics.mean(p[1] for p in points)
    return sum((px - mean_x) * (py - mean_y) for px, py in points) / sum((px - mean_x) ** 2 for px, _ in points)


def render(records, provenance, chart_name, peak_flops=None):
    lines = [
        "# Scaling with the number of nodes",
        "",
        "Produced by `python experiments/scaling.py`: one MGFormer attention layer plus the DirectAU loss on "
        "synthetic power-law bipartite graphs (5 edges per node), token width 128, one head, m = 128 SimRF "
        "features. Step: a training batch (queries for the batch only, keys over all nodes), forward and "
        "backward. Evaluation: every node's output. Exact: softmax attention with the explicit n x n sin mask.",
        "",
        "| nodes | step s | step GFLOP/s | of matmul peak | evaluation s | exact evaluation s | "
        "peak memory MiB | working memory MiB |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in records:
        exact = f"{r['exact_evaluation_seconds']:.3f}" if "exact_evaluation_seconds" in r else "does not fit"
        achieved = r["step_flops"] / r["step_seconds"]
        share = f"{achieved / peak_flops:.0%}" if peak_flops else "-"
        lines.append(
            f"| {r['nodes']:,} | {r['step_seconds']:.3f} | {achieved / 1e9:.1f} | {share} | "
            f"{r['evaluation_seconds']:.3f} | {exact} | "
            f"{r['peak_memory_bytes'] / 2**20:.0f} | {r['working_memory_bytes'] / 2**20:.0f} |"
        )
    fits = {
        key: slope(records, key)
        for key in ("step_seconds", "evaluation_seconds", "working_memory_bytes", "exact_evaluation_seconds")
    }
    lines += [
        "",
        "Log-log slopes against nodes (1 = linear): "
        + ", ".join(f"{key.replace('_', ' ')} {value:.2f}" for key, value in fits.items() if value is not None)
        + ".",
        "Peak memory is the process's maximum RSS on CPU (interpreter and torch included), "
        "`torch.cuda.max_memory_allocated` on a GPU, before the exact attention runs; working memory is what the "
        "step and the evaluation add to the setup (graph and tokens).",
        "Roofline: a step's matmul FLOPs (`step_flops`, equal to `torch.utils.flop_counter`'s count) over its time, "
        "against the machine's dense fp32 matmul rate"
        + (f" of {peak_flops / 1e9:.1f} GFLOP/s (2048 x 2048, best of 5, same threads)." if peak_flops else "."),
        "",
        f"![scaling]({chart_name})",
        "",
        provenance,
        "",
    ]
    return "\n".join(lines), fits


def chart(records, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    nodes = [r["nodes"] for r in records]
    figure, (time_axis, memory_axis) = plt.subplots(1, 2, figsize=(10, 4))
    for key, label in (
        ("step_seconds", "training step"),
        ("evaluation_seconds", "evaluation pass"),
        ("exact_evaluation_seconds", "exact softmax evaluation"),
    ):
        points = [(r["nodes"], r[key]) for r in records if key in r]
        if points:
            time_axis.loglog(*zip(*points), marker="o", label=label)
    time_axis.set_xlabel("nodes")
    time_axis.set_ylabel("seconds")
    time_axis.legend()
    memory_axis.loglog(nodes, [r["peak_memory_bytes"] / 2**20 for r in records], marker="o", label="peak")
    memory_axis.loglog(nodes, [max(r["working_memory_bytes"], 1) / 2**20 for r in records], marker="o", label="working")
    memory_axis.set_xlabel("nodes")
    memory_axis.set_ylabel("memory (MiB)")
    memory_axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def main(argv=None):
    from recbole_mgformer.records import git_commit, machine, package_versions, write_record

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", default="10000,31623,100000,316228,1000000")
    parser.add_argument("--batch", type=int, default=2048)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--exact_limit_gib", type=float, default=4.0)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--results", default=str(ROOT / "results" / "performance"))
    args = parser.parse_args(argv)
    peak_flops = measure_in_subprocess("scaling", "matmul_throughput", args.device)
    print(f"dense matmul: {peak_flops / 1e9:.1f} GFLOP/s", flush=True)
    records = []
    for n_nodes in [int(n) for n in args.nodes.split(",")]:
        record = measure_in_subprocess(
            "scaling", "measure", n_nodes, args.batch, args.dim, args.exact_limit_gib, args.device
        )
        records.append(record)
        print(
            f"{n_nodes:>10,} nodes: step {record['step_seconds']:.3f} s, evaluation "
            f"{record['evaluation_seconds']:.3f} s, "
            f"peak {record['peak_memory_bytes'] / 2**20:.0f} MiB",
            flush=True,
        )
    provenance = (
        f"Commit {git_commit(ROOT)}, {machine()}, torch {package_versions()['torch']}, "
        f"device {args.device}, {time.strftime('%Y-%m-%d')}."
    )
    results = Path(args.results)
    suffix = "gpu" if args.device == "cuda" else "cpu"
    chart_path = results / f"scaling-{suffix}.png"
    text, fits = render(records, provenance, chart_path.name, peak_flops)
    chart(records, chart_path)
    write_record(
        results / "runs" / "performance" / f"scaling-{suffix}-{time.strftime('%Y%m%d-%H%M%S')}.json",
        {
            "records": records,
            "slopes": fits,
            "matmul_flops_per_second": peak_flops,
            "provenance": provenance,
            "versions": package_versions(),
        },
    )
    (results / f"scaling-{suffix}.md").write_text(text)
    print(f"wrote {results / f'scaling-{suffix}.md'}")


if __name__ == "__main__":
    main()
