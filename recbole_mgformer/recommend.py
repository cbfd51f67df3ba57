"""Top-k recommendations from a checkpoint, by the dataset's own user and item tokens.

    python -m recbole_mgformer.recommend --checkpoint saved/MGFormer-Nov-25-2026_01-00-00.pth --users 196,186 --k 10
    python -m recbole_mgformer.recommend --checkpoint saved/BPR-....pth --users 196 --k 20 --output top.csv
    python -m recbole_mgformer.recommend --checkpoint saved/BPR-....pth --export-embeddings embeddings/
    python -m recbole_mgformer.recommend --model MGFormer --dataset mine --users 196    # the newest such checkpoint
    python -m recbole_mgformer.recommend --checkpoint latest --users-file users.txt    # one token a line

``--checkpoint latest``, or ``--model`` and/or ``--dataset`` without ``--checkpoint``, takes the newest checkpoint in
``--checkpoint_dir`` (default ``saved``) whose recorded config names that model and dataset, and says which.
Outputs are claimed whole: ``--output`` and ``--export-embeddings`` never replace a file unasked (``--overwrite``), not
even one another run wrote while this one worked, and a target that cannot be written stops the command before the
checkpoint loads.

The checkpoint loads with ``torch.load(weights_only=True)``; the dataset is rebuilt from the config it records
(``--data_path`` when the data moved), so the ids match the ones the model trained on: the checkpoint keeps the
user and item vocabularies it trained with, and data that numbers them otherwise (rows reordered, added or removed)
stops with the change named (:mod:`recbole_mgformer.training.vocabulary`). Each user's items of
the training split are excluded (``--exclude seen``: every item of the user in the dataset). The ranking is
the one RecBole's full-sort evaluator computes (``recbole.utils.case_study.full_sort_topk``).

Supported: general (collaborative filtering) models, this project's and RecBole's (``MODEL_TYPE`` general or
traditional). Sequential models (EAGPS, SASRec) rank the next item of a given sequence and context models (CSA)
score given (user, item, features) rows, so neither has a per-user top-k over the catalogue: they get a
clear error.
"""

import argparse
import contextlib
import csv
import errno
import io
import json
import os
import shutil
import sys
import warnings
import zipfile
from pathlib import Path

import numpy as np
import torch
from recbole.data.interaction import Interaction
from recbole.utils import ModelType

from recbole_mgformer.config.input_checks import (
    check_writable,
    claim,
    refuse_existing,
    refuse_nonempty_folder,
    temporary_beside,
    write_new_text,
)
from recbole_mgformer.integration.checkpoints import load_data_and_model
from recbole_mgformer.integration.patches import register
from recbole_mgformer.training.resume import best_and_latest

try:
    import fcntl
except ImportError:  # no flock (Windows): two exports into one existing folder at once may mix their files
    fcntl = None

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


def users_in_file(path):
    """The user tokens of a text file, one a line, spaces around each dropped as ``--users`` drops them."""
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as error:
        raise ValueError(f"{path} is not UTF-8 text ({error.reason} at byte {error.start})") from None
    users = [line.strip() for line in text.splitlines() if line.strip()]
    if not users:
        raise ValueError(f"{path} names no user; write one user token a line")
    return users


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
    register()
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


def export_embeddings(model, dataset, folder, overwrite=False):
    """Writes ``users.npy``/``items.npy`` (one row per token, padding dropped), ``users.txt``/``items.txt``
    (the tokens, line i = row i) and ``meta.json``; returns the meta dict. ``meta["dot_product_scores"]``
    says whether ``users @ items.T`` reproduces the model's full-sort scores (checked on a few users), that
    is whether an inner-product nearest-neighbour index ranks as the model does. The files appear together or
    not at all (:func:`claim_folder`): ``folder`` must be new or empty, or ``overwrite`` replaces these files."""
    users, items = representations(model, dataset)
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

    def tokens(field):
        return lambda path: path.write_text("".join(f"{token}\n" for token in dataset.field2id_token[field][1:]))

    writers = {
        "users.npy": lambda path: np.save(path, users[1:].numpy()),
        "items.npy": lambda path: np.save(path, items[1:].numpy()),
        "users.txt": tokens(dataset.uid_field),
        "items.txt": tokens(dataset.iid_field),
        "meta.json": lambda path: path.write_text(json.dumps(meta, indent=2) + "\n"),
    }
    claim_folder(folder, writers, "--export-embeddings", overwrite)
    return meta


def claim_folder(folder, writers, option, overwrite=False):
    """Write ``{name: write(path)}`` into a fresh temporary folder beside ``folder``, then claim them: a new
    ``folder`` by renaming the temporary folder onto it (one step: a reader never sees half of it), an existing one
    file by file while holding a lock on it. Either way a folder with files in it (another run's, written while this
    one worked, or older) is refused, or with ``overwrite`` gets these files replaced (only these), so two runs
    never both write it and never mix their files."""
    folder = Path(folder)
    target = Path(os.path.abspath(folder))  # "." and "a/.." too have a parent to hold the temporary
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = temporary_beside(target)
    temporary.mkdir()
    try:
        for name, write in writers.items():
            write(temporary / name)
        if not target.exists():
            try:
                os.rename(temporary, target)
                return folder
            except OSError as error:  # another run made it meanwhile (then it is joined below), or a system error
                if error.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                    raise folder_error(folder, option, error) from None
        if not target.is_dir():
            raise FileExistsError(f"{option} {folder}: a file is there, not a folder; name a new folder")
        with folder_lock(target):
            if not overwrite and any(target.iterdir()):
                raise FileExistsError(
                    f"{option} {folder}: the folder is not empty (written by another run since this one started, "
                    "or before); name a new or empty folder, or pass --overwrite to replace its files"
                )
            for name in writers:
                claim(temporary / name, target / name, option, overwrite)
    finally:
        shutil.rmtree(temporary, ignore_errors=True)
    return folder


def folder_error(folder, option, error):
    """A failed rename onto ``folder`` as a message naming the option and the fix, where there is one."""
    if error.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return PermissionError(
            f"{option} {folder}: cannot write there ({error.strerror}); choose a folder you can write to"
        )
    return error


@contextlib.contextmanager
def folder_lock(folder):
    """Hold an exclusive lock on ``folder`` (flock: dropped when the process ends, however it ends), so two runs
    claiming files in it take turns."""
    handle = os.open(folder, os.O_RDONLY)
    try:
        if fcntl is not None:
            fcntl.flock(handle, fcntl.LOCK_EX)
        yield
    finally:
        os.close(handle)


# ------------------------------------------------------------------------------------------------ command line


def write(result, output, overwrite=False):
    """CSV (user,rank,item,score) or JSON ({user: [{item, score}]}) by the file's suffix, claimed whole
    (:func:`~recbole_mgformer.config.input_checks.write_new_text`): an existing file, even one another run wrote while
    this one worked, is replaced only with ``overwrite``."""
    output = Path(output)
    suffix = output.suffix.lower()  # out.CSV is a CSV file
    if suffix == ".json":
        payload = {user: [{"item": item, "score": score} for item, score in items] for user, items in result.items()}
        text = json.dumps(payload, indent=2) + "\n"
    elif suffix == ".csv":
        handle = io.StringIO(newline="")
        writer = csv.writer(handle)
        writer.writerow(["user", "rank", "item", "score"])
        for user, items in result.items():
            writer.writerows([user, rank, item, f"{score:.6g}"] for rank, (item, score) in enumerate(items, 1))
        text = handle.getvalue()
    else:
        raise ValueError(f"--output {output}: write .csv or .json")
    return write_new_text(output, text, "--output", overwrite)


def check_outputs(args):
    """Before the checkpoint loads: nothing the command writes may replace a file unasked (``--overwrite``), and
    every target must be writable, so neither fails after the work."""
    if args.output:
        refuse_existing(args.output, "--output", args.overwrite)
        if Path(args.output).suffix.lower() not in (".csv", ".json"):
            raise ValueError(f"--output {args.output}: write .csv or .json")
        check_writable(args.output, "--output")
    if args.export_embeddings:
        folder = refuse_nonempty_folder(args.export_embeddings, "--export-embeddings", args.overwrite, EXPORTED)
        check_writable(os.path.abspath(folder), "--export-embeddings")  # the temporary folder goes beside it
        if folder.is_dir():  # its files are claimed inside it
            check_writable(folder / EXPORTED[0], "--export-embeddings")


# ------------------------------------------------------------------------------------------------ which checkpoint


def recorded_config(path):
    """The config a checkpoint records, read with ``weights_only=True`` and its tensors mapped, not read."""
    if os.path.getsize(path) == 0:
        raise ValueError("empty: a run that has not saved yet, or a failed copy")
    if not zipfile.is_zipfile(path):
        raise ValueError("not a torch.save archive")
    state = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    config = state.get("config") if isinstance(state, dict) else None
    if not isinstance(config, dict):
        raise ValueError("it records no config")
    return config


def newest_checkpoint(folder, model=None, dataset=None):
    """``(path, config)`` of the newest (last written) checkpoint in ``folder`` whose recorded config names
    ``model`` (any case) and ``dataset`` (each: any, when None). A run's ``.latest.pth`` (its resume state, not its
    best epoch) is not a candidate; a file that does not load with ``weights_only=True`` is skipped. None found: a
    FileNotFoundError naming the folder, what it holds, and the command that makes one."""
    folder = Path(folder)
    wanted = " on ".join(filter(None, [model, dataset and f"dataset {dataset!r}"])) or "any model"
    candidates = [
        path
        for path in (folder.glob("*.pth") if folder.is_dir() else [])
        if path.is_file() and not path.name.endswith(".latest.pth") and not path.name.startswith(".")
    ]
    others = []
    for path in sorted(candidates, key=lambda path: (path.stat().st_mtime, path.name), reverse=True):
        try:
            config = recorded_config(path)
        except Exception as error:  # torch raises many kinds; the file is only skipped, and named
            others.append(f"{path.name} (unreadable: {str(error).splitlines()[0][:80]})")
            continue
        if (model is None or str(config.get("model", "")).lower() == model.lower()) and (
            dataset is None or config.get("dataset") == dataset
        ):
            return path, config
        others.append(f"{path.name} ({config.get('model')} on {config.get('dataset')})")
    held = f"its .pth files: {', '.join(others[:5])}{', ...' if len(others) > 5 else ''}" if others else "it holds none"
    if not folder.is_dir():
        held = "the folder does not exist"
    train = f"python run.py --model={model or '<Model>'} --dataset={dataset or '<dataset>'} --checkpoint_dir={folder}"
    raise FileNotFoundError(
        f"no checkpoint of {wanted} in {folder} (--checkpoint_dir); {held}. Train one with: {train}, or pass "
        "--checkpoint_dir where your runs saved theirs, or --checkpoint with the file"
    )


def chosen_checkpoint(args):
    """The checkpoint file the command loads: ``--checkpoint`` as given, or the newest one of ``--model`` and
    ``--dataset`` in ``--checkpoint_dir`` (``--checkpoint latest`` or no ``--checkpoint``), named on stderr."""
    if args.checkpoint and args.checkpoint != "latest":
        if args.model or args.dataset:
            raise ValueError(
                "--model and --dataset choose the newest checkpoint in --checkpoint_dir: give them with "
                f"--checkpoint latest or without --checkpoint, not with the file {args.checkpoint}"
            )
        return args.checkpoint
    path, config = newest_checkpoint(args.checkpoint_dir, args.model, args.dataset)
    print(
        f"checkpoint: {path} ({config.get('model')} on {config.get('dataset')}, the newest in {args.checkpoint_dir})",
        file=sys.stderr,
    )
    return str(path)


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
    parser.add_argument(
        "--checkpoint",
        help="a .pth written by this project or run_recbole, or 'latest': the newest in --checkpoint_dir (of "
        "--model and --dataset when given)",
    )
    parser.add_argument("--model", help="without --checkpoint (or with 'latest'): the newest checkpoint of this model")
    parser.add_argument("--dataset", help="without --checkpoint (or with 'latest'): the newest one of this dataset")
    parser.add_argument("--checkpoint_dir", default="saved", help="where to look for the newest (default saved)")
    who = parser.add_mutually_exclusive_group()
    who.add_argument("--users", default="", help="comma-separated user tokens, e.g. 196,186")
    who.add_argument(
        "--users-file",
        metavar="FILE",
        help="a text file of user tokens, one a line (for tokens that hold a comma; blank lines skipped)",
    )
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
    register()
    warnings.filterwarnings("ignore", category=FutureWarning, module="recbole")  # pandas 2's notes on RecBole's code
    if not args.users and not args.users_file and not args.export_embeddings:
        parser.error("give --users (or --users-file), --export-embeddings, or both")
    users = [token.strip() for token in args.users.split(",")] if args.users else []
    if args.users and not all(users):
        parser.error(
            f"--users {args.users!r} holds an empty token; give comma-separated user tokens without empty ones, "
            "e.g. --users 196,186 (a token that holds a comma: --users-file, one token a line)"
        )
    if args.users_file:
        try:
            users = users_in_file(args.users_file)
        except (OSError, ValueError) as error:
            parser.error(f"--users-file: {error}")
    if not (args.checkpoint or args.model or args.dataset):
        parser.error(
            "give --checkpoint FILE, or --model and --dataset (the newest such checkpoint in --checkpoint_dir)"
        )
    try:
        check_outputs(args)
        checkpoint = chosen_checkpoint(args)
        if Path(best_and_latest(checkpoint)[1]).is_file():  # a run keeps its last epoch beside its best until it ends
            print(
                f"note: the run that wrote {checkpoint} has not finished (it is training, or it stopped and can be "
                "resumed): its checkpoint holds its best epoch so far",
                file=sys.stderr,
            )
        _, model, dataset, train_data, _, _ = load(checkpoint, args.data_path)
        if args.export_embeddings:
            meta = export_embeddings(model, dataset, args.export_embeddings, args.overwrite)
            print(
                f"wrote {meta['users']} users and {meta['items']} items (d={meta['dimension']}) to "
                f"{args.export_embeddings}; dot product reproduces the scores: {meta['dot_product_scores']}"
            )
        if users:
            result = rank(model, dataset, train_data, users, args.k, args.exclude)
            short = {user: len(items) for user, items in result.items() if len(items) < args.k}
            if short:
                user, count = next(iter(short.items()))
                print(
                    f"note: {len(short)} user(s) have fewer than --k {args.k} items to recommend (the catalogue less "
                    f"the items --exclude {args.exclude} leaves out), e.g. {user}: {count}",
                    file=sys.stderr,
                )
            if args.output:
                write(result, args.output, args.overwrite)
                print(f"wrote {sum(map(len, result.values()))} recommendations to {args.output}")
            else:
                print(render(result))
    except (ValueError, FileNotFoundError, FileExistsError, PermissionError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
