"""A/B of the in-place random features (``positive_random_features``) against the same formula written out of place,
inside MGFormer's attention at a given size, forward and backward, interleaved in one process.

    python benchmarks/feature_maps_inplace.py                     # Beauty's size: 34,464 nodes, w = m = 128
    python benchmarks/feature_maps_inplace.py --nodes 1000000 --device cuda

Prints and records (results/performance/runs/performance/feature-maps-*.json) the median seconds of each and their ratio,
and the largest relative difference of the attention outputs.
"""

import argparse
import math
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def out_of_place_features(x, projection, is_query):
    """Eq. (7) with a stabiliser, every step a new tensor: the implementation before 70d5961."""
    import torch

    logits = x @ projection.transpose(-2, -1) - 0.5 * x.pow(2).sum(-1, keepdim=True)
    stabiliser = logits.amax(dim=-1 if is_query else (-2, -1), keepdim=True)
    return torch.exp(logits - stabiliser.detach()) / math.sqrt(projection.shape[-2])


def compare(n_nodes, width, queries, repeats, device, seed=0):
    import torch

    from recbole_mgformer.model.attention import masked_kernel_attention
    from recbole_mgformer.model.feature_maps import draw_projection, positive_random_features

    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(1, n_nodes, width, generator=generator).to(device).requires_grad_()
    projection = draw_projection("simrf", width, width, generator)[None].to(device)
    z = torch.rand(n_nodes, generator=generator).to(device)
    scale = width ** -0.25

    def step(features):
        phi_k = features(x * scale, projection, is_query=False)
        phi_q = features(x[:, :queries] * scale, projection, is_query=True)
        out = masked_kernel_attention(phi_q, phi_k, x, z[:queries], z)
        out.pow(2).sum().backward()
        x.grad = None
        return out.detach()

    variants = {"in place": positive_random_features, "out of place": out_of_place_features}
    outputs = {name: step(fn) for name, fn in variants.items()}  # also the warm-up
    difference = ((outputs["in place"] - outputs["out of place"]).abs().max() / outputs["out of place"].abs().max()).item()
    seconds = {name: [] for name in variants}
    for _ in range(repeats):
        for name, fn in variants.items():
            if device == "cuda":
                torch.cuda.synchronize()
            started = time.perf_counter()
            step(fn)
            if device == "cuda":
                torch.cuda.synchronize()
            seconds[name].append(time.perf_counter() - started)
    medians = {name: statistics.median(values) for name, values in seconds.items()}
    return {"nodes": n_nodes, "width": width, "queries": queries, "repeats": repeats, "device": device,
            "median_seconds": medians, "ratio_in_place": medians["in place"] / medians["out of place"],
            "max_relative_difference": difference}


def main(argv=None):
    import torch

    from recbole_mgformer.records import git_commit, machine, package_versions, write_record

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=34464)
    parser.add_argument("--width", type=int, default=128)
    parser.add_argument("--queries", type=int, default=2048)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--results", default=str(ROOT / "results" / "performance"))
    args = parser.parse_args(argv)
    result = compare(args.nodes, args.width, args.queries, args.repeats, args.device)
    result.update(commit=git_commit(ROOT), machine=machine(), threads=torch.get_num_threads(),
                  versions=package_versions(), date=time.strftime("%Y-%m-%d"))
    write_record(Path(args.results) / "runs" / "performance" / f"feature-maps-{time.strftime('%Y%m%d-%H%M%S')}.json",
                 result)
    print(f"in place {result['median_seconds']['in place']:.4f} s, out of place "
          f"{result['median_seconds']['out of place']:.4f} s, ratio {result['ratio_in_place']:.2f}, "
          f"max relative difference {result['max_relative_difference']:.1e}")


if __name__ == "__main__":
    main()
