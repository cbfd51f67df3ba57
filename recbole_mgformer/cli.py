"""``run.py`` and the ``recbole-mgformer`` console script, like RecBole's ``run_recbole.py``:

python run.py --model=MGFormer --dataset=ml-100k --config_files="a.yaml b.yaml" --learning_rate=0.002
python run.py --model=LightGCN --dataset=ml-100k --nproc=2                       # DDP, 2 local processes
python run.py --model=MGFormer --nproc=2 --world_size=4 --offset=2 --ip=10.0.0.1  # the 2nd of 2 machines
"""

import argparse
import sys

from recbole_mgformer.config.command_line import GivenOnce, config_settings
from recbole_mgformer.config.input_checks import user_errors
from recbole_mgformer.integration.patches import register
from recbole_mgformer.quick_start import best_epoch_reason, run_recommender


def format_summary(model, dataset, result, metrics=("recall@20", "ndcg@20")):
    """A head line (with the best epoch, where the run had epochs), then valid and test: ``metrics`` where the run
    computed them (top-k runs), else every metric it computed (AUC and LogLoss of a context-aware run, Recall@10 of a
    sequential one); then where the run's checkpoint and log went, where it says."""
    best_epoch, epochs = result.get("best_epoch"), result.get("epochs")
    if not epochs:
        epoch = ""
    elif best_epoch is None:  # eval_step: 0 validates no epoch; the last one is tested
        epoch = f": {epochs} epochs, none validated, the last tested"
    else:
        epoch = f": best epoch {best_epoch} of {epochs}{best_epoch_reason(model, best_epoch)}"
    lines = [f"{model} on {dataset}{epoch}"]
    for split, values in (("valid", result["best_valid_result"]), ("test", result["test_result"])):
        values = dict(values or {})
        names = [name for name in metrics if name in values] or list(values)
        lines.append(f"  {split:5s} " + "  ".join(f"{name} {float(values[name]):.4f}" for name in names))
    outputs = (("checkpoint", result.get("checkpoint")), ("log", result.get("log_file")))
    lines += [f"{name} {path}" for name, path in outputs if path]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="recbole-mgformer",
        description="Train and evaluate a recommender (this project's or RecBole's) on a RecBole atomic dataset. "
        "Any other --key=value overrides a config setting.",
    )
    parser.add_argument(
        "--model", "-m", default="MGFormer", action=GivenOnce, help="model name, e.g. MGFormer, LightGCN, BPR"
    )
    parser.add_argument(
        "--dataset", "-d", default="ml-100k", action=GivenOnce, help="dataset name (a folder under data_path)"
    )
    parser.add_argument("--config_files", default=None, action=GivenOnce, help="space-separated YAML config files")
    parser.add_argument("--resume_file", default=None, action=GivenOnce, help="checkpoint to continue training from")
    parser.add_argument(
        "--no-tuned",
        "--no_tuned",
        dest="tuned",
        action="store_false",
        help="leave out properties/benchmark/<dataset>/<Model>.yaml, the settings tuned for the "
        "dataset: RecBole's defaults and the model's YAML only",
    )
    distributed = parser.add_argument_group(
        "data-parallel training (torch.distributed DDP: gloo on CPUs, nccl on GPUs)"
    )
    distributed.add_argument("--nproc", type=int, default=1, help="processes on this machine (default 1)")
    distributed.add_argument(
        "--world_size", type=int, default=-1, help="processes on all machines together (default: nproc)"
    )
    distributed.add_argument("--ip", default="localhost", help="address of the machine that runs rank 0")
    distributed.add_argument("--port", type=int, default=5678, help="free port on that machine")
    distributed.add_argument(
        "--offset",
        "--group_offset",
        type=int,
        default=0,
        help="global rank of this machine's first process (default 0)",
    )
    args, rest = parser.parse_known_args(sys.argv[1:] if argv is None else argv)
    register()
    with user_errors():  # bad input: its message, no traceback
        config_files, overrides = config_settings(args, rest)
        result = run_recommender(
            args.model,
            args.dataset,
            config_file_list=config_files,
            config_dict=overrides,
            resume_file=args.resume_file,
            nproc=args.nproc,
            world_size=args.world_size,
            ip=args.ip,
            port=args.port,
            offset=args.offset,
            tuned=args.tuned,
        )
    print(format_summary(args.model, args.dataset, result))
    return result


if __name__ == "__main__":
    main()
