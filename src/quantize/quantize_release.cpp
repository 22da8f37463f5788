#include "quantize/quantize_release.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <sys/mman.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "io/checksums.h"
#include "io/safetensors_writer.h"
#include "io/sharded_safetensors.h"
#include "io/tensor_store.h"
#include "formats/tensor_names.h"
#include "formats/name_match.h"
#include "formats/quark_config.h"
#include "formats/quark_export.h"
#include "stave/errors.h"
#include "util/bf16.h"
#include "util/mapped_file.h"

namespace stave::quantize {
namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

namespace {

// Below this many weights a tensor is quantized on one thread (waking a team costs more).
constexpr int64_t kParallelElements = int64_t{1} << 16;

[[noreturn]] void invalid(const std::string& what) { throw Error(ErrorKind::kInvalidRequest, what); }

bool is_float(DType t) { return t == DType::kBF16 || t == DType::kF32 || t == DType::kF16; }


// vLLM fuses these projections and needs every shard of one fused module quantized alike.
std::string fused_group(const std::string& layer) {
  static const std::map<std::string, std::string> groups = {
      {"q_proj", "q/k/v_proj"},       {"k_proj", "q/k/v_proj"},   {"v_proj", "q/k/v_proj"},
      {"gate_proj", "gate/up_proj"},  {"up_proj", "gate/up_proj"},
      {"in_proj_qkv", "in_proj_qkv/z"}, {"in_proj_z", "in_proj_qkv/z"},
      {"in_proj_b", "in_proj_b/a"},   {"in_proj_a", "in_proj_b/a"}};
  auto dot = layer.rfind('.');
  auto it = groups.find(layer.substr(dot + 1));
  return it == groups.end() ? "" : layer.substr(0, dot + 1) + it->second;
}

// Reads row r of a float [rows, cols] tensor into fp32.
void load_row_f32(const TensorRef& t, int64_t r, int64_t cols, float* out) {
  const size_t es = dtype_size(t.dtype);
  const uint8_t* p = t.data + static_cast<size_t>(r) * static_cast<size_t>(cols) * es;
  switch (t.dtype) {
    case DType::kF32: std::memcpy(out, p, static_cast<size_t>(cols) * 4); break;
    case DType::kBF16:
      for (int64_t i = 0; i < cols; ++i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        out[i] = bf16_to_f32(h);
      }
      break;
    case DType::kF16:
      for (int64_t i = 0; i < cols; ++i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        out[i] = f16_to_f32(h);
      }
      break;
    default: break;  // checked before
  }
}

void store_f32(const float* v, size_t n, DType dtype, std::vector<uint8_t>& bytes) {
  bytes.resize(n * dtype_size(dtype));
  for (size_t i = 0; i < n; ++i) {
    if (dtype == DType::kF32) {
      std::memcpy(&bytes[4 * i], &v[i], 4);
    } else {
      uint16_t h = dtype == DType::kBF16 ? f32_to_bf16(v[i]) : f32_to_f16(v[i]);
      std::memcpy(&bytes[2 * i], &h, 2);
    }
  }
}

// One tensor of the output and where its bytes come from.
struct OutTensor {
  enum class Kind { kCopy, kReplace, kEditedFloat, kCodes, kScales } kind = Kind::kCopy;
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  const TensorRef* src = nullptr;  // the input tensor (the weight, for codes/scales)
  std::string layer;               // for linears
};

struct Quantized {
  std::vector<uint8_t> codes, scales;
};

Quantized quantize_linear(const TensorRef& w, const LinearEdit* edit, mxfp4::ScaleMode mode) {
  const int64_t N = w.shape[0], K = w.shape[1];
  Quantized q;
  q.codes.resize(static_cast<size_t>(N * K / 2));
  q.scales.resize(static_cast<size_t>(N * K / mxfp4::kBlock));
  const bool bf16 = w.dtype == DType::kBF16;
#pragma omp parallel if (N * K >= kParallelElements)
  {
    std::vector<float> row(static_cast<size_t>(K));
#pragma omp for schedule(static)
    for (int64_t r = 0; r < N; ++r) {
      load_row_f32(w, r, K, row.data());
      if (edit) apply_linear_edit_row(*edit, r, K, row.data(), bf16);
      quark::quantize_row_mxfp4(row.data(), K, q.codes.data() + r * (K / 2), q.scales.data() + r * (K / mxfp4::kBlock),
                                mode);
    }
  }
  return q;
}

std::vector<uint8_t> edited_float(const TensorRef& w, const LinearEdit& edit) {
  const int64_t N = w.shape[0], K = w.shape[1];
  std::vector<float> vals(static_cast<size_t>(N * K));
  const bool bf16 = w.dtype == DType::kBF16;
#pragma omp parallel for schedule(static) if (N * K >= kParallelElements)
  for (int64_t r = 0; r < N; ++r) {
    load_row_f32(w, r, K, vals.data() + r * K);
    apply_linear_edit_row(edit, r, K, vals.data() + r * K, bf16);
  }
  std::vector<uint8_t> bytes;
  store_f32(vals.data(), vals.size(), w.dtype, bytes);
  return bytes;
}

// Drops the input pages of a tensor that has been written from this process's resident set
// (the mapping is read-only and file-backed: a later touch reads them again), so that RSS stays
// near one tensor rather than growing to the whole checkpoint.
void release_pages(const uint8_t* data, size_t nbytes) {
  static const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  uintptr_t begin = (reinterpret_cast<uintptr_t>(data) + page - 1) / page * page;
  uintptr_t end = (reinterpret_cast<uintptr_t>(data) + nbytes) / page * page;
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  if (!out) throw Error(ErrorKind::kIo, "cannot write " + path.string());
}

}  // namespace

uint64_t parse_byte_size(const std::string& text) {
  size_t i = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
  if (i == 0 || i > 18) invalid("size \"" + text + "\" is not a number of bytes such as 5GB, 500MB or 2GiB");
  uint64_t n = std::stoull(text.substr(0, i));
  std::string unit;
  for (char c : text.substr(i)) unit.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
  static const std::map<std::string, uint64_t> units = {
      {"", 1},           {"B", 1},
      {"KB", 1000ull},   {"MB", 1000ull * 1000},         {"GB", 1000ull * 1000 * 1000}, {"TB", 1000ull * 1000 * 1000 * 1000},
      {"KIB", 1ull << 10}, {"MIB", 1ull << 20},           {"GIB", 1ull << 30},           {"TIB", 1ull << 40}};
  auto it = units.find(unit);
  if (it == units.end()) invalid("size \"" + text + "\" has an unknown unit (use B, KB, MB, GB, TB or KiB, MiB, GiB, TiB)");
  if (n == 0) invalid("size \"" + text + "\" must be positive");
  return n * it->second;
}

LinearSelection select_linears(const ModelConfig& config, const std::vector<std::string>& exclude) {
  std::vector<quant::NamePattern> patterns;
  std::vector<bool> used(exclude.size(), false);
  for (const auto& e : exclude) patterns.emplace_back(e, "--exclude " + e);
  LinearSelection sel;
  std::map<std::string, std::pair<std::vector<std::string>, std::vector<std::string>>> groups;  // in, out
  for (const auto& l : quant::model_linears(config)) {
    bool user = false;
    for (size_t i = 0; i < patterns.size(); ++i)
      if (patterns[i].matches(l.name)) user = used[i] = true;
    bool quantize = l.language_model && !l.is_lm_head && !user;
    (quantize ? sel.quantized : sel.excluded).push_back(l.name);
    if (std::string g = fused_group(l.name); !g.empty()) (quantize ? groups[g].first : groups[g].second).push_back(l.name);
  }
  for (size_t i = 0; i < exclude.size(); ++i)
    if (!used[i]) invalid("--exclude " + exclude[i] + " matches no linear layer of this model");
  for (const auto& [g, io] : groups)
    if (!io.first.empty() && !io.second.empty())
      invalid("--exclude leaves " + io.first.front() + " quantized but excludes " + io.second.front() +
              "; vLLM fuses " + g + " and needs all of them quantized or all excluded");
  std::sort(sel.excluded.begin(), sel.excluded.end());
  return sel;
}

QuantizeSummary quantize_release(const QuantizeOptions& o) {
  if (o.in_dir.empty()) invalid("--in is required");
  if (o.out_dir.empty()) invalid("--out is required");
  if (o.shard_bytes == 0) invalid("--shard-size must be positive");
  const fs::path in(o.in_dir), out(o.out_dir);
  if (!fs::is_directory(in)) invalid("input folder " + o.in_dir + " does not exist");
  if (fs::exists(out)) {
    if (!fs::is_directory(out)) invalid("output " + o.out_dir + " exists and is not a folder");
    if (fs::equivalent(in, out)) invalid("--out must differ from --in");
    if (!fs::is_empty(out)) invalid("output folder " + o.out_dir + " is not empty");
  }

  // The input: config (kept as ordered JSON to preserve its key order) and tensors.
  const std::string config_path = (in / "config.json").string();
  if (!fs::exists(config_path)) invalid("input folder " + o.in_dir + " has no config.json");
  const std::string config_text = read_file(config_path);
  ModelConfig config = parse_model_config(config_text, config_path);
  if (!config.quantization_config_json.empty())
    invalid(config_path + " already has a quantization_config: stave quantize needs an unquantized (BF16) release");
  ojson config_json = ojson::parse(config_text);
  TensorStore store = TensorStore::open_checkpoint(in.string());

  LinearSelection sel = select_linears(config, o.exclude);
  std::set<std::string> quantize(sel.quantized.begin(), sel.quantized.end());
  std::map<std::string, std::string> linear_of_weight;  // "X.weight" -> "X"
  for (const auto& l : quant::model_linears(config)) linear_of_weight[l.name + ".weight"] = l.name;

  // Every tensor the model needs must be there, linears as float [out, in].
  std::vector<std::string> order;
  std::vector<ExpectedTensor> expected = expected_backbone_tensors(config);
  for (auto& e : expected_vision_tensors(config)) expected.push_back(std::move(e));
  for (const auto& e : expected) {
      const TensorRef* t = store.find(e.name);
      if (!t) throw Error(ErrorKind::kInvalidModel, o.in_dir + " is missing tensor \"" + e.name + "\"");
      if (!is_float(t->dtype))
        throw Error(ErrorKind::kInvalidModel, e.name + " has dtype " + std::string(dtype_name(t->dtype)) +
                                                  "; stave quantize needs BF16/F16/F32 weights (is the input already quantized?)");
      if (t->shape != e.shape)
        throw Error(ErrorKind::kInvalidModel, e.name + " has shape " + t->shape_string() + ", expected " +
                                                  TensorRef{e.name, t->dtype, e.shape}.shape_string());
      order.push_back(e.name);
    }
  std::set<std::string> known(order.begin(), order.end());
  for (const auto& n : store.names())
    if (!known.count(n)) order.push_back(n);  // e.g. mtp.*: copied unchanged, after the model's tensors
  for (const auto& l : sel.quantized)
    if (store.get(l + ".weight").shape[1] % mxfp4::kBlock != 0)
      invalid(l + " has in_features " + std::to_string(store.get(l + ".weight").shape[1]) +
              ", not a multiple of 32 as MXFP4 needs; keep it in BF16 with --exclude " + l);
  if (o.edits) {
    for (const auto& [name, _] : o.edits->linears)
      if (!store.find(name + ".weight")) throw Error(ErrorKind::kInternal, "weight edit for unknown linear " + name);
    for (const auto& [name, v] : o.edits->tensors) {
      const TensorRef* t = store.find(name);
      if (!t || static_cast<int64_t>(v.size()) != t->numel() || !is_float(t->dtype))
        throw Error(ErrorKind::kInternal, "weight replacement for " + name + " does not fit the tensor");
    }
  }

  // The output tensors, in model order; a quantized linear's codes and scales stay together.
  std::vector<std::vector<OutTensor>> units;
  uint64_t bytes_in = 0;
  for (const auto& name : order) {
    const TensorRef& t = store.get(name);
    bytes_in += t.nbytes;
    auto lin = linear_of_weight.find(name);
    if (lin != linear_of_weight.end() && quantize.count(lin->second)) {
      const std::string& l = lin->second;
      OutTensor codes{OutTensor::Kind::kCodes, name, DType::kU8, {t.shape[0], t.shape[1] / 2}, &t, l};
      OutTensor scales{OutTensor::Kind::kScales, l + ".weight_scale", DType::kU8,
                       {t.shape[0], t.shape[1] / mxfp4::kBlock}, &t, l};
      if (store.find(scales.name)) throw Error(ErrorKind::kInvalidModel, o.in_dir + " already holds " + scales.name);
      units.push_back({codes, scales});
      continue;
    }
    OutTensor c{OutTensor::Kind::kCopy, name, t.dtype, t.shape, &t, ""};
    if (o.edits && o.edits->tensors.count(name)) c.kind = OutTensor::Kind::kReplace;
    if (lin != linear_of_weight.end() && o.edits && o.edits->linears.count(lin->second)) {
      c.kind = OutTensor::Kind::kEditedFloat;
      c.layer = lin->second;
    }
    units.push_back({c});
  }

  // The shards and their index (io/sharded_safetensors: the writer synth uses too).
  std::vector<std::vector<ShardTensor>> shard_units;
  std::vector<const OutTensor*> by_id;
  for (const auto& u : units) {
    shard_units.emplace_back();
    for (const OutTensor& t : u) {
      shard_units.back().push_back({t.name, t.dtype, t.shape, by_id.size()});
      by_id.push_back(&t);
    }
  }

  fs::create_directories(out);
  QuantizeSummary summary;
  summary.quantized = sel.quantized;
  summary.excluded = sel.excluded;
  summary.bytes_in = bytes_in;

  ProgressBar progress("quantize", bytes_in, o.progress);
  std::map<std::string, Quantized> pending;  // codes written, scales still to write
  auto produce = [&](const ShardTensor& st, const SafetensorsWriter::WriteFn& write) {
    const OutTensor& t = *by_id.at(st.id);
    switch (t.kind) {
      case OutTensor::Kind::kCopy: {
        constexpr size_t kChunk = size_t{64} << 20;
        for (size_t off = 0; off < t.src->nbytes; off += kChunk) {
          size_t n = std::min(kChunk, t.src->nbytes - off);
          write(t.src->data + off, n);
          release_pages(t.src->data + off, n);
          progress.add(n);
        }
        break;
      }
      case OutTensor::Kind::kReplace: {
        const auto& v = o.edits->tensors.at(t.name);
        std::vector<uint8_t> bytes;
        store_f32(v.data(), v.size(), t.dtype, bytes);
        write(bytes.data(), bytes.size());
        progress.add(t.src->nbytes);
        break;
      }
      case OutTensor::Kind::kEditedFloat: {
        auto bytes = edited_float(*t.src, o.edits->linears.at(t.layer));
        release_pages(t.src->data, t.src->nbytes);
        write(bytes.data(), bytes.size());
        progress.add(t.src->nbytes);
        break;
      }
      case OutTensor::Kind::kCodes:
      case OutTensor::Kind::kScales: {
        auto it = pending.find(t.layer);
        if (it == pending.end()) {
          const LinearEdit* edit = nullptr;
          if (o.edits)
            if (auto ed = o.edits->linears.find(t.layer); ed != o.edits->linears.end()) edit = &ed->second;
          it = pending.emplace(t.layer, quantize_linear(*t.src, edit, o.scale_mode)).first;
          release_pages(t.src->data, t.src->nbytes);
          progress.add(t.src->nbytes);
        }
        auto& buf = t.kind == OutTensor::Kind::kCodes ? it->second.codes : it->second.scales;
        write(buf.data(), buf.size());
        buf = {};
        if (it->second.codes.empty() && it->second.scales.empty()) pending.erase(it);
        break;
      }
    }
  };
  const ShardedFiles written = write_sharded_safetensors(out, shard_units, o.shard_bytes, produce);
  summary.shards = static_cast<int>(written.shards);
  summary.bytes_out = written.total_size;
  summary.files = written.files;

  // config.json: the input's, key order kept, plus quantization_config at the end; indent 2
  // and no final newline, as the reference MXFP4 release has it.
  config_json["quantization_config"] = quark::mxfp4_quantization_config(sel.excluded, o.scale_mode);
  write_text(out / "config.json", config_json.dump(2));
  summary.files.push_back("config.json");

  // Every other file of the release (tokenizer, processor, chat template, joint head, ...).
  std::set<std::string> weight_files;
  for (const auto& f : store.files()) weight_files.insert(fs::path(f).filename().string());
  for (const auto& entry : fs::directory_iterator(in)) {
    std::string name = entry.path().filename().string();
    if (!entry.is_regular_file()) continue;  // follows symlinks; folders are not part of a release
    if (name == "config.json" || name == "SHA256SUMS" || name == "model.safetensors.index.json" ||
        weight_files.count(name))
      continue;
    fs::copy_file(entry.path(), out / name, fs::copy_options::overwrite_existing);
    fs::permissions(out / name, fs::perms::owner_write, fs::perm_options::add);  // a read-only source stays editable
    summary.files.push_back(name);
  }
  progress.finish();
  write_sha256sums(out.string(), summary.files);
  summary.files.push_back("SHA256SUMS");
  return summary;
}

}  // namespace stave::quantize
