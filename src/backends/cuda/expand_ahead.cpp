// Expansion ahead: see expand_ahead.h.
#include "backends/cuda/expand_ahead.h"

#include <algorithm>

#include "util/env_choice.h"

namespace stave::cuda {

bool expand_ahead_from_env() { return env_choice<bool>("STAVE_CUDA_EXPAND_AHEAD", {{"on", true}, {"off", false}}); }

int gemm_sm_target_from_env() { return env_int("STAVE_CUDA_GEMM_SMS", 0, 1024, 0); }

int expand_depth_from_env() { return env_int("STAVE_CUDA_EXPAND_DEPTH", 1, 8, 4); }

ExpandAhead::ExpandAhead(cudaStream_t main, Expand expand, int depth)
    : main_(main),
      expand_(expand),
      depth_(std::max(depth, 1)),
      buf_(static_cast<size_t>(depth_) + 1),
      holds_(buf_.size()),
      ready_(buf_.size(), nullptr),
      used_(buf_.size(), 0) {
  int least = 0, greatest = 0;
  STAVE_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  // The lowest priority: where both streams have blocks waiting, the main stream's go first.
  STAVE_CUDA_CHECK(cudaStreamCreateWithPriority(&side_, cudaStreamNonBlocking, least));
  for (cudaEvent_t& e : ready_) STAVE_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  STAVE_CUDA_CHECK(cudaEventCreateWithFlags(&main_mark_, cudaEventDisableTiming));
}

ExpandAhead::~ExpandAhead() {
  if (side_) cudaStreamSynchronize(side_);
  for (cudaEvent_t e : ready_)
    if (e) cudaEventDestroy(e);
  if (main_mark_) cudaEventDestroy(main_mark_);
  if (side_) cudaStreamDestroy(side_);
}

bool ExpandAhead::holds(int slot, const Fp8Source* w) const {
  const std::shared_ptr<const Fp8Source> h = holds_[slot].lock();
  return h && h.get() == w;
}

int ExpandAhead::slot_of(const Fp8Source* w) const {
  for (int i = 0; i < static_cast<int>(buf_.size()); ++i)
    if (holds(i, w)) return i;
  return -1;
}

int ExpandAhead::victim(const std::vector<int>& keep) const {
  int best = -1;
  for (int i = 0; i < static_cast<int>(buf_.size()); ++i) {
    if (std::find(keep.begin(), keep.end(), i) != keep.end()) continue;
    if (best < 0 || used_[i] < used_[best]) best = i;
  }
  return best;
}

// Grows buffer `slot` to `bytes` once nothing in flight uses it (growing happens in the first
// forward only: the buffers end at the largest weight's size).
void ExpandAhead::fit(int slot, size_t bytes) {
  if (buf_[slot].bytes() >= bytes) return;
  STAVE_CUDA_CHECK(cudaStreamSynchronize(side_));
  STAVE_CUDA_CHECK(cudaStreamSynchronize(main_));
  buf_[slot].resize(bytes);
  holds_[slot].reset();
}

// Starts w's expansion into buffer `slot` on the side stream, after every read of that buffer
// already enqueued on the main stream.
void ExpandAhead::prefetch(int slot, const std::shared_ptr<const Fp8Source>& w) {
  fit(slot, static_cast<size_t>(w->rows * w->cols));
  STAVE_CUDA_CHECK(cudaEventRecord(main_mark_, main_));
  STAVE_CUDA_CHECK(cudaStreamWaitEvent(side_, main_mark_, 0));
  expand_(*w, buf_[slot].as<uint8_t>(), side_);
  STAVE_CUDA_CHECK(cudaEventRecord(ready_[slot], side_));
  holds_[slot] = w;
  used_[slot] = ++clock_;
}

const uint8_t* ExpandAhead::weight(const std::shared_ptr<const Fp8Source>& w) {
  if (previous_ && previous_ != w.get()) next_[previous_] = w;
  previous_ = w.get();
  int slot = slot_of(w.get());
  if (slot >= 0) {
    ++hits_;
  } else {
    ++misses_;
    // Not prefetched: expanded here, into the least recently used buffer the last product did
    // not read, once any side-stream write into it (a prefetch that guessed wrong) is done.
    slot = victim({last_slot_});
    fit(slot, static_cast<size_t>(w->rows * w->cols));
    STAVE_CUDA_CHECK(cudaStreamWaitEvent(main_, ready_[slot], 0));
    expand_(*w, buf_[slot].as<uint8_t>(), main_);
    STAVE_CUDA_CHECK(cudaEventRecord(ready_[slot], main_));
    holds_[slot] = w;
  }
  used_[slot] = ++clock_;
  // The buffer's last write (on either stream) is complete before main reads it.
  STAVE_CUDA_CHECK(cudaStreamWaitEvent(main_, ready_[slot], 0));
  uint8_t* out = buf_[slot].as<uint8_t>();
  last_slot_ = slot;
  // The weights that followed w last time, up to depth_ of them: each one not already held goes
  // into a buffer that holds neither w nor one of those before it in the chain.
  std::vector<int> keep{slot};
  std::shared_ptr<const Fp8Source> at = w;
  for (int d = 0; d < depth_; ++d) {
    const auto it = next_.find(at.get());
    if (it == next_.end()) break;
    std::shared_ptr<const Fp8Source> n = it->second.lock();
    if (!n || n == w) break;
    int held = slot_of(n.get());
    if (held < 0) {
      held = victim(keep);
      if (held < 0) break;
      prefetch(held, n);
    }
    keep.push_back(held);
    at = std::move(n);
  }
  return out;
}

}  // namespace stave::cuda
