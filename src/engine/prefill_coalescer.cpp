#include "engine/prefill_coalescer.h"

#include <vector>

#include "stave/errors.h"

namespace stave {

PrefillCoalescer::PrefillCoalescer(Prefill prefill, int64_t max_tokens, size_t max_sequences)
    : prefill_(std::move(prefill)), max_tokens_(max_tokens), max_sequences_(max_sequences) {
  if (!prefill_ || max_tokens_ < 1 || max_sequences_ < 1)
    throw Error(ErrorKind::kInternal, "prefill coalescer: needs a prefill and positive caps");
}

void PrefillCoalescer::complete(Waiter* w) {
  std::lock_guard lock(mutex_);
  w->done = true;  // from here on the waiter may return: `w` is not touched again
  changed_.notify_all();
}

void PrefillCoalescer::prefill_batch(std::span<Waiter* const> batch) {
  std::vector<BackboneSequence> seqs;
  for (const Waiter* w : batch) seqs.push_back(*w->sequence);
  try {
    LentHiddenStates lent = prefill_(seqs);
    if (lent.sequences.size() != batch.size())
      throw Error(ErrorKind::kInternal, "prefill returned " + std::to_string(lent.sequences.size()) +
                                            " results for " + std::to_string(batch.size()) + " sequences");
    if (!lent.device.empty() && lent.device.size() != batch.size())
      throw Error(ErrorKind::kInternal, "prefill lent " + std::to_string(lent.device.size()) +
                                            " device results for " + std::to_string(batch.size()) + " sequences");
    for (size_t i = 0; i < batch.size(); ++i)
      batch[i]->result = {lent.sequences[i], lent.device.empty() ? nullptr : lent.device[i], lent.hold, batch.size()};
  } catch (...) {
    if (batch.size() == 1) {
      batch[0]->error = std::current_exception();
      complete(batch[0]);
      return;
    }
    // One sequence (a bad token id, a size the device cannot hold) must not fail the others.
    // Each is completed as soon as it is done, so its caller can release its hidden states
    // (the device's stagings are few) while the next one runs.
    for (Waiter* w : batch) prefill_batch(std::span<Waiter* const>(&w, 1));
    return;
  }
  for (Waiter* w : batch) complete(w);
}

PrefillCoalescer::Result PrefillCoalescer::run(const BackboneSequence& sequence) {
  Waiter self;
  self.sequence = &sequence;
  std::unique_lock lock(mutex_);
  queue_.push_back(&self);
  while (!self.done) {
    if (leader_) {
      changed_.wait(lock);
      continue;
    }
    // Lead: prefill the oldest waiters (this one among them sooner or later) until done.
    leader_ = true;
    while (!self.done) {
      std::vector<Waiter*> batch;
      int64_t tokens = 0;
      while (!queue_.empty() && batch.size() < max_sequences_) {
        const int64_t n = static_cast<int64_t>(queue_.front()->sequence->ids.size());
        if (!batch.empty() && tokens + n > max_tokens_) break;
        tokens += n;
        batch.push_back(queue_.front());
        queue_.pop_front();
      }
      lock.unlock();
      prefill_batch(batch);  // completes every waiter of the batch
      lock.lock();
    }
    leader_ = false;
    changed_.notify_all();  // a waiter still queued becomes the next leader
  }
  if (self.error) std::rethrow_exception(self.error);
  return std::move(self.result);
}

}  // namespace stave
