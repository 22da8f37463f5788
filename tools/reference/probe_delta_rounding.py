#!/usr/bin/env python3
"""Where the chunked gated delta rule's BF16 roundings cost precision: numpy emulation of the
chunk form in src/backends/cuda/gated_delta_chunk.cu (the WY / UT transform, chunks of 64,
d_k = d_v = 128), in fp64 except at the points the kernels round an operand to BF16, against the
per-token recurrence in fp64. Prints the relative error of the output, ||o - o_ref|| / ||o_ref||,
with no rounding, with every rounding, with one at a time and with all but one, and with every
point held as FP16, as a BF16 hi + lo pair (the three-product split) or as fp32 instead, and the
per-token recurrence computed in fp32 for scale. Analysis
tooling, not product code; needs only numpy (Debian's python3-numpy).

The rounding points (names as printed):
  qk    q̂ and k̂ after the L2 norm (qk_norm_kernel's BF16 output)
  T     (I + A)^-1 as the operand of W = T X and U = T (β v)
  X     β k̂ exp(G), the other operand of W
  W     W itself (BF16 scratch for the sequential pass)
  v     β v, the operand of U
  S     the state as the operand of v_new = U - W S
  vnew  v_new (BF16 scratch for the output kernel)
  qg    q̂ exp(G), the operand of the inter-chunk output product
  Sc    the chunk's starting state (BF16 scratch for the output kernel)
  P     the intra-chunk scores (q̂ k̂ᵀ masked and decayed) as an operand
  vupd  v_new scaled by exp(G_last - G), the operand of the state update

Inputs: random unit q (scaled by d^-1/2) and k, v ~ N(0, 1), g ~ -U(0.01, 0.3), β = sigmoid(N(0, 1)).

usage: probe_delta_rounding.py [TOKENS (512)] [SEED (1)]
"""
import sys

import numpy as np

D, C = 128, 64
POINTS = ["qk", "T", "X", "W", "v", "S", "vnew", "qg", "Sc", "P", "vupd"]


def bf16(x):
    """Round to the nearest BF16, ties to even (as __float2bfloat16), returned as fp64."""
    b = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    r = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) << 16
    return r.astype(np.uint32).view(np.float32).astype(np.float64)


def fp16(x):
    return np.asarray(x, dtype=np.float16).astype(np.float64)


def fp32(x):
    return np.asarray(x, dtype=np.float32).astype(np.float64)


def bf16_pair(x):
    """hi + lo in BF16: what a product keeps with hi·hi' + hi·lo' + lo·hi' (lo·lo' is below it)."""
    hi = bf16(x)
    return hi + bf16(np.asarray(x, dtype=np.float64) - hi)


def inputs(rng, T):
    q, k, v = rng.standard_normal((T, D)), rng.standard_normal((T, D)), rng.standard_normal((T, D))
    q /= np.linalg.norm(q, axis=1, keepdims=True) * np.sqrt(D)
    k /= np.linalg.norm(k, axis=1, keepdims=True)
    g = -rng.uniform(0.01, 0.3, T)
    beta = 1.0 / (1.0 + np.exp(-rng.standard_normal(T)))
    return q, k, v, g, beta


def recurrent(q, k, v, g, beta, dtype=np.float64):
    q, k, v, g, beta = (np.asarray(x, dtype=dtype) for x in (q, k, v, g, beta))
    S, o = np.zeros((D, D), dtype=dtype), np.zeros_like(v)
    for t in range(len(q)):
        S *= np.exp(g[t])
        S += beta[t] * np.outer(k[t], v[t] - S.T @ k[t])
        o[t] = S.T @ q[t]
    return o


def chunked(q, k, v, g, beta, rounded, rnd):
    r = lambda name: rnd if name in rounded else (lambda x: np.asarray(x, dtype=np.float64))
    qn, kn = r("qk")(q), r("qk")(k)
    S, o = np.zeros((D, D)), np.zeros_like(v)
    for t0 in range(0, len(q), C):
        sl = slice(t0, min(len(q), t0 + C))
        n = sl.stop - sl.start
        K, Q, V, G, B = kn[sl], qn[sl], v[sl], np.cumsum(g[sl]), beta[sl]
        A = np.tril(B[:, None] * (K @ K.T) * np.exp(G[:, None] - G[None, :]), -1)
        T = r("T")(np.linalg.inv(np.eye(n) + A))
        W = r("W")(T @ r("X")(B[:, None] * K * np.exp(G)[:, None]))
        U = T @ r("v")(B[:, None] * V)
        vnew = r("vnew")(U - W @ r("S")(S))
        P = np.tril(Q @ K.T) * np.exp(G[:, None] - G[None, :])
        o[sl] = r("qg")(Q * np.exp(G)[:, None]) @ r("Sc")(S) + r("P")(P) @ vnew
        S = np.exp(G[-1]) * S + K.T @ r("vupd")(vnew * np.exp(G[-1] - G)[:, None])
    return o


def main():
    T = int(sys.argv[1]) if len(sys.argv) > 1 else 512
    rng = np.random.default_rng(int(sys.argv[2]) if len(sys.argv) > 2 else 1)
    x = inputs(rng, T)
    ref = recurrent(*x)
    err = lambda rounded, rnd=bf16: np.linalg.norm(chunked(*x, rounded, rnd) - ref) / np.linalg.norm(ref)
    print(f"{T} tokens: relative error of the output against the fp64 recurrence")
    print(f"  chunk form, no rounding      {err(set()):.2e}")
    print(f"  every point in BF16          {err(set(POINTS)):.2e}")
    for p in POINTS:
        print(f"  only {p:5s} in BF16 {err({p}):.2e}   all but {p:5s} {err(set(POINTS) - {p}):.2e}")
    print(f"  every point in FP16          {err(set(POINTS), fp16):.2e}")
    print(f"  every point a BF16 hi + lo   {err(set(POINTS), bf16_pair):.2e}")
    # STAVE_CUDA_DELTA_STATE=whole-out (the default since 2026-12-07): the register pass multiplies the split q̂ by the split
    # state and scales the fp32 sums by exp(G), so q̂ exp(G) is never rounded (no "qg" point).
    print(f"  the same, exp(G) after the inter-chunk product (whole-out) "
          f"{err(set(POINTS) - {'qg'}, bf16_pair):.2e}")
    print(f"  every point in fp32          {err(set(POINTS), fp32):.2e}")
    rec32 = recurrent(*x, dtype=np.float32).astype(np.float64)
    print(f"  (the recurrence in fp32      {np.linalg.norm(rec32 - ref) / np.linalg.norm(ref):.2e})")


if __name__ == "__main__":
    main()
