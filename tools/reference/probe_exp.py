#!/usr/bin/env python3
"""Probes torch.exp on CPU in fp32 as the fixtures' reference ran it (16 threads), to identify the
routine behind it (MKL VML vsExp, SLEEF, ATen's own) for stave's exact path. Reference tooling
for the device machine, not product code.

Writes float32 pairs (x, torch.exp(x)) to
  * OUT/exp_probe_a.bin: 1.9M floats uniform in [-24, 0.5] (the range of the Gated DeltaNet
    decays and softmax inputs),
  * OUT/exp_probe_b.bin: 1.9M floats with uniformly random bit patterns in [-104, 89] (every
    binade),
and OUT/exp_probe.json: torch's build configuration and whether exp depends on where an element
sits in its tensor (vector body vs scalar tail, thread split).

usage: probe_exp.py OUT_DIR
"""
import json, os, sys

import numpy as np
import torch

torch.set_num_threads(16)
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
g = torch.Generator().manual_seed(11)
n = 1_900_000
a = (torch.rand(n, generator=g, dtype=torch.float64) * 24.5 - 24).float()
bits = torch.randint(0, 1 << 31, (4 << 20,), generator=g, dtype=torch.int64).to(torch.int32)
b = bits.view(torch.float32)
b = b[torch.isfinite(b)]
b = torch.where(torch.rand(b.shape, generator=g) < 0.5, b, -b)
b = b[(b > -104) & (b < 89)][:n]
x = torch.cat([a, b]).contiguous()
y = torch.exp(x)
pairs = np.stack([x.numpy(), y.numpy()], axis=1).astype(np.float32)
pairs[:n].tofile(os.path.join(out, "exp_probe_a.bin"))
pairs[n:].tofile(os.path.join(out, "exp_probe_b.bin"))

info = {
    "torch": torch.__version__,
    "mkl": torch.backends.mkl.is_available(),
    "cpu_capability": torch.backends.cpu.get_cpu_capability(),
    "threads": torch.get_num_threads(),
    "config": torch.__config__.show(),
    "pairs": int(x.numel()),
}
# Position dependence: the same values at other offsets and in small tensors.
diff = {}
for name, t in (("shift1", torch.exp(x[1:4097]) != y[1:4097]),
                ("size31", torch.exp(x[:31].clone()) != y[:31]),
                ("size100", torch.exp(x[:100].clone()) != y[:100]),
                ("size4096", torch.exp(x[:4096].clone()) != y[:4096])):
    diff[name] = int(t.sum())
torch.set_num_threads(1)
diff["one_thread"] = int((torch.exp(x) != y).sum())
info["position_dependence"] = diff
json.dump(info, open(os.path.join(out, "exp_probe.json"), "w"), indent=1)
print(json.dumps({k: v for k, v in info.items() if k != "config"}))
