"""Causal attention at the Clef shapes through each of PyTorch's SDPA backends (flash, cuDNN,
memory-efficient), for comparison with stave's kernels (`bench_cuda_attention`) on the same GPU.

BF16 q [1, heads, T, 256], k and v [1, 4, T, 256] (GQA), causal, scale 1/16; CUDA events around
each call, median of 20 after 3 warm-ups. TFLOP/s counts the causal work as bench_cuda_attention
does: 4 · d · heads · T (T + 1) / 2. A backend that refuses the shape prints why.

    python3 tools/reference/sdpa_backends.py [TOKENS ...]   (default 2048 8192; 27B: 24 heads, 9B: 16)
"""
import statistics
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def time_call(fn, reps=20):
    for _ in range(3):
        fn()
    ms = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        ms.append(a.elapsed_time(b))
    return statistics.median(ms)


def main():
    lengths = [int(t) for t in sys.argv[1:]] or [2048, 8192]
    print(f"torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, {torch.cuda.get_device_name()}")
    d, kv = 256, 4
    for model, heads in (("27b", 24), ("9b", 16)):
        for t in lengths:
            g = torch.Generator(device="cuda").manual_seed(t)
            q = torch.randn(1, heads, t, d, device="cuda", dtype=torch.bfloat16, generator=g)
            k = torch.randn(1, kv, t, d, device="cuda", dtype=torch.bfloat16, generator=g)
            v = torch.randn(1, kv, t, d, device="cuda", dtype=torch.bfloat16, generator=g)
            flops = 4.0 * d * heads * t * (t + 1) / 2
            # A backend that does not take GQA runs on k and v repeated to every query head (the
            # same work; the line says so).
            ke, ve = k.repeat_interleave(heads // kv, dim=1), v.repeat_interleave(heads // kv, dim=1)
            for name, backend in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION),
                                  ("efficient", SDPBackend.EFFICIENT_ATTENTION)):
                for form, (kk, vv, gqa) in (("gqa", (k, v, True)), ("k/v repeated", (ke, ve, False))):
                    def call():
                        with sdpa_kernel(backend):
                            return F.scaled_dot_product_attention(q, kk, vv, is_causal=True, scale=1.0 / 16,
                                                                  enable_gqa=gqa)
                    try:
                        ms = time_call(call)
                        print(f"{model} T={t} {name} ({form}): {ms:.3f} ms, {flops / ms / 1e9:.0f} TFLOP/s, "
                              f"16 layers {16 * ms:.2f} ms")
                        break
                    except Exception as e:  # a backend that does not take the shape says so
                        print(f"{model} T={t} {name} ({form}): not run ({str(e).splitlines()[0][:160]})")


if __name__ == "__main__":
    main()
