"""How large the query and key projections of MGFormer checkpoints grew: where both are near zero, every node's
attention weights are equal, and the layer is a plain mean over what its mask lets the node see.

    python benchmarks/inspect_attention.py saved/benchmark/amazon-beauty/mgformer-degree-mask-adjacency-seed*.pth

Reads the weights alone (no dataset): for each checkpoint its epoch and, per attention layer, the largest entry of
|W_Q| and |W_K| (the query and key projections of the paper's Eq. 7).
"""

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PROJECTION = re.compile(r"(?P<layer>(?:.*\.)?layers\.\d+)\.(?:attention\.)?(?P<name>query|key)\.weight")


def projection_sizes(state_dict):
    """``{layer: {"query_max_abs": float, "key_max_abs": float}}`` of an MGFormer state dict; {} for other models."""
    sizes = {}
    for key, weight in state_dict.items():
        match = PROJECTION.fullmatch(key)
        if match:
            sizes.setdefault(match["layer"], {})[f"{match['name']}_max_abs"] = weight.abs().max().item()
    return sizes


def main(argv=None):
    from recbole_mgformer.trainer import load_checkpoint

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoints", nargs="+", help="checkpoints written by this project (.pth)")
    args = parser.parse_args(argv)
    lines = ["| checkpoint | epoch | layer | max abs W_Q | max abs W_K |", "|---|---|---|---|---|"]
    for path in args.checkpoints:
        checkpoint = load_checkpoint(path)
        sizes = projection_sizes(checkpoint["state_dict"])
        if not sizes or checkpoint["config"].get("attention") is False:  # attention: False keeps unused layers
            lines.append(f"| {Path(path).name} | {checkpoint['epoch']} | no attention | | |")
            continue
        for layer, size in sizes.items():
            lines.append(f"| {Path(path).name} | {checkpoint['epoch']} | {layer} | {size['query_max_abs']:.2g} | "
                         f"{size['key_max_abs']:.2g} |")
    print("\n".join(lines))
    return lines


if __name__ == "__main__":
    main()
