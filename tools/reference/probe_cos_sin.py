#!/usr/bin/env python3
"""Probes torch.cos / torch.sin on CPU in fp32 as the fixtures' reference ran them (16 threads),
to check stave's transcription of the kernels behind them (MKL VML vmsCos / vmsSin, HA) for the
RoPE tables. Reference tooling for the device machine, not product code.

Writes float32 triples (x, torch.cos(x), torch.sin(x)) to OUT/cos_sin_probe_{a,b,c,d}.bin:
  a: 250k floats uniform in [-10000, 10000] (the kernels' main path),
  b: 250k floats with uniformly random bit patterns, |x| <= 10000 (every binade),
  c: the RoPE angles fl(pos * inv_freq) for pos < 16384 and the inverse frequencies of
     head_dim 64/128/256 with theta 1e4 / 1e6 / 1e7 (deduplicated, at most 250k),
  d: the floats among 800k random bit patterns with 10000 < |x| < 1e6 (the large-argument
     path; 20770 on the recorded run),
and OUT/cos_sin_sample.bin: the first 4000 triples of each set (the test's data), plus
OUT/cos_sin_probe.json: build information and position dependence.

usage: probe_cos_sin.py OUT_DIR
"""
import json, os, sys

import numpy as np
import torch

torch.set_num_threads(16)
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
g = torch.Generator().manual_seed(12)
n = 250_000
a = (torch.rand(n, generator=g, dtype=torch.float64) * 20000 - 10000).float()


def random_bits(count, lo, hi):
    bits = torch.randint(0, 1 << 31, (count * 8,), generator=g, dtype=torch.int64).to(torch.int32)
    v = bits.view(torch.float32)
    v = v[torch.isfinite(v) & (v.abs() > lo) & (v.abs() <= hi)]
    v = torch.where(torch.rand(v.shape, generator=g) < 0.5, v, -v)
    return v[:count].contiguous()


b = random_bits(n, 0.0, 10000.0)
angles = []
pos = torch.arange(16384, dtype=torch.float32)
for dim in (64, 128, 256):
    for theta in (1e4, 1e6, 1e7):
        inv = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
        angles.append((pos[:, None] * inv[None, :]).reshape(-1))
c = torch.unique(torch.cat(angles))
c = c[torch.randperm(c.numel(), generator=g)][:n].contiguous()
d = random_bits(100_000, 10000.0, 1e6)

sets = {"a": a, "b": b, "c": c, "d": d}
sample = []
for name, x in sets.items():
    t = np.stack([x.numpy(), torch.cos(x).numpy(), torch.sin(x).numpy()], axis=1).astype(np.float32)
    t.tofile(os.path.join(out, f"cos_sin_probe_{name}.bin"))
    sample.append(t[:4000])
np.concatenate(sample).tofile(os.path.join(out, "cos_sin_sample.bin"))

x = torch.cat(list(sets.values())).contiguous()
yc, ys = torch.cos(x), torch.sin(x)
info = {
    "torch": torch.__version__,
    "mkl": torch.backends.mkl.is_available(),
    "cpu_capability": torch.backends.cpu.get_cpu_capability(),
    "threads": torch.get_num_threads(),
    "sizes": {k: int(v.numel()) for k, v in sets.items()},
}
diff = {}
for name, sl in (("shift1", slice(1, 4097)), ("size31", slice(0, 31)), ("size100", slice(0, 100))):
    diff[name] = int((torch.cos(x[sl].clone()) != yc[sl]).sum() + (torch.sin(x[sl].clone()) != ys[sl]).sum())
torch.set_num_threads(1)
diff["one_thread"] = int((torch.cos(x) != yc).sum() + (torch.sin(x) != ys).sum())
info["position_dependence"] = diff
json.dump(info, open(os.path.join(out, "cos_sin_probe.json"), "w"), indent=1)
print(json.dumps(info))
