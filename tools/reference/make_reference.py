#!/usr/bin/env python3
"""Reference outputs for stave, from transformers (Qwen3_5ForConditionalGeneration, fp32, eager
attention, no fla/causal_conv1d) plus an emulation of Quark's MXFP4 W4A4 numerics.

Reference tooling, not product code: it runs on the GPU machine (which has torch and transformers)
and its outputs are committed under tests/data/. Before producing anything it reproduces the
public reference fixtures (--fixtures DIR/public) — ids, spans, pixel values, hidden states, logits and
responses, BF16 and MXFP4 — so that the new data comes from a verified pipeline.

The joint schema head and encode_record below restate Cloudflare's release code
(joint_schema_model.py) from its published behaviour; they are checked against the fixtures.

usage: make_reference.py --fixtures DIR --alt-bf16 DIR --requests DIR --out DIR
(the MXFP4 variant of the alt model is the Python Quark emulation of the BF16 one, which equals what
`stave synth --format mxfp4` / `stave quantize` write: both are checked against the fixture)
"""
import argparse
import base64
import io
import json
import math
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer

torch.set_grad_enabled(False)
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
torch.set_num_threads(max(1, os.cpu_count() or 1))

SYSTEM = ("Read the complete state and schema. Decide every field jointly. Each answer "
          "must be exactly one of that field's allowed options.")
QUESTION_TYPES = {"noul": 0, "choice": 1, "score": 2}


def log(*a):
    print(*a, flush=True)


# ---------------------------------------------------------------- encode_record (reference semantics)
def render(v):
    if isinstance(v, str):
        return v
    return json.dumps(v, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def question_options(q):
    t = str(q["type"])
    if t == "noul":
        c = {"true": "The proposition is true or the answer is yes.",
             "false": "The proposition is false or the answer is no."}
        c.update(q.get("criteria") or {})
        return [(k, c[k]) for k in ("true", "false")]
    if t == "choice":
        return sorted((str(k), v) for k, v in q["criteria"].items())
    return [(str(i), v) for i, v in enumerate(q["criteria"])]


def validate(request):
    qs = request.get("questions")
    if not isinstance(request.get("model"), str) or "state" not in request:
        raise ValueError("model and state are required")
    if not isinstance(qs, dict) or not qs:
        raise ValueError("at least one question is required")
    for qid, q in qs.items():
        if q.get("type") not in QUESTION_TYPES:
            raise ValueError(f"{qid}: type must be noul, choice, or score")
        if q["type"] != "noul" and not q.get("criteria"):
            raise ValueError(f"{qid}: criteria must not be empty")


def encode_record(tok, record, max_length, media_ids):
    T = lambda s: tok.encode(s, add_special_tokens=False).ids
    schema = T("\n\nSCHEMA FIELDS:\n")
    questions = []
    for i, (qid, q) in enumerate(record["questions"].items()):
        schema += T(f"\nFIELD {i + 1}\nID: {qid}\nTYPE: {q['type']}\nINSTRUCTION: ")
        qs = len(schema)
        ins = q.get("instructions")
        if ins is None or ins == "":
            ins = str(qid)
        schema += T(render(ins))
        qe = len(schema)
        schema += T("\nALLOWED OPTIONS:\n")
        spans, ids = [], []
        for j, (oid, d) in enumerate(question_options(q)):
            schema += T(f"OPTION {j + 1}: ")
            s = len(schema)
            sem = {"option_id": oid}
            if d is not None:
                sem["description"] = d
            schema += T(render(sem))
            spans.append([s, len(schema)])
            ids.append(oid)
            schema += T("\n")
        schema += T("END FIELD\n")
        questions.append({"id": str(qid), "type": QUESTION_TYPES[str(q["type"])], "question_span": [qs, qe],
                          "option_spans": spans, "option_ids": ids})
    prefix = T(f"<|im_start|>system\n{SYSTEM}<|im_end|>\n<|im_start|>user\nSTATE:\n")
    suffix = T("\n<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nJOINT SCHEMA DECISIONS:")
    prefix = prefix + media_ids
    state = T(render(record["state"]))
    fixed = len(prefix) + len(schema) + len(suffix)
    if fixed > max_length:
        raise ValueError(f"schema requires {fixed} tokens before state; maximum is {max_length}")
    state = state[: max_length - fixed]
    off = len(prefix) + len(state)
    for q in questions:
        q["question_span"] = [q["question_span"][0] + off, q["question_span"][1] + off]
        q["option_spans"] = [[a + off, b + off] for a, b in q["option_spans"]]
    return prefix + state + schema + suffix, questions, len(prefix) - len(media_ids)


# ---------------------------------------------------------------- media
def load_image(value):
    from PIL import Image
    if isinstance(value, dict):
        data = base64.b64decode(value["base64"])
    else:
        data = base64.b64decode(value.split(",", 1)[1])
    with Image.open(io.BytesIO(data)) as im:
        return im.convert("RGB")


def encode_media(tok, image_processor, request):
    images = [load_image(x) for x in request.get("images") or []]
    if not images:
        return [], None, None
    out = image_processor(images=images, return_tensors="pt")
    grid = out["image_grid_thw"]
    merge = image_processor.merge_size
    text = "".join("<|vision_start|>" + "<|image_pad|>" * int(g.prod().item() // (merge * merge)) + "<|vision_end|>"
                   for g in grid) + "\n"
    ids = tok.encode(text, add_special_tokens=False).ids
    return ids, out["pixel_values"].float(), grid


# ---------------------------------------------------------------- joint schema head (reference structure)
class EvidenceRoutingLayer(nn.Module):
    def __init__(self, width, heads, feedforward):
        super().__init__()
        self.query_norm = nn.LayerNorm(width)
        self.memory_norm = nn.LayerNorm(width)
        self.attention = nn.MultiheadAttention(width, heads, batch_first=True)
        self.feedforward_norm = nn.LayerNorm(width)
        self.feedforward = nn.Sequential(nn.Linear(width, feedforward), nn.GELU(), nn.Dropout(0.0),
                                         nn.Linear(feedforward, width), nn.Dropout(0.0))

    def forward(self, q, memory):
        routed, _ = self.attention(self.query_norm(q), self.memory_norm(memory), self.memory_norm(memory),
                                   need_weights=False)
        q = q + routed
        return q + self.feedforward(self.feedforward_norm(q))


class JointSchemaHead(nn.Module):
    def __init__(self, hidden_size, width, routing_layers, layers, heads, feedforward, dropout=0.0):
        super().__init__()
        self.hidden_norm = nn.LayerNorm(hidden_size)
        for n in ("memory", "question", "option_question", "global", "option_context", "option_lexical"):
            setattr(self, n + "_projection", nn.Linear(hidden_size, width, bias=False))
        self.type_embedding = nn.Embedding(3, width)
        self.evidence_layers = nn.ModuleList([EvidenceRoutingLayer(width, heads, feedforward)
                                              for _ in range(routing_layers)])
        self.option_summary_norm = nn.LayerNorm(width)
        self.layers = nn.ModuleList([nn.TransformerDecoderLayer(d_model=width, nhead=heads, dim_feedforward=feedforward,
                                                                dropout=0.0, activation="gelu", batch_first=True,
                                                                norm_first=True) for _ in range(layers)])
        self.field_norm = nn.LayerNorm(width)
        self.option_norm = nn.LayerNorm(width)
        self.residual_scorer = nn.Sequential(nn.Linear(width * 4, width), nn.GELU(), nn.Dropout(0.0),
                                             nn.Linear(width, 1))
        self.prior_logit_scale = nn.Parameter(torch.zeros(()))
        self.joint_logit_scale = nn.Parameter(torch.zeros(()))
        self.residual_gate = nn.Parameter(torch.zeros(()))

    def forward(self, hidden, input_ids, questions, lm_head):
        seq = self.hidden_norm(hidden)
        memory = self.memory_projection(seq).unsqueeze(0)
        g = seq[-1]
        qv = torch.stack([seq[a:b].mean(0) for a, b in (q["question_span"] for q in questions)])
        types = torch.tensor([q["type"] for q in questions])
        contexts, lexicals, counts = [], [], []
        for q in questions:
            contexts.append(torch.stack([seq[a:b].mean(0) for a, b in q["option_spans"]]))
            lexicals.append(torch.stack([lm_head[input_ids[a:b]].mean(0) for a, b in q["option_spans"]]))
            counts.append(len(q["option_spans"]))
        R = torch.cat([self.option_context_projection(c) + self.option_lexical_projection(l)
                       + self.option_question_projection(qv[i]).unsqueeze(0)
                       for i, (c, l) in enumerate(zip(contexts, lexicals))]).unsqueeze(0)
        for layer in self.evidence_layers:
            R = layer(R, memory)
        split = list(torch.split(R[0], counts, dim=0))
        base = self.question_projection(qv)
        summaries = []
        for f, opts in zip(base, split):
            w = torch.softmax(opts @ f / math.sqrt(opts.shape[-1]), dim=0)
            summaries.append((w.unsqueeze(-1) * opts).sum(0))
        fields = base + self.option_summary_norm(torch.stack(summaries)) + self.global_projection(g).unsqueeze(0) \
            + self.type_embedding(types)
        fields = fields.unsqueeze(0)
        for layer in self.layers:
            fields = layer(fields, memory)
        fields = self.field_norm(fields[0])
        out = []
        for i, (f, lex, routed) in enumerate(zip(fields, lexicals, split)):
            anchor = F.normalize(qv[i] + g, dim=-1)
            prior = self.prior_logit_scale.clamp(max=math.log(100.0)).exp() * (F.normalize(lex, dim=-1) @ anchor)
            opts = self.option_norm(routed)
            rf = f.unsqueeze(0).expand_as(opts)
            cos = F.cosine_similarity(rf, opts, dim=-1)
            feats = torch.cat([rf, opts, rf * opts, (rf - opts).abs()], dim=-1)
            res = self.residual_scorer(feats).squeeze(-1)
            joint = self.joint_logit_scale.clamp(max=math.log(100.0)).exp() * cos + res
            out.append(prior + torch.sigmoid(self.residual_gate) * joint)
        return out


def load_head(model_dir):
    cfg = json.load(open(os.path.join(model_dir, "joint_head_config.json")))
    head = JointSchemaHead(**cfg)
    head.load_state_dict({k: v.float() for k, v in load_file(os.path.join(model_dir, "joint_head.safetensors")).items()},
                         strict=True)
    return head.eval()


# ---------------------------------------------------------------- answers (systemone_answer)
def answer(q, probs):
    if q["type"] == "noul":
        return {"type": "noul", "noul": round(probs["true"], 4)}
    if q["type"] == "choice":
        opts = [str(o) for o in q["criteria"]]
        choice = max(opts, key=probs.__getitem__)
        return {"type": "choice", "choice": choice, "confidence": round(probs[choice], 4),
                "probabilities": {o: round(probs[o], 4) for o in opts}}
    levels = [str(i) for i in range(len(q["criteria"]))]
    return {"type": "score", "score": round(sum(i * probs[l] for i, l in enumerate(levels)), 4),
            "confidence": round(max(probs[l] for l in levels), 4), "legend": dict(zip(levels, q["criteria"])),
            "probabilities": {l: round(probs[l], 4) for l in levels}}


# ---------------------------------------------------------------- MXFP4 (Quark numerics)
E2M1 = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0])


def pow2(e):
    """2^e for integer-valued float tensors e in [-127, 127], built from bits (exact, 2^-127 is subnormal)."""
    ei = e.to(torch.int64)
    bits = torch.where(ei >= -126, (ei + 127) << 23, torch.full_like(ei, 0x00400000))
    return bits.to(torch.int32).view(torch.float32)


def even_scale(amax):
    bits = amax.contiguous().view(torch.int32).to(torch.int64)
    b = ((bits + 0x00200000) & 0xFF800000).to(torch.int32)
    val = b.view(torch.float32).clone()
    val[amax == 0] = 2.0 ** -126
    e = torch.floor(torch.log2(val)) - 2
    e = torch.where(torch.isinf(val), torch.full_like(e, 127.0), e)
    e = e.clamp(-127, 127)
    return e


def qdq_mxfp4(x):
    shape = x.shape
    k = shape[-1]
    assert k % 32 == 0
    xb = x.reshape(-1, k // 32, 32).float()
    amax = xb.abs().amax(-1, keepdim=True)
    e = even_scale(amax)
    scale = pow2(e)
    q = xb / scale
    a = q.abs()
    step = torch.where(a < 2, torch.tensor(0.5), torch.where(a < 4, torch.tensor(1.0), torch.tensor(2.0)))
    r = torch.clamp(torch.round(a / step) * step, max=6.0)
    r = torch.where(r == 0, torch.zeros_like(r), r * torch.sign(q))
    return (r * scale).reshape(shape)


def dequant_mxfp4(codes, scales):
    lo = (codes & 0x0F).long()
    hi = (codes >> 4).long()
    vals = torch.stack([E2M1[lo], E2M1[hi]], dim=-1).reshape(codes.shape[0], -1)
    s = pow2(scales.to(torch.int64) - 127).repeat_interleave(32, dim=1)
    return vals * s


def check_qdq_vectors(path):
    text = open(path).read().replace("Infinity", '"inf"')
    blocks = json.loads(text)["blocks"]
    for bi, b in enumerate(blocks):
        signed = [v - (1 << 32) if v >= (1 << 31) else v for v in b["input_bits"]]
        x = torch.tensor(signed, dtype=torch.int32).view(torch.float32)
        got = qdq_mxfp4(x.reshape(1, 32))[0]
        want = torch.tensor([float("inf") if v == "inf" else v for v in b["dequant"]], dtype=torch.float32)
        same = (got.view(torch.int32) == want.view(torch.int32)) | (got.isinf() & want.isinf())
        if not bool(same.all()):
            raise SystemExit(f"qdq vector block {bi} differs: {got} vs {want}")
    log(f"qdq: {len(blocks)} blocks bit-exact")


class QdqLinear(nn.Module):
    def __init__(self, weight, bias):
        super().__init__()
        self.weight = nn.Parameter(weight, requires_grad=False)
        self.bias = None if bias is None else nn.Parameter(bias, requires_grad=False)

    def forward(self, x):
        return F.linear(qdq_mxfp4(x), self.weight, self.bias)


# ---------------------------------------------------------------- models
def quantize_language_model(model):
    """Quark MXFP4 of every language-model linear (lm_head and vision excluded), emulated: the
    weight is quantize-dequantized once, the input on every call."""
    modules = dict(model.named_modules())
    n = 0
    for name, mod in list(modules.items()):
        if isinstance(mod, nn.Linear) and name.startswith("model.language_model."):
            parent_name, _, child = name.rpartition(".")
            setattr(modules[parent_name], child, QdqLinear(qdq_mxfp4(mod.weight.data), mod.bias))
            n += 1
    log(f"mxfp4: {n} language-model linears quantized in Python")
    return model


def load_model(bf16_dir, mxfp4_dir=None, quantize=False):
    from transformers import Qwen3_5ForConditionalGeneration
    model = Qwen3_5ForConditionalGeneration.from_pretrained(bf16_dir, dtype=torch.float32,
                                                            attn_implementation="eager").eval()
    if quantize:
        return quantize_language_model(model)
    if mxfp4_dir:
        sd = {}
        for f in sorted(os.listdir(mxfp4_dir)):
            if f.endswith(".safetensors") and f.startswith("model"):
                sd.update(load_file(os.path.join(mxfp4_dir, f)))
        replaced = 0
        modules = dict(model.named_modules())
        for name, mod in list(modules.items()):
            if isinstance(mod, nn.Linear) and (name + ".weight_scale") in sd:
                w = dequant_mxfp4(sd[name + ".weight"], sd[name + ".weight_scale"])
                assert w.shape == mod.weight.shape, (name, w.shape, mod.weight.shape)
                parent_name, _, child = name.rpartition(".")
                setattr(modules[parent_name], child, QdqLinear(w, mod.bias))
                replaced += 1
        params = dict(model.named_parameters())
        for k, v in sd.items():
            if k.endswith("weight_scale") or (k[: -len(".weight")] + ".weight_scale") in sd:
                continue
            if k in params:
                params[k].data.copy_(v.float())
        log(f"mxfp4: {replaced} linears emulated from {mxfp4_dir}")
    return model


def image_processor_for(model_dir):
    from transformers import AutoImageProcessor
    try:
        ip = AutoImageProcessor.from_pretrained(model_dir)
    except Exception as e:  # noqa: BLE001 - a processor_config.json-only folder on an older layout
        log(f"AutoImageProcessor failed on {model_dir} ({e}); building it from processor_config.json")
        cfg = json.load(open(os.path.join(model_dir, "processor_config.json")))["image_processor"]
        import transformers
        ip = getattr(transformers, cfg.pop("image_processor_type"))(**cfg)
    log(f"image processor for {os.path.basename(model_dir)}: {type(ip).__name__} size={getattr(ip, 'size', None)} "
        f"resample={getattr(ip, 'resample', None)}")
    return ip


def run_case(model, head, tok, ip, request, max_length):
    try:
        validate(request)
        media_ids, pixel_values, grid = encode_media(tok, ip, request)
        ids, questions, token_offset = encode_record(tok, request, max_length, media_ids)
    except ValueError as e:
        return {"max_length": max_length, "error": str(e)}, None, None
    input_ids = torch.tensor(ids)[None]
    mask = torch.ones_like(input_ids)
    if pixel_values is None:
        hidden = model.model.language_model(input_ids=input_ids, attention_mask=mask, use_cache=False).last_hidden_state[0]
    else:
        image_id = tok.token_to_id("<|image_pad|>")
        kwargs = {}
        import inspect
        if "mm_token_type_ids" in inspect.signature(model.model.forward).parameters:
            kwargs["mm_token_type_ids"] = (input_ids == image_id).long()
        hidden = model.model(input_ids=input_ids, attention_mask=mask, pixel_values=pixel_values, image_grid_thw=grid,
                             use_cache=False, **kwargs).last_hidden_state[0]
    logits = head(hidden, input_ids[0], questions, model.lm_head.weight)
    answers = {}
    for q, lg in zip(questions, logits):
        probs = dict(zip(q["option_ids"], lg.float().softmax(-1).tolist()))
        answers[q["id"]] = answer(request["questions"][q["id"]], probs)
    exp = {"max_length": max_length,
           "response": {"model": request["model"], "answers": answers,
                        "usage": {"input_tokens": len(ids), "output_tokens": 0}},
           "input_ids": ids, "questions": questions, "logits": [lg.tolist() for lg in logits]}
    if pixel_values is not None:
        n_media = len(media_ids)
        exp["media"] = {"image_grid_thw": grid.tolist(),
                        "mm_token_type_ids": [1 if t == tok.token_to_id("<|image_pad|>") else 0 for t in media_ids],
                        "token_offset": token_offset}
    return exp, hidden.float().contiguous(), pixel_values


def max_diff(a, b):
    a = torch.as_tensor(a, dtype=torch.float64)
    b = torch.as_tensor(b, dtype=torch.float64)
    assert a.shape == b.shape, (a.shape, b.shape)
    return float((a - b).abs().max()) if a.numel() else 0.0


# ---------------------------------------------------------------- fixture self-check
def check_fixtures(fx):
    pub = os.path.join(fx, "public")
    check_qdq_vectors(os.path.join(pub, "mxfp4", "qdq-vectors.json"))
    tok = Tokenizer.from_file(os.path.join(pub, "model-bf16", "tokenizer.json"))
    strings = json.load(open(os.path.join(pub, "tokenizer", "strings.json")))
    bad = [s for s in strings if tok.encode(s["text"], add_special_tokens=False).ids != s["ids"]]
    log(f"tokenizer: {len(strings) - len(bad)}/{len(strings)} strings identical")
    ip = image_processor_for(os.path.join(pub, "model-bf16"))
    # Our Python quantizer reproduces the fixture's MXFP4 weights exactly (so it can quantize new models).
    mine = dict(quantize_language_model(load_model(os.path.join(pub, "model-bf16"))).named_modules())
    theirs = dict(load_model(os.path.join(pub, "model-bf16"), os.path.join(pub, "model-mxfp4")).named_modules())
    for name, mod in mine.items():
        if isinstance(mod, QdqLinear):
            if not torch.equal(mod.weight.view(torch.int32), theirs[name].weight.view(torch.int32)):
                raise SystemExit(f"python MXFP4 quantization differs from the fixture on {name}")
    log("python MXFP4 quantization of model-bf16 equals model-mxfp4, bit for bit")
    worst = {}
    for variant, mx in (("bf16", None), ("mxfp4", os.path.join(pub, "model-mxfp4"))):
        model = load_model(os.path.join(pub, "model-bf16"), mx)
        head = load_head(os.path.join(pub, "model-" + variant))
        for case in sorted(os.listdir(os.path.join(pub, "cases"))):
            d = os.path.join(pub, "cases", case)
            want = json.load(open(os.path.join(d, f"expected-{variant}.json")))
            request = json.load(open(os.path.join(d, "request.json")))
            got, hidden, pv = run_case(model, head, tok, ip, request, want["max_length"])
            if "error" in want:
                assert got.get("error") == want["error"], (case, got.get("error"), want["error"])
                continue
            assert got["input_ids"] == want["input_ids"], case
            assert got["questions"] == want["questions"], case
            if "media" in want:
                assert got["media"] == want["media"], (case, got["media"], want["media"])
                ref_pv = load_file(os.path.join(d, "pixel_values.safetensors"))
                worst["pixel_values"] = max(worst.get("pixel_values", 0), max_diff(pv, list(ref_pv.values())[0]))
            ref_h = list(load_file(os.path.join(d, f"hidden-{variant}.safetensors")).values())[0]
            worst[f"hidden-{variant}"] = max(worst.get(f"hidden-{variant}", 0), max_diff(hidden, ref_h))
            worst[f"logits-{variant}"] = max(worst.get(f"logits-{variant}", 0),
                                             max(max_diff(a, b) for a, b in zip(got["logits"], want["logits"])))
            if got["response"] != want["response"]:
                log(f"  response differs on {case} {variant}:\n  got  {got['response']}\n  want {want['response']}")
                worst[f"response-mismatch-{variant}"] = worst.get(f"response-mismatch-{variant}", 0) + 1
    log("fixture self-check (max |diff|):", json.dumps(worst))
    for k in ("hidden-bf16", "hidden-mxfp4", "logits-bf16", "logits-mxfp4"):
        if worst.get(k, 1) > 1e-4:
            raise SystemExit(f"fixture self-check failed on {k}: {worst.get(k)}")
    return worst


# ---------------------------------------------------------------- new reference data
def make_images(out_dir):
    """Images for the alt cases and pixel-only checks: several formats, modes and sizes."""
    from PIL import Image
    import random
    rnd = random.Random(1234)

    def img(mode, w, h):
        im = Image.new("RGB", (w, h))
        px = im.load()
        for y in range(h):
            for x in range(w):
                px[x, y] = ((x * 255) // max(w - 1, 1), (y * 255) // max(h - 1, 1), rnd.randrange(256))
        if mode == "L":
            return im.convert("L")
        if mode == "RGBA":
            a = im.convert("RGBA")
            a.putalpha(Image.new("L", (w, h), 128))
            return a
        if mode == "P":
            return im.convert("P", palette=Image.ADAPTIVE, colors=64)
        return im

    def encode(im, fmt, **kw):
        b = io.BytesIO()
        im.save(b, format=fmt, **kw)
        return b.getvalue()

    specs = [  # name, mode, w, h, format
        ("rgb-120x90.jpg", "RGB", 120, 90, "JPEG"),
        ("rgba-50x200.png", "RGBA", 50, 200, "PNG"),
        ("rgb-300x160.webp", "RGB", 300, 160, "WEBP"),
        ("grey-33x47.png", "L", 33, 47, "PNG"),
        ("palette-640x480.png", "P", 640, 480, "PNG"),
        ("rgb-31x1000.png", "RGB", 31, 1000, "PNG"),
        ("rgb-257x129.png", "RGB", 257, 129, "PNG"),
        ("rgb-1x1.png", "RGB", 1, 1, "PNG"),
        ("rgb-10x2500.png", "RGB", 10, 2500, "PNG"),
    ]
    images = {}
    for name, mode, w, h, fmt in specs:
        kw = {"quality": 90} if fmt == "JPEG" else ({"lossless": False, "quality": 80} if fmt == "WEBP" else {})
        data = encode(img(mode, w, h), fmt, **kw)
        images[name] = ({"JPEG": "image/jpeg", "PNG": "image/png", "WEBP": "image/webp"}[fmt], data)
        with open(os.path.join(out_dir, name), "wb") as f:
            f.write(data)
    return images


def data_url(ct, data):
    return f"data:{ct};base64," + base64.b64encode(data).decode()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fixtures", required=True)
    ap.add_argument("--alt-bf16", required=True)
    ap.add_argument("--requests", required=True, help="folder of extra text requests (*.json)")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    import transformers
    log(f"torch {torch.__version__}, transformers {transformers.__version__}")
    t0 = time.time()
    worst = check_fixtures(a.fixtures)
    os.makedirs(a.out, exist_ok=True)
    img_dir = os.path.join(a.out, "images")
    os.makedirs(img_dir, exist_ok=True)
    images = make_images(img_dir)

    # pixel-only checks with the fixture's processor config (small sizes) and the alt config
    pix = {}
    for model_dir, tag in ((os.path.join(a.fixtures, "public", "model-bf16"), "fixture"), (a.alt_bf16, "alt")):
        ip = image_processor_for(model_dir)
        for name, (ct, data) in images.items():
            try:
                out = ip(images=[load_image(data_url(ct, data))], return_tensors="pt")
                key = f"{tag}/{name}"
                pix[key] = out["pixel_values"].float().contiguous()
                pix[key + "/grid"] = out["image_grid_thw"].to(torch.int64).contiguous()
            except Exception as e:  # noqa: BLE001 - recorded as the expected refusal
                pix[f"{tag}/{name}/error"] = torch.tensor(list(str(e).encode()), dtype=torch.uint8)
                log(f"  {tag}/{name}: {type(e).__name__}: {e}")
    save_file(pix, os.path.join(a.out, "pixel_values.safetensors"))

    # requests for the alt model: the public fixture requests, the extra text requests, image requests
    requests = {}
    pub_cases = os.path.join(a.fixtures, "public", "cases")
    for case in sorted(os.listdir(pub_cases)):
        exp = json.load(open(os.path.join(pub_cases, case, "expected-bf16.json")))
        requests["fx-" + case] = (json.load(open(os.path.join(pub_cases, case, "request.json"))), exp["max_length"])
    for f in sorted(os.listdir(a.requests)):
        if f.endswith(".json"):
            r = json.load(open(os.path.join(a.requests, f)))
            requests[f[:-5]] = (r.get("request", r), r.get("max_length", 16384))
    img_q = {"kind": {"type": "choice", "instructions": "What is shown?",
                      "criteria": {"gradient": "A colour gradient", "photo": "A photograph", "text": "Mostly text"}},
             "ok": {"type": "noul", "instructions": "Is it acceptable?"},
             "quality": {"type": "score", "instructions": "Image quality", "criteria": ["bad", "ok", "good"]}}
    requests["img-jpeg"] = ({"model": "clef", "state": "one JPEG", "questions": img_q,
                             "images": [data_url(*images["rgb-120x90.jpg"])]}, 16384)
    requests["img-two"] = ({"model": "clef", "state": {"note": "two images"}, "questions": img_q,
                            "images": [data_url(*images["rgba-50x200.png"]),
                                       {"content_type": "image/webp",
                                        "base64": base64.b64encode(images["rgb-300x160.webp"][1]).decode()}]}, 16384)
    requests["img-three"] = ({"model": "clef", "state": "three", "questions": img_q,
                              "images": [data_url(*images["grey-33x47.png"]), data_url(*images["rgb-257x129.png"]),
                                         data_url(*images["rgb-31x1000.png"])]}, 16384)
    tok = Tokenizer.from_file(os.path.join(a.alt_bf16, "tokenizer.json"))
    ip = image_processor_for(a.alt_bf16)
    cases_dir = os.path.join(a.out, "cases")
    for variant in ("bf16", "mxfp4"):
        model = load_model(a.alt_bf16, quantize=(variant == "mxfp4"))
        head = load_head(a.alt_bf16)
        for name, (req, max_length) in requests.items():
            exp, hidden, pv = run_case(model, head, tok, ip, req, max_length)
            d = os.path.join(cases_dir, name)
            os.makedirs(d, exist_ok=True)
            with open(os.path.join(d, "request.json"), "w") as f:
                json.dump(req, f, ensure_ascii=False, indent=1)
            with open(os.path.join(d, f"expected-{variant}.json"), "w") as f:
                json.dump(exp, f, ensure_ascii=False)
            if hidden is not None:
                save_file({"last_hidden_state": hidden}, os.path.join(d, f"hidden-{variant}.safetensors"))
            if pv is not None and variant == "bf16":
                save_file({"pixel_values": pv.contiguous()}, os.path.join(d, "pixel_values.safetensors"))
        log(f"alt {variant}: {len(requests)} cases")
    with open(os.path.join(a.out, "provenance.json"), "w") as f:
        import transformers as tf
        json.dump({"torch": torch.__version__, "transformers": tf.__version__, "fixture_self_check": worst,
                   "seconds": time.time() - t0}, f, indent=1)
    log(f"done in {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
