#!/usr/bin/env python3
"""Reveals the summation tree that F.linear (MKL sgemm, fp32 CPU, 16 threads as the fixtures'
reference ran it) uses for each output of a given shape, the FPRev way: with x = 1 and one weight
row holding +2^40 at input i, -2^40 at input j and 1 elsewhere, the output is K minus the number of
inputs under the lowest common node of i and j in the summation tree (the ones summed inside it
are absorbed by the big values, which then cancel). Reference tooling for the device machine, not
product code.

Writes OUT/sum_order.bin (uint16) and OUT/sum_order.json: for each shape (M, N, K) and each of
F.linear(x, w) and F.linear(x, w, zeros), a K x K matrix of LCA sizes (0 on the diagonal) read from
row 0, and whether every row and every column position agreed (the tree is the same for each).

usage: probe_sum_order.py OUT_DIR [M,N,K ...]
"""
import json, os, sys

import numpy as np
import torch
import torch.nn.functional as F

torch.set_num_threads(16)
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
shapes = [tuple(int(v) for v in s.split(",")) for s in sys.argv[2:]] or [(4, 128, 128), (4, 32, 128)]
big = 2.0 ** 40
blobs, index, at = [], [], 0
for (M, N, K) in shapes:
    pairs = [(i, j) for i in range(K) for j in range(i + 1, K)]
    for bias in (False, True):
        lca = np.zeros((K, K), dtype=np.uint16)
        consistent = True
        x = torch.ones(M, K)
        b = torch.zeros(N) if bias else None
        # Each call holds N pairs, one per weight row; every pair also lands on a second column
        # position in another call (the shifted pass), which checks that the tree does not
        # depend on the output's position.
        for shift in (0, N // 2 + 1):
            order = pairs[shift:] + pairs[:shift]
            for start in range(0, len(order), N):
                chunk = order[start:start + N]
                w = torch.ones(N, K)
                for r, (i, j) in enumerate(chunk):
                    w[r, i], w[r, j] = big, -big
                y = F.linear(x, w, b)
                rows_agree = bool((y == y[0:1]).all())
                consistent &= rows_agree
                for r, (i, j) in enumerate(chunk):
                    size = K - int(round(float(y[0, r])))
                    if shift == 0:
                        lca[i, j] = lca[j, i] = size
                    elif lca[i, j] != size:
                        consistent = False
        a = lca.reshape(-1)
        index.append({"M": M, "N": N, "K": K, "bias": bias, "offset": at, "consistent": consistent})
        blobs.append(a)
        at += a.size
        print("shape", M, N, K, "bias", bias, "consistent", consistent, flush=True)
np.concatenate(blobs).tofile(os.path.join(out, "sum_order.bin"))
json.dump({"torch": torch.__version__, "threads": torch.get_num_threads(), "probes": index},
          open(os.path.join(out, "sum_order.json"), "w"), indent=0)
