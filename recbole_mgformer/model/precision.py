"""The number format of the matrix products, the one lever that changes arithmetic: ``precision: fp32 | bf16 | auto``.

In ``bf16`` the inputs of the large matmuls are rounded to bfloat16 (8 significant bits) and multiplied with fp32
accumulation; exponentials, normalisers, running sums and parameters stay fp32. ``auto`` picks bf16 where the
hardware multiplies bf16 natively (CPUs with AVX512-BF16 or AMX, CUDA devices of compute capability 8.0 and up)
and fp32 elsewhere, where bf16 would be emulated and slower.
"""

import torch

from recbole_mgformer.config.input_checks import runner_flag

PRECISIONS = ("fp32", "bf16", "auto")


def _cpu_multiplies_bf16():
    """AVX512-BF16 or AMX, by torch's own probes (private, so looked up) or else the CPU's flags."""
    probes = [getattr(torch.cpu, name, None) for name in ("_is_avx512_bf16_supported", "_is_amx_tile_supported")]
    if any(probes):
        return any(probe() for probe in probes if probe)
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            flags = cpuinfo.read()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def bf16_is_native(device):
    """True where bf16 matmuls run in hardware on ``device`` (a ``torch.device`` or its name)."""
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported(including_emulation=False)
    if device.type == "cpu":
        return bool(_cpu_multiplies_bf16())
    return False


def resolve_precision(name, device):
    """``torch.float32`` or ``torch.bfloat16`` for the matmuls, from a ``precision`` option value."""
    if name not in PRECISIONS:
        raise ValueError(f"unknown precision {name!r}; choose one of {', '.join(PRECISIONS)}")
    if name == "auto":
        name = "bf16" if bf16_is_native(device) else "fp32"
    return torch.bfloat16 if name == "bf16" else torch.float32


def flush_subnormals(config=None):
    """CPU arithmetic from here on reads and writes numbers below float32's smallest normal (1.2e-38) as zero, in
    the whole process, unless ``config`` says ``flush_subnormals: False``: a run calls it once, as it calls RecBole's
    ``init_seed``.

    Weights that stop learning can decay into that range under Adam (MGFormer's key projection under
    ``degree_mask: adjacency`` reached 5e-34 by epoch 9 of one Beauty run), and x86 CPUs compute with subnormals
    through microcode: that run's next epoch took many times its usual time (results/performance/performance.md;
    the table results/performance/subnormal_step-amazon-beauty.md timed that state, with and without flushing).
    Zero in their place changes no result."""
    if runner_flag(config, "flush_subnormals"):
        torch.set_flush_denormal(True)


def matmul(a, b, dtype=torch.float32):
    """``a @ b`` with its inputs rounded to ``dtype`` (bf16) and the result in ``a``'s format; fp32 (or ``a``'s own
    format) multiplies as it is. Autograd flows through the casts."""
    if dtype in (torch.float32, a.dtype):
        return a @ b
    return (a.to(dtype) @ b.to(dtype)).to(a.dtype)
