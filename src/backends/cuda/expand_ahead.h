// Expansion ahead (the default; STAVE_CUDA_EXPAND_AHEAD=off expands on the main stream): the FP8 path writes each MXFP4 weight's E4M3
// expansion before its product (linear_fp8.h), a pass bound by memory that the GEMM after it
// waits for. A forward runs its products in the same order every time, so the weight that
// followed this one last time is expanded on a second, low-priority stream into the other of
// two buffers while this one's GEMM (and whatever the model runs before the next product)
// runs on the main stream; the next product then finds its weight ready. A weight not found
// ready (the first forward, or an order that changed) is expanded on the main stream as
// without the switch. The bytes are the same either way, so the products are too.
// STAVE_CUDA_EXPAND_DEPTH=D (1 … 8, default 4) looks D weights ahead along the learned order,
// in D + 1 buffers, so that a long stretch without products (the Gated DeltaNet's conv and delta
// rule, attention) expands the next several weights instead of one. Depth 4 is the default since
// 2026-12-07 10:30 (27B backbone on an H100, 512 / 2048 tokens, with the byte-table expansion:
// depth 1 70.6 / 152.4 ms, 2 69.7 / 151.8, 3 66.6 / 151.5, 4 65.6 / 150.4, 5 65.3–65.5 /
// 149.6–151.2, 6 69.6 / 151.7, 8 69.2–69.4 / 152.0–152.8; docs/benchmarks.md). Depth 1 is the
// two-buffer form before it.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "backends/cuda/device_buffer.h"

namespace stave::cuda {

// What an E4M3 expansion reads: a weight's packed codes [rows, cols/2], E8M0 scales
// [rows, cols/32] and row exponents R_w [rows] (device). A DeviceLinear on the FP8 path owns
// one (DeviceLinear::fp8_source); ExpandAhead holds it weakly, so a weight freed since its last
// product is never read.
struct Fp8Source {
  const uint8_t* codes;
  const uint8_t* scales;
  const int* row_exp;
  int64_t rows, cols;
};

// STAVE_CUDA_EXPAND_AHEAD: unset or "on" → true, "off" → false; anything else is an Error
// naming the variable. On by default since it measured faster on an H100 (27B decisions
// 83.2 / 195 / 717 → 77.5 / 191 / 718 ms at 512 / 2048 / 8192 tokens, docs/benchmarks.md).
bool expand_ahead_from_env();

// STAVE_CUDA_EXPAND_DEPTH: how many weights ahead to expand (1 … 8; unset: 4). Anything else is
// an Error naming the variable.
int expand_depth_from_env();

// STAVE_CUDA_GEMM_SMS: the number of SMs cuBLASLt's FP8 GEMMs aim at
// (CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET), leaving the rest to the expansion ahead; unset or 0:
// all. Anything but 0 … 1024 is an Error naming the variable.
int gemm_sm_target_from_env();

class ExpandAhead {
 public:
  // Writes w's E4M3 expansion [w.rows, w.cols] to out on stream s.
  using Expand = void (*)(const Fp8Source& w, uint8_t* out, cudaStream_t s);
  // depth: how many weights ahead of each product to expand (≥ 1), in depth + 1 buffers.
  ExpandAhead(cudaStream_t main, Expand expand, int depth = 1);
  ~ExpandAhead();
  ExpandAhead(const ExpandAhead&) = delete;
  ExpandAhead& operator=(const ExpandAhead&) = delete;

  // w's expansion, complete for work enqueued on the main stream after this call; then starts
  // the expansions of the `depth` weights that followed w last time (those not already held),
  // on the side stream. Call it right before enqueuing w's product: that product and everything
  // after it overlap the expansions.
  const uint8_t* weight(const std::shared_ptr<const Fp8Source>& w);
  // The buffer the last weight() returned (benchmarks rerun that product).
  const uint8_t* last() const { return last_slot_ < 0 ? nullptr : buf_[last_slot_].as<uint8_t>(); }
  // Expansions found ready / done on the main stream (tests and benchmarks).
  int64_t hits() const { return hits_; }
  int64_t misses() const { return misses_; }

 private:
  void fit(int slot, size_t bytes);
  void prefetch(int slot, const std::shared_ptr<const Fp8Source>& w);
  bool holds(int slot, const Fp8Source* w) const;
  int slot_of(const Fp8Source* w) const;  // the buffer holding w's expansion, or −1
  // The least recently used buffer that is none of `keep` (−1 entries ignored).
  int victim(const std::vector<int>& keep) const;

  cudaStream_t main_, side_ = nullptr;
  Expand expand_;
  int depth_;
  std::vector<DeviceBuffer> buf_;                      // depth + 1
  std::vector<std::weak_ptr<const Fp8Source>> holds_;  // whose expansion each buffer has (or will have)
  std::vector<cudaEvent_t> ready_;                     // recorded after each buffer's last write
  std::vector<uint64_t> used_;                         // when each buffer was last read or filled
  uint64_t clock_ = 0;
  cudaEvent_t main_mark_ = nullptr;                    // main's work so far (reads of a buffer included)
  // The weight that followed each one last time (keyed by address: a new weight at a freed one's
  // address inherits a prediction, never its bytes).
  std::unordered_map<const Fp8Source*, std::weak_ptr<const Fp8Source>> next_;
  const Fp8Source* previous_ = nullptr;
  int last_slot_ = -1;  // the buffer the last weight() returned
  int64_t hits_ = 0, misses_ = 0;
};

}  // namespace stave::cuda
