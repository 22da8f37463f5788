// PrefillCoalescer (src/engine/prefill_coalescer.h) with a fake prefill: concurrent callers are
// packed into shared prefills and each gets its own rows; the caps hold; one failing sequence
// fails only its own caller; the shared hold lives until the last caller drops it.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/prefill_coalescer.h"
#include "stave/errors.h"

namespace stave {
namespace {

constexpr int32_t kBadId = -7;  // the fake prefill refuses any batch holding it

// Hidden "rows": one float per token, the token's id, so a caller can check it got its own.
struct FakeDevice {
  std::mutex mutex;
  std::vector<size_t> batch_sizes;
  std::vector<int64_t> batch_tokens;
  std::atomic<int> holds_alive{0};
  // Like the CUDA backbone's page-locked stagings: at most this many results lent at once, a
  // prefill waits for one to be dropped (0: no limit).
  int max_alive = 0;
  std::condition_variable freed;
  std::function<void()> on_first;  // runs inside the first prefill (lets the others queue)
  bool first = true;

  LentHiddenStates prefill(std::span<const BackboneSequence> seqs) {
    std::function<void()> hook;
    {
      std::lock_guard lock(mutex);
      int64_t tokens = 0;
      for (const auto& s : seqs) tokens += static_cast<int64_t>(s.ids.size());
      batch_sizes.push_back(seqs.size());
      batch_tokens.push_back(tokens);
      if (first) hook = on_first;
      first = false;
    }
    if (hook) hook();
    for (const auto& s : seqs)
      for (int32_t id : s.ids)
        if (id == kBadId) throw Error(ErrorKind::kInvalidRequest, "bad id");
    auto rows = std::make_shared<std::vector<std::vector<float>>>();
    for (const auto& s : seqs) rows->emplace_back(s.ids.begin(), s.ids.end());
    {
      std::unique_lock lock(mutex);
      freed.wait(lock, [&] { return max_alive == 0 || holds_alive.load() < max_alive; });
      ++holds_alive;
    }
    LentHiddenStates out;
    for (const auto& r : *rows) out.sequences.emplace_back(r.data(), r.size());
    out.hold = std::shared_ptr<void>(new int(0), [this, rows](int* p) {
      delete p;
      {
        std::lock_guard lock(mutex);
        --holds_alive;
      }
      freed.notify_all();
    });
    return out;
  }
};

PrefillCoalescer::Prefill prefill_on(FakeDevice& dev) {
  return [&dev](std::span<const BackboneSequence> s) { return dev.prefill(s); };
}

// Runs caller(t) for t < n on n threads at once. The device's first prefill waits until every
// caller has started (and 50 ms more), so the others queue behind it.
void run_concurrently(FakeDevice& dev, int n, const std::function<void(int)>& caller) {
  std::atomic<int> started{0};
  dev.on_first = [&] {
    while (started.load() < n) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < n; ++t)
    threads.emplace_back([&, t] {
      ++started;
      caller(t);
    });
  for (auto& th : threads) th.join();
  dev.on_first = nullptr;  // it refers to `started`
}

std::vector<int32_t> ids_for(int caller, int length) {
  std::vector<int32_t> v(static_cast<size_t>(length));
  for (int i = 0; i < length; ++i) v[i] = caller * 1000 + i;
  return v;
}

TEST(PrefillCoalescer, ConcurrentCallersArePackedAndGetTheirOwnRows) {
  FakeDevice dev;
  constexpr int kCallers = 8;
  PrefillCoalescer c(prefill_on(dev), 1 << 20, 64);
  std::vector<int> ok(kCallers, 0);
  run_concurrently(dev, kCallers, [&](int t) {
    const std::vector<int32_t> ids = ids_for(t, 3 + t);
    const PrefillCoalescer::Result r = c.run({ids, {}, {}});
    bool mine = r.hidden.size() == ids.size();
    for (size_t i = 0; mine && i < ids.size(); ++i) mine = r.hidden[i] == static_cast<float>(ids[i]);
    ok[t] = mine ? 1 : 0;
  });
  for (int t = 0; t < kCallers; ++t) EXPECT_EQ(ok[t], 1) << "caller " << t;
  size_t total = 0, largest = 0;
  for (size_t n : dev.batch_sizes) total += n, largest = std::max(largest, n);
  EXPECT_EQ(total, static_cast<size_t>(kCallers));
  EXPECT_GE(largest, 2u) << "nothing was packed";
  EXPECT_LT(dev.batch_sizes.size(), static_cast<size_t>(kCallers));
  EXPECT_EQ(dev.holds_alive.load(), 0);  // every caller dropped its result
}

TEST(PrefillCoalescer, CapsBoundEachPackedPrefill) {
  FakeDevice dev;
  constexpr int kCallers = 10;
  const int64_t max_tokens = 25;
  const size_t max_sequences = 3;
  PrefillCoalescer c(prefill_on(dev), max_tokens, max_sequences);
  run_concurrently(dev, kCallers, [&](int t) {
    const std::vector<int32_t> ids = ids_for(t, t == 4 ? 40 : 8);  // caller 4 alone exceeds the cap
    EXPECT_EQ(c.run({ids, {}, {}}).hidden.size(), ids.size());
  });
  for (size_t i = 0; i < dev.batch_sizes.size(); ++i) {
    EXPECT_LE(dev.batch_sizes[i], max_sequences);
    if (dev.batch_sizes[i] > 1) {
      EXPECT_LE(dev.batch_tokens[i], max_tokens);
    }
  }
}

// Also with only two results lendable at once (the CUDA backbone's two stagings): the packed
// prefill fails, and the one-by-one retry must hand each result over as soon as it is made, or
// the third retry would wait forever for a staging that an unnotified caller holds.
TEST(PrefillCoalescer, AFailingSequenceFailsOnlyItsCaller) {
  FakeDevice dev;
  dev.max_alive = 2;
  constexpr int kCallers = 6;
  PrefillCoalescer c(prefill_on(dev), 1 << 20, 64);
  std::vector<int> outcome(kCallers, -1);  // 1 answered, 0 threw
  run_concurrently(dev, kCallers, [&](int t) {
    std::vector<int32_t> ids = ids_for(t, 4);
    if (t == 3) ids[2] = kBadId;
    try {
      const PrefillCoalescer::Result r = c.run({ids, {}, {}});
      std::this_thread::sleep_for(std::chrono::milliseconds(5));  // "the head" holds the result a while
      outcome[t] = r.hidden.size() == 4 ? 1 : -2;
    } catch (const Error& e) {
      outcome[t] = std::string(e.what()) == "bad id" ? 0 : -3;
    }
  });
  for (int t = 0; t < kCallers; ++t) EXPECT_EQ(outcome[t], t == 3 ? 0 : 1) << "caller " << t;
}

TEST(PrefillCoalescer, AloneOnAnIdleDeviceRunsAtOnce) {
  FakeDevice dev;
  PrefillCoalescer c(prefill_on(dev), 100, 4);
  const std::vector<int32_t> ids = ids_for(1, 5);
  for (int i = 0; i < 3; ++i) {
    const auto r = c.run({ids, {}, {}});
    EXPECT_EQ(r.packed, 1u);
  }
  EXPECT_EQ(dev.batch_sizes, (std::vector<size_t>{1, 1, 1}));
  EXPECT_THROW(PrefillCoalescer(nullptr, 100, 4), Error);
  EXPECT_THROW(PrefillCoalescer(prefill_on(dev), 0, 4), Error);
}

}  // namespace
}  // namespace stave
