#include "ops/head_memory.h"

#include <algorithm>
#include <string>

#include "ops/backend.h"
#include "ops/reference.h"
#include "stave/errors.h"

namespace stave {

ref::ProjectedKeyValues project_key_values(const Backend& backend, const ref::MultiheadAttentionWeights& w,
                                           const float* x, int64_t rows, float* q) {
  const int64_t E = w.embed_dim, first = q ? 0 : 1, blocks = 3 - first;  // in_proj row blocks q, k, v
  ref::ProjectedKeyValues kv;
  kv.rows = rows;
  kv.keys.resize(static_cast<size_t>(rows * E));
  kv.values.resize(static_cast<size_t>(rows * E));
  std::vector<float> all(static_cast<size_t>(rows * blocks * E));
  backend.matmul_nt(x, rows, E, w.in_proj_weight + first * E * E, blocks * E, w.in_proj_bias + first * E, all.data());
#pragma omp parallel for schedule(static) if (rows * E >= (int64_t{1} << 18))
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = all.data() + r * blocks * E;
    if (q) std::copy_n(row, E, q + r * E);
    std::copy_n(row + (blocks - 2) * E, E, kv.keys.data() + r * E);
    std::copy_n(row + (blocks - 1) * E, E, kv.values.data() + r * E);
  }
  return kv;
}

void HeadMemory::normed_hidden_spans(std::span<const Span> spans, float* out) const {
  for (const Span& s : spans) {
    normed_hidden_rows(s.first, s.second, out);
    out += (s.second - s.first) * hidden_size();
  }
}

namespace {

class HostHeadMemory final : public HeadMemory {
 public:
  HostHeadMemory(const Backend& backend, const HeadMemorySpec& spec, const float* hidden, int64_t L)
      : backend_(backend), spec_(spec), L_(L) {
    const int64_t H = spec.hidden_size, W = spec.width;
    seq_.resize(static_cast<size_t>(L * H));
    ref::layer_norm(hidden, L, H, spec.hidden_norm.weight, spec.hidden_norm.bias, spec.hidden_norm.eps, seq_.data());
    memory_.resize(static_cast<size_t>(L * W));
    backend.matmul_nt(seq_.data(), L, H, spec.memory_projection, W, nullptr, memory_.data());
  }

  int64_t hidden_size() const override { return spec_.hidden_size; }

  void normed_hidden_rows(int64_t begin, int64_t end, float* out) const override {
    const int64_t H = spec_.hidden_size;
    std::copy(seq_.begin() + begin * H, seq_.begin() + end * H, out);
  }

  void attend(size_t a, const float* query, int64_t rows, float* out) const override {
    const HeadMemoryAttention& at = spec_.attentions.at(a);
    const float* source = memory_.data();
    std::vector<float> normed;
    if (at.normalise_memory) {
      normed.resize(memory_.size());
      ref::layer_norm(memory_.data(), L_, spec_.width, at.memory_norm.weight, at.memory_norm.bias,
                      at.memory_norm.eps, normed.data());
      source = normed.data();
    }
    const ref::ProjectedKeyValues kv = project_key_values(backend_, at.attention, source, L_);
    ref::mha_attend(at.attention, query, rows, kv, out);
  }

 private:
  const Backend& backend_;
  HeadMemorySpec spec_;
  int64_t L_;
  std::vector<float> seq_, memory_;  // [L, H], [L, W]
};

}  // namespace

std::unique_ptr<HeadMemory> host_head_memory(const Backend& backend, const HeadMemorySpec& spec, HiddenRows hidden,
                                             int64_t L) {
  if (L <= 0 || hidden.empty()) throw Error(ErrorKind::kInternal, "head memory: no hidden states");
  if (!hidden.host)
    throw Error(ErrorKind::kInternal, "head memory: the hidden states are only in device memory, which the " +
                                          std::string(backend.name()) + " backend's head cannot read");
  return std::make_unique<HostHeadMemory>(backend, spec, hidden.host, L);
}

}  // namespace stave
