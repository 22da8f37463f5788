// Packs the backbone prefills of decisions that arrive while the device is busy into one
// forward (a device backbone runs one prefill at a time, so a decision that arrives during a
// prefill waits for it anyway; packing the waiting ones together makes the next forward's
// linear layers see all their rows at once — the DecideBatch throughput of docs/benchmarks.md).
//
// Leader/follower: a caller that finds no prefill running runs one for itself and for every
// sequence that queued meanwhile (oldest first, up to the token and sequence caps), hands each
// its hidden states, and repeats until its own sequence is done; then the next waiting caller
// takes over. A decision on an idle device runs at once, alone. A packed prefill that throws
// is retried one sequence at a time, so one bad sequence fails only its own caller.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <span>

#include "model/backbone.h"

namespace stave {

class PrefillCoalescer {
 public:
  using Prefill = std::function<LentHiddenStates(std::span<const BackboneSequence>)>;

  // max_tokens: a packed prefill holds at most this many tokens (a longer sequence runs alone);
  // max_sequences: and at most this many sequences.
  PrefillCoalescer(Prefill prefill, int64_t max_tokens, size_t max_sequences);

  struct Result {
    std::span<const float> hidden;  // L · hidden_size floats, valid while `hold` lives
    const float* device = nullptr;  // the same rows in device memory when lent there (hidden's data is then null)
    std::shared_ptr<void> hold;
    size_t packed = 0;  // how many sequences shared the prefill (1: alone)
  };
  // Blocks until `sequence` has been prefilled (alone or packed); rethrows its prefill's error.
  Result run(const BackboneSequence& sequence);

 private:
  struct Waiter {
    const BackboneSequence* sequence = nullptr;
    bool done = false;
    Result result;
    std::exception_ptr error;
  };
  // Runs `batch` (the caller holds no lock), fills in each waiter's result or error and
  // completes it.
  void prefill_batch(std::span<Waiter* const> batch);
  // Marks `w` done and wakes its caller, which may then return at once.
  void complete(Waiter* w);

  Prefill prefill_;
  int64_t max_tokens_;
  size_t max_sequences_;
  std::mutex mutex_;
  std::condition_variable changed_;  // a waiter finished, or the leader left
  std::deque<Waiter*> queue_;
  bool leader_ = false;
};

}  // namespace stave
