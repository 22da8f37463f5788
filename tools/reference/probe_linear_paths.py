#!/usr/bin/env python3
"""Maps which summation order F.linear (MKL sgemm, fp32 CPU, 16 threads as the fixtures' reference
ran it) takes for each (M, N, K): a plain FMA chain over k, MKL's few-row kernel (16 k-lanes, see
ref::torch_order::gemm_dot_few_rows), or something else (k split in blocks, gemv). Each candidate is
evaluated with numpy in float64-then-float32 steps (an FMA but for rare double roundings), and a
path is named when at least 99% of the outputs equal it bit for bit. Also records FPRev rows (see
probe_sum_order.py) for long K: the LCA sizes of the pairs (0, j), (j, j + 1) and (j, K - 1).
Reference tooling for the device machine, not product code.

Writes OUT/linear_paths.json.

usage: probe_linear_paths.py OUT_DIR
"""
import json, os, sys

import numpy as np
import torch
import torch.nn.functional as F

torch.set_num_threads(16)
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
g = torch.Generator().manual_seed(33)
f32, f64 = np.float32, np.float64


def fma(a, b, c):
    return (a.astype(f64) * b.astype(f64) + c.astype(f64)).astype(f32)


def chain(x, w):
    acc = np.zeros((x.shape[0], w.shape[0]), f32)
    for k in range(x.shape[1]):
        acc = fma(x[:, k:k + 1], w[None, :, k], acc)
    return acc


def few_rows(x, w):
    M, K = x.shape
    lanes = np.zeros((M, w.shape[0], 16), f32)
    kb = K - K % 16
    for k in range(0, kb, 16):
        lanes = fma(x[:, None, k:k + 16], w[None, :, k:k + 16], lanes)
    q = [((lanes[..., r] + lanes[..., r + 4]) + lanes[..., r + 8]) + lanes[..., r + 12] for r in range(4)]
    s = (q[0] + q[1]) + (q[2] + q[3])
    for k in range(kb, K):
        s = fma(x[:, k:k + 1], w[None, :, k], s)
    return s


paths = []
Ks = list(range(16, 1025, 16)) + [40, 72, 136, 200, 264, 520]
for K in Ks:
    for N in (32, 128, 512):
        w = torch.randn(N, K, generator=g) * (1.0 / K ** 0.5)
        x = torch.randn(24, K, generator=g)
        wn, xn = w.numpy(), x.numpy()
        cands = (("chain", chain(xn, wn)), ("few_rows", few_rows(xn, wn)))  # row m's value is M's too
        for M in range(2, 25):
            y = F.linear(x[:M], w).numpy()
            name = "other"
            for cand, v in cands:
                if (v[:M] == y).mean() >= 0.99:
                    name = cand
                    break
            paths.append({"M": M, "N": N, "K": K, "path": name})
    print("K", K, " ".join(p["path"][0] for p in paths[-69:]), flush=True)

big = 2.0 ** 40
fprev = []
for (M, N, K) in ((32, 64, 1024), (32, 64, 1000), (32, 64, 800), (32, 64, 1536), (32, 64, 2048), (4, 64, 2048)):
    pairs = [(0, j) for j in range(1, K)] + [(j, j + 1) for j in range(1, K - 1)] + [(j, K - 1) for j in range(1, K - 1)]
    sizes = []
    x = torch.ones(M, K)
    for start in range(0, len(pairs), N):
        chunk = pairs[start:start + N]
        w = torch.ones(N, K)
        for r, (i, j) in enumerate(chunk):
            w[r, i], w[r, j] = big, -big
        y = F.linear(x, w)
        sizes += [K - int(round(float(y[0, r]))) for r in range(len(chunk))]
    fprev.append({"M": M, "N": N, "K": K, "pairs": pairs, "lca": sizes})
    print("fprev", M, N, K, flush=True)
json.dump({"torch": torch.__version__, "threads": torch.get_num_threads(), "paths": paths, "fprev": fprev},
          open(os.path.join(out, "linear_paths.json"), "w"))
