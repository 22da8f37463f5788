"""PyTorch + transformers decode baseline for stave's generation figures (docs/benchmarks.md,
"Decode: the release as a language model").

Builds transformers' Qwen3_5ForConditionalGeneration from a stave synth release's config.json,
BF16 on the GPU with random weights (as tools/reference/cuda_baseline.py does), and times
greedy `generate` of random prompts: time to first token (generate with max_new_tokens=1:
prefill + LM head + pick) and decode tokens/s ((N - 1) / (time of N new tokens - time of 1)),
at batch 1 and at larger batches (tokens/s summed over the batch). Median of 3 after 1 warm-up;
eos cannot end a run (min_new_tokens = max_new_tokens). FLA_DIR=DIR: the "PyTorch + fla" peer
(fla_peer.py); a line says which Gated DeltaNet kernels ran (without fla, transformers' torch
recurrence, which is not the fla baseline).

    python3 tools/reference/cuda_generate_baseline.py RELEASE_DIR [PROMPT_TOKENS] [NEW_TOKENS] [BATCHES]
    (defaults: 512, 128, "1,8,32")
"""
import json
import statistics
import sys
import time

import torch

import fla_peer


def timed_generate(model, ids, new_tokens):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    with torch.inference_mode():
        out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=new_tokens,
                             min_new_tokens=new_tokens, do_sample=False)
    torch.cuda.synchronize()
    assert out.shape[1] == ids.shape[1] + new_tokens, out.shape
    return time.perf_counter() - t0


def median_of_3(fn):
    fn()  # warm-up
    return statistics.median(fn() for _ in range(3))


def main():
    rel = sys.argv[1]
    prompt_tokens = int(sys.argv[2]) if len(sys.argv) > 2 else 512
    new_tokens = int(sys.argv[3]) if len(sys.argv) > 3 else 128
    batches = [int(b) for b in (sys.argv[4] if len(sys.argv) > 4 else "1,8,32").split(",")]
    cfg = json.load(open(f"{rel}/config.json"))
    cfg.pop("quantization_config", None)
    fla_peer.enable()
    from transformers import Qwen3_5Config, Qwen3_5ForConditionalGeneration
    import transformers
    config = Qwen3_5Config.from_dict(cfg)
    torch.manual_seed(0)
    with torch.device("cuda"):
        try:
            model = Qwen3_5ForConditionalGeneration._from_config(config, dtype=torch.bfloat16)
        except TypeError:
            model = Qwen3_5ForConditionalGeneration._from_config(config, torch_dtype=torch.bfloat16)
    model.eval()
    print(f"transformers {transformers.__version__}, torch {torch.__version__}; "
          f"{fla_peer.kernels_note(model.model.language_model)}", flush=True)
    vocab = config.text_config.vocab_size
    probe = torch.randint(0, vocab, (1, 64), device="cuda")
    print(fla_peer.kernels_ran(lambda: timed_generate(model, probe, 4)), flush=True)
    for batch in batches:
        ids = torch.randint(0, vocab, (batch, prompt_tokens), device="cuda")
        try:
            ttft = median_of_3(lambda: timed_generate(model, ids, 1))
            full = median_of_3(lambda: timed_generate(model, ids, new_tokens))
        except torch.OutOfMemoryError:
            print(f"batch {batch}: out of memory", flush=True)
            torch.cuda.empty_cache()
            continue
        rate = batch * (new_tokens - 1) / (full - ttft)
        print(f"batch {batch} x prompt {prompt_tokens}: TTFT {ttft * 1000:.1f} ms, {new_tokens} new tokens in "
              f"{full * 1000:.0f} ms, decode {rate:.1f} tokens/s ({rate / batch:.1f} per sequence)", flush=True)
    print(f"peak GPU memory allocated: {torch.cuda.max_memory_allocated() / 2**30:.1f} GiB", flush=True)


if __name__ == "__main__":
    main()
