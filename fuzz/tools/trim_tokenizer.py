#!/usr/bin/env python3
"""Writes small tokenizer.json seeds for fuzz_tokenizer_json from a real one (Qwen3's, 11 MB):
the same normalizer, pre-tokenizer, decoder and added tokens, the vocabulary cut to the first
VOCAB ids and the merges to those whose parts and result survive. Variants spell the merges the
legacy way ("a b"), drop the normalizer, and use a literal Split pattern, so that each branch of
the reader has a seed. Usage: trim_tokenizer.py TOKENIZER_JSON OUT_DIR [VOCAB]"""
import copy
import json
import os
import sys

src, out = sys.argv[1], sys.argv[2]
keep = int(sys.argv[3]) if len(sys.argv) > 3 else 400
with open(src, encoding="utf-8") as f:
    tok = json.load(f)
vocab = {k: v for k, v in tok["model"]["vocab"].items() if v < keep}
merges = []
for m in tok["model"]["merges"]:
    a, b = m if isinstance(m, list) else m.split(" ", 1)
    if a in vocab and b in vocab and a + b in vocab:
        merges.append([a, b])
small = copy.deepcopy({k: v for k, v in tok.items() if k != "model"})
small["model"] = {k: v for k, v in tok["model"].items() if k not in ("vocab", "merges")}
small["model"]["vocab"] = vocab
small["model"]["merges"] = merges


def write(name, doc):
    with open(os.path.join(out, name), "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, separators=(",", ":"))


os.makedirs(out, exist_ok=True)
write("qwen3-trimmed.json", small)
legacy = copy.deepcopy(small)
legacy["model"]["merges"] = [a + " " + b for a, b in merges]
legacy["normalizer"] = None
write("qwen3-legacy-merges-no-normalizer.json", legacy)
literal = copy.deepcopy(small)
literal["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
    {"type": "Split", "pattern": {"String": " "}, "behavior": "Isolated", "invert": False},
    {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}]}
literal["added_tokens"] = literal["added_tokens"][:3]
write("qwen3-literal-split.json", literal)
print(f"{len(vocab)} vocab entries, {len(merges)} merges")
