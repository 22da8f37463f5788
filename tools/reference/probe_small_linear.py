#!/usr/bin/env python3
"""Probes F.linear on CPU in fp32 with few rows (as the vision merger's linears run on small
images: 4 rows on fixture case 017), as the fixtures' reference ran it (16 threads), to find the
summation order MKL's sgemm uses there. Reference tooling for the device machine, not product code.

Writes OUT/small_linear.bin (float32 arrays back to back) and OUT/small_linear.json (for each
probe: M, N, K and the offsets, in floats, of x [M, K], w [N, K], b [N], y = F.linear(x, w, b)
[M, N] and y0 = F.linear(x, w) [M, N]).

usage: probe_small_linear.py OUT_DIR
"""
import json, os, sys

import numpy as np
import torch
import torch.nn.functional as F

torch.set_num_threads(16)
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
g = torch.Generator().manual_seed(21)
shapes = [(128, 128), (32, 128), (48, 32), (32, 48), (64, 256), (256, 256), (96, 640), (384, 512), (1024, 1024)]
rows = list(range(1, 17)) + [20, 24, 31, 32, 33, 64]
blobs, index, at = [], [], 0


def put(t):
    global at
    a = t.contiguous().numpy().astype(np.float32).reshape(-1)
    blobs.append(a)
    at += a.size
    return at - a.size


for (N, K) in shapes:  # one weight and bias per shape, shared by its row counts
    w = torch.randn(N, K, generator=g) * (1.0 / K ** 0.5)
    b = torch.randn(N, generator=g) * 0.1
    w_at, b_at = put(w), put(b)
    for M in rows:
        x = torch.randn(M, K, generator=g)
        entry = {"M": M, "N": N, "K": K, "w": w_at, "b": b_at, "x": put(x)}
        entry["y"] = put(F.linear(x, w, b))
        entry["y0"] = put(F.linear(x, w))
        index.append(entry)
np.concatenate(blobs).tofile(os.path.join(out, "small_linear.bin"))
info = {"torch": torch.__version__, "threads": torch.get_num_threads(),
        "capability": torch.backends.cpu.get_cpu_capability(), "probes": index}
json.dump(info, open(os.path.join(out, "small_linear.json"), "w"), indent=0)
print("small_linear probes", len(index), "floats", at)
