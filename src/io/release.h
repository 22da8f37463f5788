// A Clef release folder as published: config.json, safetensors shards (+ index),
// joint_head_config.json + joint_head.safetensors, tokenizer.json and the processor config.
#pragma once
#include <memory>
#include <string>

#include "io/model_config.h"
#include "io/tensor_store.h"

namespace stave {

struct Release {
  std::string dir;                  // resolved folder
  ModelConfig config;
  JointHeadConfig head_config;
  TensorStore weights;              // backbone, lm_head, vision
  TensorStore head;                 // joint_head.safetensors
  std::string tokenizer_path;       // dir/tokenizer.json
  ImageProcessorConfig image_processor;  // present=false when the folder has none
  // video_preprocessor_config.json, else processor_config.json's "video_processor", else the
  // Qwen3VLVideoProcessor defaults over the image processor's fields (present = image's).
  VideoProcessorConfig video_processor;
};

// Opens a release from a folder or a Hugging Face repo id (see resolve_model_path).
// Throws stave::Error naming the missing or broken file.
std::unique_ptr<Release> open_release(const std::string& dir_or_repo);

// A folder path is returned as is. "ORG/NAME" that is not an existing folder resolves in the
// Hugging Face cache as huggingface_hub lays it out: the hub folder is $HF_HUB_CACHE, else
// $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub; the
// release is hub/models--ORG--NAME/snapshots/<commit>, where <commit> is `revision` when that
// is a commit hash (40 hex digits) or the hash refs/<revision> holds (a branch or tag; "":
// main). When it is not there, the error names the command that downloads it. Never a download.
std::string resolve_model_path(const std::string& dir_or_repo, const std::string& revision = "");

}  // namespace stave
