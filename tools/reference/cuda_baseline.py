"""PyTorch + transformers baseline for stave's CUDA figures (docs/benchmarks.md, "CUDA (H200)").

Builds transformers' Qwen3_5ForConditionalGeneration from a stave synth release's config.json
(same shapes as `stave synth --preset clef-27b`), BF16 on the GPU with random weights (timing
does not depend on the values; the 54 GB BF16 files need not be written), and times the
backbone prefill (language model forward, no LM head) at batch 1 for 512 and 2048 tokens and at
larger batches, with CUDA events: median of 3 after 1 warm-up. Prints one line per size and
the peak GPU memory. Uses whatever attention / GDN kernels transformers picks on that machine
(without flash-linear-attention installed: its torch fallback for the Gated DeltaNet).

    python3 tools/reference/cuda_baseline.py RELEASE_DIR [TOKENS ...]   (default 512 2048 8192)

FLA_DIR=DIR: the "PyTorch + fla" peer (fla_peer.py); a line says which kernels ran.
PROFILE_TOKENS=N (default 2048; 0: none): one more forward at N tokens under torch's profiler,
its GPU time summed by kernel class (fla's delta rule, attention, GEMMs, other).
"""
import json
import os
import statistics
import sys
import time

import torch

import fla_peer


def main():
    rel = sys.argv[1]
    lengths = [int(t) for t in sys.argv[2:]] or [512, 2048, 8192]
    fla_peer.enable()
    cfg = json.load(open(f"{rel}/config.json"))
    cfg.pop("quantization_config", None)
    from transformers import Qwen3_5Config, Qwen3_5ForConditionalGeneration
    import transformers
    config = Qwen3_5Config.from_dict(cfg)
    t0 = time.time()
    torch.manual_seed(0)
    with torch.device("cuda"):
        try:
            model = Qwen3_5ForConditionalGeneration._from_config(config, dtype=torch.bfloat16)
        except TypeError:
            model = Qwen3_5ForConditionalGeneration._from_config(config, torch_dtype=torch.bfloat16)
    model.eval()
    lm = model.model.language_model
    print(fla_peer.kernels_note(lm), flush=True)
    print(f"transformers {transformers.__version__}, torch {torch.__version__}, built in {time.time() - t0:.1f} s, "
          f"{sum(p.numel() for p in lm.parameters()) / 1e9:.2f} B params in the language model", flush=True)
    vocab = config.text_config.vocab_size
    probe = torch.randint(0, vocab, (1, 128), device="cuda")
    with torch.inference_mode():
        print(fla_peer.kernels_ran(lambda: lm(input_ids=probe, use_cache=False)), flush=True)
    for batch, tokens in [(1, n) for n in lengths] + [(4, 2048)]:
        ids = torch.randint(0, vocab, (batch, tokens), device="cuda")
        try:
            with torch.inference_mode():
                for _ in range(1):
                    lm(input_ids=ids, use_cache=False)
                times = []
                for _ in range(3):
                    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    a.record()
                    lm(input_ids=ids, use_cache=False)
                    b.record()
                    torch.cuda.synchronize()
                    times.append(a.elapsed_time(b))
        except torch.OutOfMemoryError:
            print(f"batch {batch} x {tokens}: out of memory", flush=True)
            torch.cuda.empty_cache()
            continue
        ms = statistics.median(times)
        print(f"batch {batch} x {tokens} tokens: {ms:.1f} ms (median of 3; min {min(times):.1f}), "
              f"{batch * tokens / ms * 1000:.0f} prefill tokens/s", flush=True)
    # GPU time by kernel class at one length (PROFILE_TOKENS, default 2048; 0: none), beside
    # stave's stage profile.
    profile_tokens = int(os.environ.get("PROFILE_TOKENS", "2048"))
    if profile_tokens > 0:
        ids = torch.randint(0, vocab, (1, profile_tokens), device="cuda")
        with torch.inference_mode():
            line, fla_line = fla_peer.stage_profile(lambda: lm(input_ids=ids, use_cache=False))
        print(f"{line} at {profile_tokens} tokens", flush=True)
        if fla_line:
            print(f"{fla_line} at {profile_tokens} tokens", flush=True)
    print(f"peak GPU memory allocated: {torch.cuda.max_memory_allocated() / 2**30:.1f} GiB", flush=True)


if __name__ == "__main__":
    main()
