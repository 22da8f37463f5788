#!/usr/bin/env python3
"""Video reference data for stave (issue 28), from transformers' own processor and model.

Reference tooling, not product code: it runs on the GPU machine (torch 2.11, transformers 5.17)
and its outputs are committed under tests/data/video/. It reuses make_reference.py (same
folder) for the model, the Quark MXFP4 emulation, the joint head and encode_record, all of which
that script checks against the shared fixtures first.

Lossless by construction: each clip's frames are generated here (a deterministic pattern),
written as PNG files (frames/<clip>/NNNN.png) and given to the processor as numpy arrays decoded
from those same PNGs, so codec loss never enters. stave reads the same PNGs as a video given as
a list of images, and its test also encodes them losslessly (FFV1 in Matroska, 24 fps: the rate
the processor assumes for frames without metadata) to check the container path on the same
pixels.

Outputs (under --out, i.e. tests/data/video):
  frames/<clip>/NNNN.png                 the frames
  pixel_values_videos.safetensors        per clip: <clip> (pixel_values_videos, fp32),
                                         <clip>/grid (video_grid_thw), <clip>/ids (the processor's
                                         input_ids for "<|vision_start|><|video_pad|><|vision_end|>\\n"),
                                         or <clip>/error (the processor's error text, UTF-8)
  cases/<name>/request.json, expected-{bf16,mxfp4}.json, hidden-{bf16,mxfp4}.safetensors
                                         as tests/data/alt (media adds video_grid_thw)
  provenance.json

usage: make_video_reference.py --fixtures DIR --alt-bf16 DIR --video-config FILE --out DIR
(--video-config: tests/data/video/video_preprocessor_config.json, committed input)
"""
import argparse
import base64
import io
import json
import os
import sys
import time

import numpy as np
import torch
from safetensors.torch import save_file
from tokenizers import Tokenizer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_reference as mr  # noqa: E402

log = mr.log

# name -> (frames, width, height): sampled counts with fps 2 over the assumed 24 fps:
# 16 -> 4 frames (t=2); 138 -> 11 frames (padded to 12, t=6); 5 -> 4; 1 -> error (t < 2).
CLIPS = {
    "c16-64x48": (16, 64, 48),
    "c138-40x30": (138, 40, 30),
    "c5-100x36": (5, 100, 36),
    "c1-32x32": (1, 32, 32),
    "c24-33x47": (24, 33, 47),
}


def make_frames(name, n, w, h):
    rng = np.random.default_rng(sum(map(ord, name)))
    frames = []
    for t in range(n):
        y, x = np.mgrid[0:h, 0:w]
        r = (x * 255 // max(w - 1, 1) + 7 * t) % 256
        g = (y * 255 // max(h - 1, 1) + 3 * t) % 256
        b = rng.integers(0, 256, size=(h, w))
        frames.append(np.stack([r, g, b], axis=-1).astype(np.uint8))
    return frames


def png_bytes(arr):
    from PIL import Image
    b = io.BytesIO()
    Image.fromarray(arr, "RGB").save(b, format="PNG")
    return b.getvalue()


def decode_png(data):
    from PIL import Image
    with Image.open(io.BytesIO(data)) as im:
        return np.asarray(im.convert("RGB"))


def build_processor(model_dir, tokenizer_dir, video_config_path):
    """Qwen3VLProcessor with the model's image processor, the committed video config and the release
    tokenizer (tokenizer_dir: the fixture release, whose tokenizer.json the alt model shares and
    which has the tokenizer_config.json that AutoTokenizer needs)."""
    import transformers
    from transformers import Qwen3VLProcessor
    ip = mr.image_processor_for(model_dir)
    cfg = json.load(open(video_config_path))
    cfg = {k: v for k, v in cfg.items() if k != "video_processor_type"}
    vp = transformers.Qwen3VLVideoProcessor(**cfg)
    tok = transformers.AutoTokenizer.from_pretrained(tokenizer_dir)
    proc = Qwen3VLProcessor(image_processor=ip, tokenizer=tok, video_processor=vp)
    log(f"processor: {type(proc).__name__}, video {type(vp).__name__} size={vp.size} fps={vp.fps}")
    return proc


def load_video(value):
    """A request video given as a list of images -> [T, H, W, 3] uint8 (what the processor takes)."""
    frames = []
    for item in value:
        data = base64.b64decode(item["base64"] if isinstance(item, dict) else item.split(",", 1)[1])
        frames.append(decode_png(data))
    return np.stack(frames)


def encode_media(proc, request):
    """The media segment as the release code builds it (clef-decision.md §4.1 item 2): the processor
    on "<|vision_start|><|image_pad|><|vision_end|>" x n_images + "...<|video_pad|>..." x n_videos + "\\n"."""
    images = [mr.load_image(x) for x in request.get("images") or []]
    videos = [load_video(v) for v in request.get("videos") or []]
    if not images and not videos:
        return [], None
    text = ("<|vision_start|><|image_pad|><|vision_end|>" * len(images)
            + "<|vision_start|><|video_pad|><|vision_end|>" * len(videos) + "\n")
    out = proc(text=[text], images=images or None, videos=videos or None, return_tensors="pt")
    return out["input_ids"][0].tolist(), out


def run_case(model, head, tok, proc, request, max_length):
    try:
        mr.validate(request)
        media_ids, mm = encode_media(proc, request)
        ids, questions, token_offset = mr.encode_record(tok, request, max_length, media_ids)
    except ValueError as e:
        return {"max_length": max_length, "error": str(e)}, None, None
    input_ids = torch.tensor(ids)[None]
    mask = torch.ones_like(input_ids)
    image_id, video_id = tok.token_to_id("<|image_pad|>"), tok.token_to_id("<|video_pad|>")
    types = [1 if t == image_id else 2 if t == video_id else 0 for t in ids]
    if mm is not None and "mm_token_type_ids" in mm:  # the processor's own, placed at the media offset
        seg = mm["mm_token_type_ids"][0].tolist()
        assert types[token_offset:token_offset + len(seg)] == seg, "mm_token_type_ids differ from the pad tokens"
    kwargs = {}
    import inspect
    if "mm_token_type_ids" in inspect.signature(model.model.forward).parameters:
        kwargs["mm_token_type_ids"] = torch.tensor(types)[None]
    for k in ("pixel_values", "image_grid_thw", "pixel_values_videos", "video_grid_thw"):
        if mm is not None and k in mm:
            kwargs[k] = mm[k].float() if k.startswith("pixel") else mm[k]
    hidden = model.model(input_ids=input_ids, attention_mask=mask, use_cache=False, **kwargs).last_hidden_state[0]
    logits = head(hidden, input_ids[0], questions, model.lm_head.weight)
    answers = {}
    for q, lg in zip(questions, logits):
        probs = dict(zip(q["option_ids"], lg.float().softmax(-1).tolist()))
        answers[q["id"]] = mr.answer(request["questions"][q["id"]], probs)
    exp = {"max_length": max_length,
           "response": {"model": request["model"], "answers": answers,
                        "usage": {"input_tokens": len(ids), "output_tokens": 0}},
           "input_ids": ids, "questions": questions, "logits": [lg.tolist() for lg in logits]}
    media = {"image_grid_thw": mm["image_grid_thw"].tolist() if "image_grid_thw" in mm else [],
             "mm_token_type_ids": types[token_offset:token_offset + len(media_ids)],
             "token_offset": token_offset}
    if "video_grid_thw" in mm:
        media["video_grid_thw"] = mm["video_grid_thw"].tolist()
    exp["media"] = media
    return exp, hidden.float().contiguous(), mm


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fixtures", required=True)
    ap.add_argument("--alt-bf16", required=True)
    ap.add_argument("--video-config", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    import transformers
    log(f"torch {torch.__version__}, transformers {transformers.__version__}")
    t0 = time.time()
    worst = mr.check_fixtures(a.fixtures)  # the pipeline reproduces the shared fixtures first

    # frames, as PNG files
    clip_pngs = {}
    for name, (n, w, h) in CLIPS.items():
        d = os.path.join(a.out, "frames", name)
        os.makedirs(d, exist_ok=True)
        pngs = []
        for i, arr in enumerate(make_frames(name, n, w, h)):
            data = png_bytes(arr)
            assert np.array_equal(decode_png(data), arr)
            with open(os.path.join(d, f"{i:04d}.png"), "wb") as f:
                f.write(data)
            pngs.append(data)
        clip_pngs[name] = pngs

    def video_item(name):
        return [mr.data_url("image/png", p) for p in clip_pngs[name]]

    proc = build_processor(a.alt_bf16, os.path.join(a.fixtures, "public", "model-bf16"), a.video_config)
    assert proc.tokenizer.convert_tokens_to_ids("<|video_pad|>") == Tokenizer.from_file(
        os.path.join(a.alt_bf16, "tokenizer.json")).token_to_id("<|video_pad|>")
    tok = Tokenizer.from_file(os.path.join(a.alt_bf16, "tokenizer.json"))

    # pixel-only: each clip alone
    pix = {}
    for name in CLIPS:
        try:
            ids, out = encode_media(proc, {"videos": [video_item(name)]})
            pix[name] = out["pixel_values_videos"].float().contiguous()
            pix[name + "/grid"] = out["video_grid_thw"].to(torch.int64).contiguous()
            pix[name + "/ids"] = torch.tensor(ids, dtype=torch.int64)
        except Exception as e:  # noqa: BLE001 - recorded as the expected refusal
            pix[name + "/error"] = torch.tensor(list(str(e).encode()), dtype=torch.uint8)
            log(f"  {name}: {type(e).__name__}: {e}")
    save_file(pix, os.path.join(a.out, "pixel_values_videos.safetensors"))

    q = {"kind": {"type": "choice", "instructions": "What moves?",
                  "criteria": {"gradient": "A colour gradient", "noise": "Noise", "nothing": "Nothing"}},
         "ok": {"type": "noul", "instructions": "Is it acceptable?"},
         "quality": {"type": "score", "instructions": "Video quality", "criteria": ["bad", "ok", "good"]}}
    os.makedirs(os.path.join(a.out, "images_tmp"), exist_ok=True)
    images = mr.make_images(os.path.join(a.out, "images_tmp"))
    requests = {
        "vid-one": {"model": "clef", "state": "one video", "questions": q, "videos": [video_item("c16-64x48")]},
        "vid-padded": {"model": "clef", "state": {"note": "odd frame count"}, "questions": q,
                       "videos": [video_item("c138-40x30")]},
        "vid-two": {"model": "clef", "state": "two videos", "questions": q,
                    "videos": [video_item("c5-100x36"), video_item("c24-33x47")]},
        "vid-image-and-video": {"model": "clef", "state": "mixed", "questions": q,
                                "images": [mr.data_url(*images["rgb-120x90.jpg"])],
                                "videos": [video_item("c16-64x48")]},
    }
    cases_dir = os.path.join(a.out, "cases")
    for variant in ("bf16", "mxfp4"):
        model = mr.load_model(a.alt_bf16, quantize=(variant == "mxfp4"))
        head = mr.load_head(a.alt_bf16)
        for name, req in requests.items():
            exp, hidden, _ = run_case(model, head, tok, proc, req, 16384)
            d = os.path.join(cases_dir, name)
            os.makedirs(d, exist_ok=True)
            with open(os.path.join(d, "request.json"), "w") as f:
                json.dump(req, f, ensure_ascii=False, indent=1)
            with open(os.path.join(d, f"expected-{variant}.json"), "w") as f:
                json.dump(exp, f, ensure_ascii=False)
            if hidden is not None:
                save_file({"last_hidden_state": hidden}, os.path.join(d, f"hidden-{variant}.safetensors"))
        log(f"alt {variant}: {len(requests)} video cases")
    import shutil
    shutil.rmtree(os.path.join(a.out, "images_tmp"), ignore_errors=True)
    with open(os.path.join(a.out, "provenance.json"), "w") as f:
        json.dump({"torch": torch.__version__, "transformers": transformers.__version__,
                   "fixture_self_check": worst, "seconds": time.time() - t0}, f, indent=1)
    log(f"done in {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
