"""The results of a search: one row per trial, ranked, and the markdown page and best-config YAML written from them."""

import math

import yaml

from recbole_mgformer.records import display_path
from recbole_mgformer.training.checkpoint_files import plain_value


def ranked(row):
    """A trial that ended (by itself or by ASHA) with a score: those are ranked, and the best is one of them."""
    return row["status"] in ("completed", "stopped early") and row["score"] is not None


def sort_rows(rows, bigger=True):
    """Ranked trials, best first; then unfinished ones (by their score so far); failed ones last."""

    def key(row):
        group = 0 if ranked(row) else 2 if row["status"] == "failed" else 1
        score = row["score"] if row["score"] is not None else (-math.inf if bigger else math.inf)
        return group, -score if bigger else score, row["trial"]

    return sorted(rows, key=key)


def best_config_yaml(request, row, path):
    """The text of the best configuration's YAML: the best trial's searched values only, for ``run.py
    --config_files`` under the user's own settings. The search's epoch cap, scheduler and fixed settings stay out
    (a file of the search would train as many epochs as it capped); its header names them."""
    header = [
        f"# Best of a hyperparameter search of {request['model']} on {request['dataset']} "
        f"(python -m recbole_mgformer.tune): valid {request['metric']} {_fmt(row['score'])}, trial {row['trial']}.",
        "# " + epochs_note(request, row["params"]),
    ]
    own = search_settings_text(request)
    if own:
        header.append(f"# The search also ran with {own}: add those you need.")
    header.append(
        f"# python run.py --model={request['model']} --dataset={request['dataset']} --config_files={path}"
        + ("" if "epochs" in row["params"] else " --epochs=<N>")
    )
    body = yaml.safe_dump(plain_value(row["params"]), sort_keys=False, default_flow_style=False)
    return "\n".join(header) + "\n" + body


def asha_stops_trials(request):
    """Whether the search's ASHA could stop a trial: it judges trials at its grace period and rungs above, before
    ``max_t``; a search of at most ``grace_period`` evaluations a trial (``--epochs=1``, a model fit once) has no
    rung below its end, so every trial ran to its end."""
    return request["scheduler"] == "asha" and request["grace_period"] < request["max_t"]


def epochs_note(request, params):
    """What the best YAML says of epochs: searched (then it holds them), else the search's cap, which it leaves out."""
    asha = " (ASHA stopped poor trials early)" if asha_stops_trials(request) else ""
    if "epochs" in params:
        return f"Searched settings only, epochs among them{asha}."
    cap = request.get("epochs")
    at_most = f"at most {cap} epoch{'' if cap == 1 else 's'} a trial" if cap is not None else "capped epochs"
    return f"Searched settings only; the search trained {at_most}{asha}: set epochs yourself."


def search_settings_text(request):
    """The search's own settings the best YAML leaves out (its config files, fixed settings but epochs, data
    path as given), as a phrase; '' for none."""
    files = ", ".join(display_path(path) for path in request["config_files"])
    fixed = {key: value for key, value in request["overrides"].items() if key != "epochs"}
    given = request.get("data_path_given")
    if given:
        fixed["data_path"] = request["data_path"] if given is True else given
    parts = ([f"config files {files}"] if files else []) + (
        ["settings " + ", ".join(f"{key}={_param(value)}" for key, value in fixed.items())] if fixed else []
    )
    return " and ".join(parts)


def _fmt(value):
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.4f}" if 1e-3 <= abs(value) < 1e4 or value == 0 else f"{value:.3g}"
    return str(value)


def _param(value):
    """A searched value as YAML writes it: ``~`` for None (a key's default, e.g. ``structural_size: ~``)."""
    if value is None:
        return "~"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_param(item) for item in value) + "]"
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _cell(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


def space_text(space):
    """The searched values as the page shows them: `embedding_size` choice [32, 64], `lambda` loguniform [0.01, 1]."""
    return ", ".join(
        f"`{key}` " + "; ".join(f"{kind} {_param(args)}" for kind, args in spec.items())
        if isinstance(spec, dict)
        else f"`{key}` {_param(spec)}"
        for key, spec in space.items()
    )


def first_trial_lines(request, rows):
    """The line saying that the search's first trial ran the model's defaults, and where it ranked; none for a
    search without ``defaults_first``."""
    if not request.get("defaults_first"):
        return []
    point = request.get("first_trial") or {}
    outside = request.get("first_trial_outside") or []
    shown = ", ".join(f"`{k}={_param(v)}`" for k, v in point.items())
    rank = next((i for i, row in enumerate(rows, start=1) if row.get("defaults")), None)
    where = (
        f"; it ranked {rank} of {len(rows)}"
        if rank is not None and ranked(rows[rank - 1])
        else "; its trial is not in the table"
        if rank is None
        else ""
    )
    return [
        f"First trial: the model's defaults ({shown}), one of the {request['samples']} trials"
        + (f"; outside the space, run anyway: {', '.join(f'`{k}`' for k in outside)}" if outside else "")
        + where
        + ".",
        "",
    ]


def render_markdown(summary):
    """The results page: the search, the best configuration and its test metrics, and every trial."""
    request, rows = summary["request"], summary["rows"]
    keys = list(request["space"])
    metric = request["metric"]
    counts = {s: sum(r["status"] == s for r in rows) for s in ("completed", "stopped early", "failed", "unfinished")}
    if asha_stops_trials(request):
        scheduler = f"ASHA (grace period {request['grace_period']}, max {request['max_t']} evaluations)"
    elif request["scheduler"] == "asha":
        scheduler = f"ASHA with nothing to stop (a trial reports {request['max_t']} evaluation(s) at most)"
    else:
        scheduler = "no early stopping of trials"
    files = ", ".join(f"`{display_path(p)}`" for p in request["config_files"])
    lines = [
        f"# Hyperparameter search: {request['model']} on {request['dataset']}",
        "",
        f"Rendered by `python -m recbole_mgformer.tune`. Search: {request['search']}, {request['samples']} sample(s), "
        f"{scheduler}, ranked by the best validation {metric} of each trial "
        f"({'higher' if request['mode'] == 'max' else 'lower'} is better). "
        f"Space{'' if request['space_source'] == 'the space' else ' (`' + request['space_source'] + '`)'}: "
        f"{space_text(request['space'])}; fixed settings: "
        f"{', '.join(f'`{k}={v}`' for k, v in request['overrides'].items()) or 'none'}"
        f"{'; config files: ' + files if files else ''}.",
        "",
        "Trials: " + ", ".join(f"{n} {s}" for s, n in counts.items() if n) + ".",
        "",
    ]
    lines += first_trial_lines(request, rows)
    best, retrained = summary.get("best"), summary.get("retrained")
    if best:
        lines += [
            f"Best: trial {best['trial']}, valid {metric} {_fmt(best['score'])}, "
            + ", ".join(f"`{k}={_param(best['params'][k])}`" for k in keys)
            + f". Its searched values: `{summary['best_yaml']}`, for "
            f"`python run.py --model={request['model']} --dataset={request['dataset']} "
            f"--config_files={summary['best_yaml']}` under your own settings (epochs among them: the search's "
            "cap is not in it).",
            "",
        ]
    if retrained:
        lines += [
            "Best configuration retrained once: "
            + ", ".join(f"valid {k} {_fmt(v)}" for k, v in retrained["best_valid_result"].items())
            + "; "
            + ", ".join(f"**test {k} {_fmt(v)}**" for k, v in retrained["test_result"].items())
            + ".",
            "",
        ]
    if summary.get("retrain_error"):
        lines += [f"Retraining the best configuration failed: {summary['retrain_error']}", ""]
    if summary.get("interrupted"):
        lines += [
            "The search was interrupted; the table holds the trials so far. Resume it with "
            f"`python -m recbole_mgformer.tune --model {request['model']} --dataset {request['dataset']} "
            f"--name {request['name']} --resume`.",
            "",
        ]
    valid_names = sorted({name for row in rows for name in row["valid"]})
    lines += [
        "| rank | trial | status | valid "
        + metric
        + " | epochs | "
        + " | ".join(keys)
        + "".join(f" | valid {n}" for n in valid_names if n != metric)
        + " |",
        "|" + "---|" * (5 + len(keys) + len([n for n in valid_names if n != metric])),
    ]
    for rank, row in enumerate(rows, start=1):
        status = f"failed: {row['error']}" if row["status"] == "failed" else row["status"]
        status += " (the defaults)" if row.get("defaults") else ""
        cells = [
            str(rank) if ranked(row) else "",
            row["trial"],
            status,
            _fmt(row["score"]),
            str(row["epochs"]),
            *(_param(row["params"][k]) if k in row["params"] else "" for k in keys),
            *(_fmt(row["valid"].get(n)) for n in valid_names if n != metric),
        ]
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    prov = summary["provenance"]
    records = request.get("records_dir")
    kept = f", its records `{display_path(records)}`" if records and records != request["experiment"] else ""
    lines += [
        "",
        f"Ran on {prov['machine']} at commit {prov['commit']}, {prov['date']}; search folder "
        f"`{display_path(request['experiment'])}`{kept}; versions: "
        + ", ".join(f"{k} {v}" for k, v in prov["versions"].items())
        + ".",
        "",
    ]
    return "\n".join(lines)
