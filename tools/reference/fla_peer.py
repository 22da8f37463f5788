"""The "PyTorch + fla" peer: flash-linear-attention's Triton kernels for transformers' Gated DeltaNet.

FLA_DIR=DIR (a folder holding fla's `fla/` package, pure Python + Triton, brought to the GPU
machine uncommitted) is put first on sys.path and transformers is told fla is available, so that
Qwen3.5's Gated DeltaNet layers run fla's chunk kernels. Call enable() before transformers'
Qwen3.5 modeling module is imported, and kernels_note() after the model is built; kernels_ran(fn)
runs fn once under torch's profiler and names the Gated DeltaNet GPU kernels that actually ran
(the proof that the fla baseline is what was timed).
"""
import os
import sys


def enable():
    if os.environ.get("FLA_DIR"):
        sys.path.insert(0, os.environ["FLA_DIR"])
        import transformers.utils.import_utils as iu
        iu.is_flash_linear_attention_available = lambda: True


def kernels_note(model):
    """Which Gated DeltaNet function the model's first linear-attention layer calls (and the
    attention kernel), named by its module: transformers' own torch_chunk_gated_delta_rule is the
    fallback, anything from fla is the fla baseline."""
    fn = next((m.chunk_gated_delta_rule for m in model.modules() if hasattr(m, "chunk_gated_delta_rule")), None)
    name = f"{getattr(fn, '__module__', type(fn).__module__)}.{getattr(fn, '__name__', type(fn).__name__)}"
    kind = "fla" if name.startswith("fla") else "torch fallback (NOT the fla baseline)" if "torch_" in name else "?"
    attn = getattr(getattr(model, "config", None), "_attn_implementation", "?")
    return f"Gated DeltaNet kernels: {kind} ({name}); attention: {attn}"


# Substrings of fla's Gated DeltaNet Triton kernel names (chunk form, its WY / triangular-solve
# helpers and the recurrent decode step); transformers' torch fallback launches none of them.
_FLA_KERNEL_MARKS = ("gated_delta", "delta_rule", "recurrent", "chunk_fwd", "chunk_scaled_dot_kkt", "solve_tril",
                     "recompute_w_u", "chunk_local_cumsum")


def _gpu_kernels(fn):
    """Runs fn() once under torch.profiler (CUDA activity): its GPU kernels, averaged by name."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return prof.key_averages()


def kernels_ran(fn):
    """Runs fn() once under torch.profiler (CUDA activity) and says which Gated DeltaNet kernels
    ran: fla's Triton kernels by name, or none (the torch fallback)."""
    names = sorted({e.key for e in _gpu_kernels(fn)})
    fla = [n for n in names if any(m in n.lower() for m in _FLA_KERNEL_MARKS)]
    if fla:
        return f"Gated DeltaNet kernels that ran: fla ({len(fla)} Triton kernels: {', '.join(fla[:6])}{' ...' if len(fla) > 6 else ''})"
    return f"Gated DeltaNet kernels that ran: NO fla kernel (torch fallback; {len(names)} kernels in all)"


# Name marks of the other kernel classes in PyTorch's forward, for stage_profile(): attention
# (SDPA's flash / memory-efficient / cuDNN kernels), the linear layers' GEMMs (cuBLAS / CUTLASS).
_ATTENTION_MARKS = ("flash", "fmha", "attention", "sdpa", "cudnn")
_GEMM_MARKS = ("gemm", "cutlass", "xmma", "sm90_", "sm80_", "nvjet", "cublas")


def stage_profile(fn):
    """Runs fn() once under torch.profiler (CUDA activity) and sums the GPU time of its kernels by
    class, in ms: fla's delta rule, attention, GEMMs and everything else (norms, element-wise,
    the conv, copies). One line, comparable with stave's STAVE_STAGES=1 profile (which
    synchronises after every op, so its sums run a little higher); and, where fla ran, a line with
    each of its kernels (ms and calls) to set beside bench_gated_delta's split by kernel (else
    None)."""
    sums = {"fla delta rule": 0.0, "attention": 0.0, "GEMM": 0.0, "other": 0.0}
    fla_kernels = {}  # name: [us, calls], to set beside stave's kernels of the chunked delta rule
    for e in _gpu_kernels(fn):
        us = getattr(e, "device_time_total", None)
        if us is None:
            us = getattr(e, "cuda_time_total", 0.0)
        name = e.key.lower()
        if any(m in name for m in _FLA_KERNEL_MARKS):
            sums["fla delta rule"] += us
            k = fla_kernels.setdefault(e.key, [0.0, 0])
            k[0] += us
            k[1] += getattr(e, "count", 0)
        elif any(m in name for m in _ATTENTION_MARKS):
            sums["attention"] += us
        elif any(m in name for m in _GEMM_MARKS):
            sums["GEMM"] += us
        else:
            sums["other"] += us
    total = sum(sums.values())
    line = "PyTorch stage profile (ms): " + ", ".join(f"{k} {v / 1000:.2f}" for k, v in sums.items()) + \
        f", total {total / 1000:.2f}"
    fla_line = "fla kernels (ms in all, calls): " + ", ".join(
        f"{k} {v[0] / 1000:.2f} ({v[1]})" for k, v in sorted(fla_kernels.items(), key=lambda kv: -kv[1][0]))
    return line, (fla_line if fla_kernels else None)

