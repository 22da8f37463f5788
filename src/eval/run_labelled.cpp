#include "eval/run_labelled.h"

#include <unistd.h>

#include <chrono>
#include <memory>

#include "decide/request_handle.h"
#include "eval/results_log.h"
#include "util/progress.h"

namespace stave::eval {

namespace {

// "eval 120/300 records  3.4 records/s  ETA 53s": redrawn in place on a terminal, otherwise a
// line every 10 seconds (and at the end).
class Progress {
 public:
  Progress(std::FILE* out, size_t total) : out_(out), total_(total), tty_(out && isatty(fileno(out))) {}
  void step(size_t done, size_t computed) {
    if (!out_) return;
    const auto now = std::chrono::steady_clock::now();
    const double secs = std::chrono::duration<double>(now - start_).count();
    const bool last = done == total_;
    if (!last && now - last_ < (tty_ ? std::chrono::milliseconds(200) : std::chrono::milliseconds(10000))) return;
    last_ = now;
    const double rate = secs > 0 ? static_cast<double>(computed) / secs : 0.0;
    std::string eta = rate > 0 ? ProgressBar::format_duration(static_cast<double>(total_ - done) / rate) : "?";
    std::fprintf(out_, "%seval %zu/%zu records  %.2f records/s  ETA %s%s", tty_ ? "\r" : "", done, total_, rate,
                 eta.c_str(), tty_ && !last ? "   " : "\n");
    std::fflush(out_);
  }

 private:
  std::FILE* out_;
  size_t total_;
  bool tty_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now(), last_{};
};

RecordResult evaluate(const Engine& model, const Engine* against, const LabelledRecord& rec, const DecideOptions& d) {
  RecordResult r;
  r.line = rec.line;
  r.key = rec.key;
  if (!rec.error.empty()) {
    r.error = rec.error;
    return r;
  }
  try {
    const Request request = make_request(rec.request);  // a copy the engine takes (both models share it)
    const Decision a = model.decide(request, d);
    if (!against) return score_record(rec, a, nullptr);
    Decision b;
    try {
      b = against->decide(request, d);
    } catch (const Error& e) {
      r.error = std::string("--against: ") + e.what();
      return r;
    }
    return score_record(rec, a, &b);
  } catch (const Error& e) {
    r.error = e.what();
  }
  return r;
}

}  // namespace

std::vector<RecordResult> run_labelled(const Engine& model, const Engine* against,
                                       const std::vector<LabelledRecord>& records, const LabelledRunOptions& o) {
  std::vector<size_t> chosen = o.sample ? sample_indices(records.size(), *o.sample, o.seed)
                                        : sample_indices(records.size(), records.size(), 0);
  std::unique_ptr<ResultsLog> log;
  if (!o.out_path.empty()) log = std::make_unique<ResultsLog>(o.out_path, o.run_header);
  std::vector<RecordResult> results;
  results.reserve(chosen.size());
  Progress progress(o.log, chosen.size());
  size_t computed = 0, resumed = 0;
  for (size_t i : chosen) {
    const LabelledRecord& rec = records[i];
    if (const RecordResult* done = log ? log->find(rec.key) : nullptr) {
      results.push_back(*done);
      ++resumed;
    } else {
      results.push_back(evaluate(model, against, rec, o.decide));
      ++computed;
      if (log) log->append(results.back());
      if (o.log && !results.back().error.empty())
        std::fprintf(o.log, "%sline %lld: %s\n", isatty(fileno(o.log)) ? "\r" : "",
                     static_cast<long long>(rec.line), results.back().error.c_str());
    }
    progress.step(results.size(), computed);
  }
  if (o.log && resumed) std::fprintf(o.log, "eval: %zu records taken from %s\n", resumed, o.out_path.c_str());
  return results;
}

}  // namespace stave::eval
