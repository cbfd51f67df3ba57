"""The two kernels that dominate an MGFormer step, timed alone, forward plus backward, against their form at an
earlier commit: the fused key side of Eq. (12) (``model/mgformer/key_summary.py``) and the uniformity loss
(``model/loss.py``), both in one process, interleaved over repeats.

    python benchmarks/kernels.py --baseline 6c8142d          # Beauty's sizes: n = 34,464, d = 64, m = 128
    python benchmarks/kernels.py --baseline 6c8142d --compile

The baseline's modules are read with ``git show <commit>:<path>`` and imported beside the checkout's; its key side
runs with ``keep`` False and True as it had them. Writes a JSON record to results/performance/runs/performance/
and the table to results/performance/kernels.md.
"""

import argparse
import importlib.util
import math
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


# MGFormer's own modules moved from model/ to model/mgformer/; a baseline from before the move has them at model/.
MOVED_TO_MGFORMER = ("attention", "attention_options", "compilation", "feature_maps", "key_summary", "structural")


def source_at(commit, path):
    """``path`` as it was at ``commit``, read from its place before the model/mgformer/ move where it was there
    then, with its imports of the moved modules pointed at where they are now."""
    old_path = path.replace("recbole_mgformer/model/mgformer/", "recbole_mgformer/model/")
    for candidate in dict.fromkeys((path, old_path)):
        shown = subprocess.run(["git", "show", f"{commit}:{candidate}"], cwd=ROOT, capture_output=True, text=True)
        if shown.returncode == 0:
            moved = "|".join(MOVED_TO_MGFORMER)
            return re.sub(rf"recbole_mgformer\.model\.({moved})\b", r"recbole_mgformer.model.mgformer.\1",
                          shown.stdout)
    raise SystemExit(f"kernels.py: {path} is not in commit {commit} (nor at {old_path}); pick another --baseline")


def module_at(commit, path, name):
    """The module ``path`` as it was at ``commit``, imported under ``name``."""
    source = source_at(commit, path)
    file = Path(tempfile.mkdtemp()) / f"{name}.py"
    file.write_text(source)
    spec = importlib.util.spec_from_file_location(name, file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def key_side_inputs(n, d, m, seed=0):
    import torch

    from recbole_mgformer.model.mgformer.feature_maps import draw_projection

    g = torch.Generator().manual_seed(seed)
    embeddings = (0.1 * torch.randn(n, d, generator=g)).requires_grad_()
    structural = 0.1 * torch.randn(n, d, generator=g)
    weight = (torch.randn(2 * d, 2 * d, generator=g) / math.sqrt(2 * d)).requires_grad_()
    projection = draw_projection("simrf", m, 2 * d, g).unsqueeze(0)
    z = torch.rand(n, generator=g).requires_grad_()
    upstream = torch.randn(1, 2 * m, 2 * d + 1, generator=g)
    return embeddings, structural, weight, projection, z, upstream


def time_key_side(module, functions, inputs, chunk_size):
    embeddings, structural, weight, projection, z, upstream = inputs
    started = time.perf_counter()
    out = module.chunked_key_summary(embeddings, structural, weight, projection, z, chunk_size=chunk_size,
                                     functions=functions)
    (out * upstream).sum().backward()
    return time.perf_counter() - started


def time_uniformity(module, x, block_rows):
    x = x.detach().clone().requires_grad_()
    started = time.perf_counter()
    module.uniformity_loss(x, block_rows=block_rows).backward()
    return time.perf_counter() - started


def main(argv=None):
    import torch

    from benchmarks.recorded_run import timing_provenance, write_table
    from recbole_mgformer.model import loss
    from recbole_mgformer.model.mgformer import key_summary
    from recbole_mgformer.records import git_commit, package_versions, write_record

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", required=True, help="the commit to compare with")
    parser.add_argument("--nodes", type=int, default=34_464)
    parser.add_argument("--embedding_size", type=int, default=64)
    parser.add_argument("--batch_size", type=int, default=2048, help="rows of the uniformity loss")
    parser.add_argument("--chunk_size", type=int, default=2048)
    parser.add_argument("--compile", action="store_true", help="compile the key side's chunk functions")
    parser.add_argument("--repeats", type=int, default=8)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--results", default=str(ROOT / "results" / "performance"))
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    old_keys = module_at(args.baseline, "recbole_mgformer/model/mgformer/key_summary.py", "baseline_key_summary")
    old_loss = module_at(args.baseline, "recbole_mgformer/model/loss.py", "baseline_loss")
    d = args.embedding_size
    inputs = key_side_inputs(args.nodes, d, 2 * d)
    x = torch.nn.functional.normalize(torch.randn(args.batch_size, 2 * d, generator=torch.Generator().manual_seed(1)),
                                      dim=-1)
    cases = {}
    for label, module in ((args.baseline, old_keys), ("this checkout", key_summary)):
        for keep in (False, True):
            functions = module.ChunkFunctions(compile=args.compile, keep=keep)
            cases[f"key side, {label}, {'keep' if keep else 'recompute'}"] = (
                lambda m=module, f=functions: time_key_side(m, f, inputs, args.chunk_size))
    for label, module in ((args.baseline, old_loss), ("this checkout", loss)):
        cases[f"uniformity loss, {label}"] = lambda m=module: time_uniformity(m, x, 256)
    times = {name: [] for name in cases}
    for run in cases.values():  # warm-up: compilation, allocator
        run(), run()
    for _ in range(args.repeats):
        for name, run in cases.items():
            times[name].append(run())
    lines = ["# Key side and uniformity loss, forward and backward", "",
             f"Produced by `python benchmarks/kernels.py --baseline {args.baseline}`: n = {args.nodes:,} nodes, "
             f"d = {d} (tokens 2d wide, m = 2d features, sin mask), chunks of {args.chunk_size}, "
             f"{'compiled' if args.compile else 'eager'}; the uniformity loss of one side, "
             f"b = {args.batch_size}, w = 2d, fp32; {args.threads} thread(s), interleaved.", "",
             "| kernel | median ms | min ms |", "|---|---|---|"]
    lines += [f"| {name} | {1000 * statistics.median(t):.1f} | {1000 * min(t):.1f} |" for name, t in times.items()]
    commit = git_commit(ROOT)
    provenance = timing_provenance(commit, args.repeats, {"baseline": args.baseline, "compile": args.compile,
                                                         "threads": args.threads})
    stamp = time.strftime("%Y%m%d-%H%M%S")
    write_record(Path(args.results) / "runs" / "performance" / f"kernels-{stamp}.json",
                 {"seconds": times, "provenance": provenance, "versions": package_versions(),
                  "command": " ".join(["python benchmarks/kernels.py", *(argv or sys.argv[1:])])})
    write_table(Path(args.results) / "kernels.md", lines, provenance)
    return times


if __name__ == "__main__":
    main()
