"""What a trained MGFormer's outputs are made of: the sizes of its token parts and of the attention branch.

    python benchmarks/token_parts.py --dataset amazon-beauty \
        --checkpoint saved/benchmark/amazon-beauty/mgformer-seed0.pth

For each node the output is ``h = [e, p] + Attn([e, p])``; the script reports the mean L2 norm of the learned
embedding ``e``, the fixed SVD encoding ``p`` and the attention branch, the mean cosine of each node's attention
output to the average one (1 = the same vector for every node), the degree centralities ``z`` of Eq. (10), the
Frobenius norms of each layer's ``W_Q`` and ``W_K`` (their growth sharpens the kernel), where the sin mask sends a
typical query's attention (:func:`mask_focus`), and which share of a user-item dot product comes from each part on
the test pairs. Appends a section to results/<dataset>/analysis-<dataset>.md.
"""

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def token_parts(model):
    """Statistics of a trained MGFormer's tokens and attention branch, over all nodes."""
    import torch
    import torch.nn.functional as F

    with torch.no_grad():
        tokens, outputs = model.node_tokens(), model()
        attention = outputs - tokens
        d = model.embedding_size
        stats = {
            "embedding_norm": tokens[:, :d].norm(dim=1).mean().item(),
            "encoding_norm": tokens[:, d:].norm(dim=1).mean().item() if tokens.shape[1] > d else 0.0,
            "attention_norm": attention.norm(dim=1).mean().item(),
            "attention_cosine_to_mean": F.cosine_similarity(attention, attention.mean(0, keepdim=True)).mean().item(),
        }
        if model.degree_mask == "sin":
            z = model.degree_centrality()
            stats.update(z_min=z.min().item(), z_median=z.median().item(), z_max=z.max().item())
            stats.update(mask_focus(z, model.degree_bucket))
        # W_Q and W_K set how sharp the kernel is: their growth is the attention's logit growth
        for depth, layer in enumerate(model.layers if model.use_attention else []):
            attention = getattr(layer, "attention", layer)  # inside an AttentionBlock, or the layer itself
            stats[f"layer{depth}_query_weight_norm"] = attention.query.weight.norm().item()
            stats[f"layer{depth}_key_weight_norm"] = attention.key.weight.norm().item()
    return stats


def mask_focus(z, degree_bucket):
    """Where the sin mask of Eq. (10) sends a typical query: the share of the median-z query's mask weights
    ``M_ij`` on the quarter of keys with the largest ``z`` (0.25 when z is flat), and the median degree bucket (the
    training degree, below ``max_exact_degree``) of those keys and of all nodes. z (n,), degree_bucket (n,)."""
    from recbole_mgformer.model.mgformer.attention import degree_mask_gates

    # the model's own split of M_ij = sin(a_i + a_j) (Eq. 11), for the median query against every key
    (sin_query, cos_query), (sin_keys, cos_keys) = degree_mask_gates(z.median().reshape(1)), degree_mask_gates(z)
    mask = (sin_query * cos_keys + cos_query * sin_keys).squeeze(-1)
    top = z.argsort(descending=True)[: len(z) // 4]
    return {"mask_share_on_top_quarter_z_keys": (mask[top].sum() / mask.sum()).item(),
            "top_quarter_z_keys_median_degree": degree_bucket[top].float().median().item(),
            "all_nodes_median_degree": degree_bucket.float().median().item()}


def score_shares(model, users, items):
    """Mean |contribution| of embeddings, encodings and attention to the dot products of (user, item) pairs."""
    import torch

    with torch.no_grad():
        tokens, outputs = model.node_tokens(), model()
        d, items = model.embedding_size, items + model.n_users
        parts = {
            "embeddings e_u . e_i": (tokens[users, :d] * tokens[items, :d]).sum(1),
            "encodings p_u . p_i": (tokens[users, d:] * tokens[items, d:]).sum(1),
            "attention terms": (outputs[users] * outputs[items]).sum(1) - (tokens[users] * tokens[items]).sum(1),
        }
        total = sum(part.abs().mean().item() for part in parts.values())
        return {name: part.abs().mean().item() / total for name, part in parts.items()}


def main(argv=None):
    import torch
    import yaml

    from recbole_mgformer.defaults import model_config_file
    from recbole_mgformer.quick_start import build_config, prepare
    from recbole_mgformer.records import git_commit, machine

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="amazon-beauty")
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--data_path", default=str(ROOT / "dataset"))
    parser.add_argument("--results", default=str(ROOT / "results"))
    args = parser.parse_args(argv)
    checkpoint = torch.load(args.checkpoint, weights_only=True)
    # The model's own options and the seed as the checkpoint saved them; data and protocol from the dataset config.
    saved = checkpoint["config"]
    model_keys = set(yaml.safe_load(Path(model_config_file("MGFormer")).read_text())) | {"seed"}
    model_keys -= {"train_neg_sample_args"}  # saved in RecBole's parsed form, which it does not read back
    config_dict = {key: saved[key] for key in model_keys if key in saved}
    config_dict.update(data_path=args.data_path, state="WARNING")
    config, _ = build_config("MGFormer", args.dataset, config_dict=config_dict)
    model, _, (_, _, test_data) = prepare(config)
    model.load_state_dict(checkpoint["state_dict"])
    model.eval()
    test = test_data._dataset.inter_feat
    stats = token_parts(model)
    shares = score_shares(model, test[model.USER_ID], test[model.ITEM_ID])
    lines = [f"## {args.checkpoint}", "",
             f"Produced by `python benchmarks/token_parts.py --dataset {args.dataset} --checkpoint {args.checkpoint}` "
             f"at commit {git_commit(ROOT)}, {machine()}, {time.strftime('%Y-%m-%d')}.", "",
             "| quantity | value |", "|---|---|"]
    lines += [f"| {key.replace('_', ' ')} | {value:.4g} |" for key, value in stats.items()]
    lines += [f"| share of test-pair scores: {name} | {share:.1%} |" for name, share in shares.items()]
    path = Path(args.results) / args.dataset / f"analysis-{args.dataset}.md"
    header = "" if path.exists() else f"# MGFormer on {args.dataset}: what its outputs are made of\n\n"
    with path.open("a") as out:
        out.write(header + "\n".join(lines) + "\n\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
