"""The "PyTorch + fla" peer: flash-linear-attention's Triton kernels for transformers' Gated DeltaNet.

FLA_DIR=DIR (a folder holding fla's `fla/` package, pure Python + Triton, brought to the GPU
machine uncommitted) is put first on sys.path and transformers is told fla is available, so that
Qwen3.5's Gated DeltaNet layers run fla's chunk kernels. Call enable() before transformers'
Qwen3.5 modeling module is imported, and kernels_note() after the model is built.
"""
import os
import sys


def enable():
    if os.environ.get("FLA_DIR"):
        sys.path.insert(0, os.environ["FLA_DIR"])
        import transformers.utils.import_utils as iu
        iu.is_flash_linear_attention_available = lambda: True


def kernels_note(model_config=None):
    """Which Gated DeltaNet kernels transformers' Qwen3.5 module bound (and the attention kernel)."""
    import transformers.models.qwen3_5.modeling_qwen3_5 as mq
    fn = getattr(mq, "chunk_gated_delta_rule", None)
    gdn = "fla chunk_gated_delta_rule" if fn is not None and "fla" in getattr(fn, "__module__", "") \
        else "torch fallback (NOT the fla baseline)"
    attn = getattr(model_config, "_attn_implementation", "?") if model_config is not None else "?"
    return f"Gated DeltaNet kernels: {gdn}; attention: {attn}"
