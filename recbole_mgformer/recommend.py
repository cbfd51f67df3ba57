"""Top-k recommendations from a checkpoint, by the dataset's own user and item tokens.

    python -m recbole_mgformer.recommend --checkpoint saved/MGFormer-Nov-25-2026_01-00-00.pth --users 196,186 --k 10
    python -m recbole_mgformer.recommend --checkpoint saved/BPR-....pth --users 196 --k 20 --output top.csv
    python -m recbole_mgformer.recommend --checkpoint saved/BPR-....pth --export-embeddings embeddings/

The checkpoint loads with ``torch.load(weights_only=True)``; the dataset is rebuilt from the config it records
(``--data_path`` when the data moved), so the ids match the ones the model trained on: the checkpoint keeps the
user and item vocabularies it trained with, and data that numbers them otherwise (rows reordered, added or removed)
stops with the change named (:mod:`recbole_mgformer.vocabulary`). Each user's items of
the training split are excluded (``--exclude seen``: every item of the user in the dataset). The ranking is
the one RecBole's full-sort evaluator computes (``recbole.utils.case_study.full_sort_topk``).

Supported: general (collaborative filtering) models, this project's and RecBole's (``MODEL_TYPE`` general or
traditional). Sequential models (EAGPS, SASRec) rank the next item of a given sequence and context models (CSA)
score given (user, item, features) rows, so neither has a per-user top-k over the catalogue: they get a
clear error.
"""

import argparse
import csv
import json
import sys
import warnings
from pathlib import Path

import numpy as np
import torch
from recbole.data.interaction import Interaction
from recbole.utils import ModelType

from recbole_mgformer.checkpoints import load_data_and_model
from recbole_mgformer.input_checks import refuse_existing, refuse_nonempty_folder

EXCLUDE = ("train", "seen", "none")


def load(checkpoint, data_path=None):
    """``(config, model, dataset, train_data, valid_data, test_data)`` of a general model's checkpoint."""
    config, model, *rest = load_data_and_model(checkpoint, {"data_path": data_path} if data_path else None, log=False)
    if config["MODEL_TYPE"] not in (ModelType.GENERAL, ModelType.TRADITIONAL):
        kind = {
            ModelType.SEQUENTIAL: "sequential model: it ranks the next item of a given item sequence",
            ModelType.CONTEXT: "context-aware model: it scores given (user, item, feature) rows",
        }.get(config["MODEL_TYPE"], f"{config['MODEL_TYPE'].name.lower()} model")
        raise ValueError(
            f"{checkpoint}: {config['model']} is a {kind}, so it has no top-k over all items per "
            "user; recommend supports general models (MGFormer, SimGCL, XSimGCL, DirectAU, BPR, "
            "LightGCN, ...). Use RecBole's full_sort_topk or model.predict with your own rows."
        )
    return config, model.eval(), *rest


def user_ids(dataset, users):
    """Internal ids of ``users`` (tokens); a ValueError names every unknown one."""
    tokens = [str(user) for user in users]
    if not tokens:
        raise ValueError("no users given; pass tokens such as --users 196,186")
    known = dataset.field2token_id[dataset.uid_field]
    unknown = [token for token in tokens if token not in known or known[token] == 0]
    if unknown:
        raise ValueError(
            f"unknown user token(s) {', '.join(map(repr, unknown))}: not among the "
            f"{dataset.user_num - 1} users of dataset {dataset.dataset_name!r} the checkpoint trained on "
            "(after its filtering); user tokens are the user_id values of the .inter file"
        )
    return torch.tensor([known[token] for token in tokens], dtype=torch.long)


def excluded_items(dataset, train_data, exclude):
    """The (users, items) CSR matrix of the items not to recommend, or None."""
    if exclude not in EXCLUDE:
        raise ValueError(f"exclude must be one of {', '.join(EXCLUDE)}, got {exclude!r}")
    if exclude == "none":
        return None
    source = train_data.dataset if exclude == "train" else dataset
    return source.inter_matrix(form="csr")


def full_sort_scores(model, dataset, uids, excluded):
    """RecBole's full-sort scores for ``uids``: padding item and excluded items at -inf."""
    with torch.no_grad():
        interaction = dataset.join(Interaction({dataset.uid_field: uids})).to(model.device)
        scores = model.full_sort_predict(interaction).view(len(uids), dataset.item_num).cpu()
    scores[:, 0] = -np.inf
    if excluded is not None:
        for row, uid in enumerate(uids.tolist()):
            scores[row, excluded.indices[excluded.indptr[uid] : excluded.indptr[uid + 1]]] = -np.inf
    return scores


def top_k(scores, k):
    """(scores, item ids) of the ``k`` best, per row."""
    if k < 1:
        raise ValueError(f"k must be a positive integer, got {k}")
    return torch.topk(scores, min(k, scores.shape[1]))


def recommend(checkpoint, users, k=10, exclude="train", data_path=None):
    """``{user token: [(item token, score), ...]}``, best first, ``k`` items per user at most (fewer when the
    user has fewer unseen items). See the module's docstring."""
    config, model, dataset, train_data, _, _ = load(checkpoint, data_path)
    return rank(model, dataset, train_data, users, k, exclude)


def rank(model, dataset, train_data, users, k=10, exclude="train"):
    uids = user_ids(dataset, users)
    scores, items = top_k(full_sort_scores(model, dataset, uids, excluded_items(dataset, train_data, exclude)), k)
    item_tokens = dataset.field2id_token[dataset.iid_field]
    result = {}
    for user, row_scores, row_items in zip(users, scores.tolist(), items.tolist()):
        result[str(user)] = [(str(item_tokens[i]), float(s)) for s, i in zip(row_scores, row_items) if s != -np.inf]
    return result


# ------------------------------------------------------------------------------------------------ embeddings


def representations(model, dataset):
    """(users (n_users, d), items (n_items, d)) float tensors, row = internal id (row 0: padding)."""
    with torch.no_grad():
        if hasattr(model, "restore_user_e"):  # graph models cache what full_sort_predict scores with
            model.full_sort_predict(Interaction({dataset.uid_field: torch.tensor([1])}).to(model.device))
            users, items = model.restore_user_e, model.restore_item_e
        elif isinstance(getattr(model, "user_embedding", None), torch.nn.Embedding) and isinstance(
            getattr(model, "item_embedding", None), torch.nn.Embedding
        ):
            users, items = model.user_embedding.weight, model.item_embedding.weight
        else:
            raise ValueError(
                f"{type(model).__name__} exposes no user and item representations "
                "(neither restore_user_e/restore_item_e nor user_embedding/item_embedding)"
            )
    return users.detach().float().cpu(), items.detach().float().cpu()


EXPORTED = ("users.npy", "items.npy", "users.txt", "items.txt", "meta.json")


def export_embeddings(model, dataset, folder):
    """Writes ``users.npy``/``items.npy`` (one row per token, padding dropped), ``users.txt``/``items.txt``
    (the tokens, line i = row i) and ``meta.json``; returns the meta dict. ``meta["dot_product_scores"]``
    says whether ``users @ items.T`` reproduces the model's full-sort scores (checked on a few users), that
    is whether an inner-product nearest-neighbour index ranks as the model does."""
    users, items = representations(model, dataset)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    np.save(folder / "users.npy", users[1:].numpy())
    np.save(folder / "items.npy", items[1:].numpy())
    for name, field in (("users.txt", dataset.uid_field), ("items.txt", dataset.iid_field)):
        (folder / name).write_text("".join(f"{token}\n" for token in dataset.field2id_token[field][1:]))
    sample = torch.arange(1, min(dataset.user_num, 9))
    scores = full_sort_scores(model, dataset, sample, None)[:, 1:]
    meta = {
        "model": type(model).__name__,
        "dataset": dataset.dataset_name,
        "dimension": int(users.shape[1]),
        "users": int(users.shape[0] - 1),
        "items": int(items.shape[0] - 1),
        "dot_product_scores": bool(torch.allclose(users[sample] @ items[1:].T, scores, rtol=1e-4, atol=1e-5)),
    }
    (folder / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    return meta


# ------------------------------------------------------------------------------------------------ command line


def write(result, output):
    """CSV (user,rank,item,score) or JSON ({user: [{item, score}]}) by the file's suffix."""
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    if output.suffix == ".json":
        payload = {user: [{"item": item, "score": score} for item, score in items] for user, items in result.items()}
        output.write_text(json.dumps(payload, indent=2) + "\n")
    elif output.suffix == ".csv":
        with output.open("w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(["user", "rank", "item", "score"])
            for user, items in result.items():
                writer.writerows([user, rank, item, f"{score:.6g}"] for rank, (item, score) in enumerate(items, 1))
    else:
        raise ValueError(f"--output {output}: write .csv or .json")


def check_outputs(args):
    """Before the checkpoint loads: nothing the command writes may replace a file unasked (``--overwrite``)."""
    if args.output:
        refuse_existing(args.output, "--output", args.overwrite)
        if Path(args.output).suffix not in (".csv", ".json"):
            raise ValueError(f"--output {args.output}: write .csv or .json")
    if args.export_embeddings:
        refuse_nonempty_folder(args.export_embeddings, "--export-embeddings", args.overwrite, EXPORTED)


def render(result):
    lines = [f"{'user':<10} {'rank':>4}  {'item':<10} {'score':>10}"]
    for user, items in result.items():
        lines += [f"{user:<10} {rank:>4}  {item:<10} {score:>10.4f}" for rank, (item, score) in enumerate(items, 1)]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m recbole_mgformer.recommend",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--checkpoint", required=True, help="a .pth written by this project or run_recbole")
    parser.add_argument("--users", default="", help="comma-separated user tokens, e.g. 196,186")
    parser.add_argument("--k", type=int, default=10, help="items per user (default 10)")
    parser.add_argument(
        "--exclude",
        choices=EXCLUDE,
        default="train",
        help="items not to recommend: the user's training items (default), every item the user "
        "has in the dataset, or none",
    )
    parser.add_argument("--output", help="write .csv or .json instead of printing")
    parser.add_argument("--export-embeddings", metavar="DIR", help="write user and item representations to DIR")
    parser.add_argument("--data_path", help="RecBole's data folder, when it moved since training")
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="replace an existing --output file, or the files of a non-empty --export-embeddings folder",
    )
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore", category=FutureWarning, module="recbole")  # pandas 2's notes on RecBole's code
    if not args.users and not args.export_embeddings:
        parser.error("give --users, --export-embeddings, or both")
    try:
        check_outputs(args)
        _, model, dataset, train_data, _, _ = load(args.checkpoint, args.data_path)
        if args.export_embeddings:
            meta = export_embeddings(model, dataset, args.export_embeddings)
            print(
                f"wrote {meta['users']} users and {meta['items']} items (d={meta['dimension']}) to "
                f"{args.export_embeddings}; dot product reproduces the scores: {meta['dot_product_scores']}"
            )
        if args.users:
            result = rank(model, dataset, train_data, args.users.split(","), args.k, args.exclude)
            if args.output:
                write(result, args.output)
                print(f"wrote {sum(map(len, result.values()))} recommendations to {args.output}")
            else:
                print(render(result))
    except (ValueError, FileNotFoundError, FileExistsError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
