#!/usr/bin/env python3
"""Dumps the reference's per-op intermediates (CPU, fp32, exactly as make_reference.py runs it) for
stave's exact-path work: every module's inputs/outputs for the first layers, the vision tower and
the head, every decoder layer's output, and op probes (elementwise, reductions, matmuls) with their
inputs. Reference tooling for the device machine, not product code.

usage: dump_intermediates.py --fixtures DIR --out DIR
"""
import argparse, inspect, json, os, sys, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_reference as mr  # noqa: E402  (sets threads, grad off, as the fixtures' run)
import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from tokenizers import Tokenizer


def probes():
    g = torch.Generator().manual_seed(7)
    P = {}
    for n in (4096, 31, 100, 48, 80, 1404):  # 48, 80, 1404: tell 16- from 32-wide vector loops
        x = (torch.rand(n, generator=g) * 24 - 12).float()
        P[f"ew{n}/x"] = x
        P[f"ew{n}/exp"] = x.exp()
        P[f"ew{n}/exp_neg"] = (-x.abs()).exp()
        P[f"ew{n}/log1p"] = x.abs().log1p()
        P[f"ew{n}/tanh"] = x.tanh()
        P[f"ew{n}/sigmoid"] = x.sigmoid()
        P[f"ew{n}/silu"] = F.silu(x)
        P[f"ew{n}/softplus"] = F.softplus(x)
        P[f"ew{n}/gelu_tanh"] = F.gelu(x, approximate="tanh")
        P[f"ew{n}/gelu"] = F.gelu(x)
        P[f"ew{n}/rsqrt"] = x.abs().rsqrt()
        P[f"ew{n}/sqrt"] = x.abs().sqrt()
        P[f"ew{n}/cos"] = x.cos()
        P[f"ew{n}/sin"] = x.sin()
    # RoPE arguments as HF forms them (position · inv_freq in fp32) for torch.cos / torch.sin.
    pos = torch.arange(20000, dtype=torch.float32)
    for j, e in enumerate((0.0, 0.25, 0.5, 0.75, 0.125, 0.375)):
        inv = 1.0 / (1e7 ** torch.tensor([e], dtype=torch.float32))
        x = pos * inv
        P[f"rope{j}/x"] = x
        P[f"rope{j}/cos"] = x.cos()
        P[f"rope{j}/sin"] = x.sin()
    for (M, N, K) in ((5, 7, 32), (300, 160, 32), (300, 32, 64), (300, 32, 96), (64, 64, 16), (257, 48, 1536),
                      (300, 64, 128), (33, 31, 33)):
        x = torch.randn(M, K, generator=g)
        w = torch.randn(N, K, generator=g) * 0.1
        b = torch.randn(N, generator=g)
        P[f"lin{M}x{N}x{K}/x"] = x
        P[f"lin{M}x{N}x{K}/w"] = w
        P[f"lin{M}x{N}x{K}/b"] = b
        P[f"lin{M}x{N}x{K}/y"] = F.linear(x, w)
        P[f"lin{M}x{N}x{K}/yb"] = F.linear(x, w, b)
        P[f"lin{M}x{N}x{K}/y3"] = F.linear(x[None], w)[0]
        P[f"lin{M}x{N}x{K}/yb3"] = F.linear(x[None], w, b)[0]
    a = torch.randn(1, 6, 5, 64, 16, generator=g)
    c = torch.randn(1, 6, 5, 64, 16, generator=g)
    P["bmm/a"], P["bmm/c"] = a, c
    P["bmm/act"] = a @ c.transpose(-1, -2)
    m = torch.randn(1, 6, 5, 64, 64, generator=g)
    P["bmm/m"] = m
    P["bmm/mc"] = m @ c
    s = torch.randn(1, 6, 16, 16, generator=g)
    P["bmm/s"] = s
    P["bmm/a0s"] = a[:, :, 0] @ s
    P["bmm/a0ts"] = a[:, :, 0].transpose(-1, -2) @ c[:, :, 0]
    L = torch.tril(torch.randn(1, 6, 5, 64, 64, generator=g) * 0.3, -1) + torch.eye(64)
    P["tri/L"] = L
    P["tri/x"] = torch.linalg.solve_triangular(L, c, upper=False, unitriangular=True)
    for d in (16, 32, 64, 96, 128, 1283, 48):
        x = torch.randn(64, d, generator=g)
        P[f"red{d}/x"] = x
        P[f"red{d}/sum"] = x.sum(-1)
        P[f"red{d}/mean"] = x.mean(-1, keepdim=True)
        P[f"red{d}/pow2mean"] = x.pow(2).mean(-1, keepdim=True)
        P[f"red{d}/sqsum"] = (x * x).sum(-1, keepdim=True)
        P[f"red{d}/softmax"] = x.softmax(-1)
        P[f"red{d}/softmax32"] = torch.softmax(x, dim=-1, dtype=torch.float32)
        P[f"red{d}/layernorm"] = F.layer_norm(x, (d,))
        P[f"red{d}/normalize"] = F.normalize(x, dim=-1)
        P[f"red{d}/cumsum"] = x.cumsum(-1)
        P[f"red{d}/colsum"] = x.sum(0)
        P[f"red{d}/colmean"] = x.mean(0)
    return P


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fixtures", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--cases", default="000-docs-example,017-image-one")
    ap.add_argument("--detail-layers", default="0,1,2,3",
                    help="decoder layers whose modules are dumped in detail (comma list, or 'all')")
    ap.add_argument("--variants", default="bf16,mxfp4")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    t0 = time.time()
    import transformers
    from transformers.models.qwen3_5 import modeling_qwen3_5 as mq
    info = {"torch": torch.__version__, "transformers": transformers.__version__, "threads": torch.get_num_threads(),
            "cpu_count": os.cpu_count(), "capability": torch.backends.cpu.get_cpu_capability(),
            "mkldnn": torch.backends.mkldnn.is_available(), "config": torch.__config__.show(),
            "parallel": torch.__config__.parallel_info()}
    json.dump(info, open(os.path.join(a.out, "info.json"), "w"), indent=1)
    import shutil
    shutil.copy(inspect.getsourcefile(mq), os.path.join(a.out, "modeling_qwen3_5.py"))
    save_file({k: v.contiguous() for k, v in probes().items()}, os.path.join(a.out, "probes.safetensors"))
    print("probes", time.time() - t0, flush=True)

    pub = os.path.join(a.fixtures, "public")
    tok = Tokenizer.from_file(os.path.join(pub, "model-bf16", "tokenizer.json"))
    ip = mr.image_processor_for(os.path.join(pub, "model-bf16"))
    detail_cases = a.cases.split(",")
    layer_out = {}
    every_layer = a.detail_layers == "all"
    detail_layers = set(a.detail_layers.split(","))
    # The gated delta rule and conv1d wrappers count calls per case: one per GDN layer.
    max_calls = 1 << 30 if every_layer else 4
    for variant, mx in (("bf16", None), ("mxfp4", os.path.join(pub, "model-mxfp4"))):
        if variant not in a.variants.split(","):
            continue
        model = mr.load_model(os.path.join(pub, "model-bf16"), mx)
        head = mr.load_head(os.path.join(pub, "model-" + variant))
        rec = {"on": False, "case": "", "store": {}, "calls": {}}

        def save(name, t):
            if isinstance(t, torch.Tensor):
                rec["store"][name] = t.detach().contiguous().clone() if t.dtype != torch.float64 else t.float()

        def hook(name, detail):
            def h(mod, args, out):
                full = f"{rec['case']}/{name}"
                n = rec["calls"].get(full, 0)
                rec["calls"][full] = n + 1
                key = f"{full}#{n}"
                if name.startswith("model.model.language_model.layers.") and name.count(".") == 4:
                    layer_out[f"{variant}/{key}"] = (out[0] if isinstance(out, tuple) else out).detach().clone()
                if not (rec["on"] and detail):
                    return
                for i, x in enumerate(args):
                    save(f"{key}/in{i}", x)
                o = out[0] if isinstance(out, tuple) else out
                save(f"{key}/out", o)
                if isinstance(out, tuple):  # e.g. the rotary embedding's (cos, sin)
                    for i, x in enumerate(out[1:], 1):
                        save(f"{key}/out{i}", x)
            return h

        for name, mod in model.named_modules():
            in_layer = "language_model.layers." in name
            detail = ((in_layer and (every_layer or name.split("language_model.layers.")[1].split(".")[0] in
                                     detail_layers)) or ".visual" in name or "language_model.norm" in name
                      or "language_model.rotary_emb" in name)
            mod.register_forward_hook(hook(name, detail))
        for name, mod in head.named_modules():
            mod.register_forward_hook(hook("head." + name, True))
        orig_chunk, orig_conv = mq.torch_chunk_gated_delta_rule, mq.causal_conv1d_fn

        def count(tag):
            full = f"{rec['case']}/{tag}"
            n = rec["calls"].get(full, 0)
            rec["calls"][full] = n + 1
            return full, n

        def chunk_wrap(*args, **kw):
            out = orig_chunk(*args, **kw)
            if rec["on"]:
                full, n = count("gdr")
                if n < max_calls:
                    for i, x in enumerate(args[:3]):
                        save(f"{full}#{n}/in{i}", x)
                    save(f"{full}#{n}/g", kw.get("g"))
                    save(f"{full}#{n}/beta", kw.get("beta"))
                    save(f"{full}#{n}/out", out[0])
            return out

        def conv_wrap(*args, **kw):
            out = orig_conv(*args, **kw)
            if rec["on"]:
                full, n = count("conv")
                if n < max_calls:
                    save(f"{full}#{n}/in0", args[0])
                    save(f"{full}#{n}/out", out)
            return out
        orig_rope, orig_attn = mq.apply_rotary_pos_emb, mq.eager_attention_forward

        def rope_wrapper(orig, tag):  # apply_rotary_pos_emb and its vision twin
            def wrap(q, k, cos, sin, *args, **kw):
                out = orig(q, k, cos, sin, *args, **kw)
                if rec["on"]:
                    full, n = count(tag)
                    if n < max_calls:
                        for name, x in (("q", q), ("k", k), ("cos", cos), ("sin", sin), ("q_out", out[0]),
                                        ("k_out", out[1])):
                            save(f"{full}#{n}/{name}", x)
                return out
            return wrap

        def attn_wrap(module, query, key, value, attention_mask, *args, **kw):
            out = orig_attn(module, query, key, value, attention_mask, *args, **kw)
            if rec["on"]:
                full, n = count("attn")
                if n < max_calls:
                    for name, x in (("q", query), ("k", key), ("v", value), ("mask", attention_mask),
                                    ("out", out[0]), ("weights", out[1])):
                        if isinstance(x, torch.Tensor) and x.dtype == torch.bool:
                            x = x.float()
                        save(f"{full}#{n}/{name}", x)
            return out
        orig_vrope = getattr(mq, "apply_rotary_pos_emb_vision", None)
        mq.apply_rotary_pos_emb, mq.eager_attention_forward = rope_wrapper(orig_rope, "rope"), attn_wrap
        if orig_vrope is not None:
            mq.apply_rotary_pos_emb_vision = rope_wrapper(orig_vrope, "vrope")
        mq.torch_chunk_gated_delta_rule, mq.causal_conv1d_fn = chunk_wrap, conv_wrap
        for case in sorted(os.listdir(os.path.join(pub, "cases"))):
            d = os.path.join(pub, "cases", case)
            want = json.load(open(os.path.join(d, f"expected-{variant}.json")))
            if "error" in want:
                continue
            rec["case"] = case
            rec["on"] = case in detail_cases
            request = json.load(open(os.path.join(d, "request.json")))
            got, hidden, _ = mr.run_case(model, head, tok, ip, request, want["max_length"])
            layer_out[f"{variant}/{case}/hidden"] = hidden
            print(variant, case, "logit diff", max(mr.max_diff(x, y) for x, y in zip(got["logits"], want["logits"])),
                  time.time() - t0, flush=True)
        mq.torch_chunk_gated_delta_rule, mq.causal_conv1d_fn = orig_chunk, orig_conv
        mq.apply_rotary_pos_emb, mq.eager_attention_forward = orig_rope, orig_attn
        if orig_vrope is not None:
            mq.apply_rotary_pos_emb_vision = orig_vrope
        save_file({k: v.contiguous() for k, v in rec["store"].items()}, os.path.join(a.out, f"detail-{variant}.safetensors"))
    save_file({k: v.float().contiguous() for k, v in layer_out.items()}, os.path.join(a.out, "layers.safetensors"))
    print("done", time.time() - t0, flush=True)


if __name__ == "__main__":
    main()
