"""The rows of logits an epoch of ``loss: softmax`` makes under ``train_protocol: user`` with ``train_user_chunk: c``,
as a share of RecBole's pairs (one row a pair), on a dataset's training split (``data/user_batches.py``).

    python experiments/user_chunk_rows.py amazon-beauty gowalla
"""

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

CHUNKS = (1, 2, 4, 8, None)  # None: whole users


def row_shares(pairs_per_user, chunks=CHUNKS):
    """{chunk: rows / pairs}: a user with k pairs is ceil(k / c) rows, one row whole (c None)."""
    k = np.asarray(pairs_per_user)
    k = k[k > 0]
    return {c: float((np.ceil(k / c) if c else np.ones_like(k)).sum() / k.sum()) for c in chunks}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("datasets", nargs="+")
    args = parser.parse_args(argv)
    from recbole_mgformer.quick_start import build_config, prepare_data

    for dataset in args.datasets:
        config, _ = build_config("MGFormer", dataset, None, {"loss": "softmax", "state": "WARNING"})
        train, _, _ = prepare_data(config)
        k = np.bincount(train._dataset.inter_feat[train._dataset.uid_field].numpy())
        named = {f"chunks of {c}" if c else "whole users": share for c, share in row_shares(k).items()}
        cells = ", ".join(f"{name} {share:.2f}" for name, share in named.items())
        users = k[k > 0]
        print(f"{dataset}: {len(users)} users, {users.sum()} training pairs ({users.mean():.1f} a user); {cells}")


if __name__ == "__main__":
    main()
