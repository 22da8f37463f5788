#include "measure/bench_run.h"

#include "backends/registry.h"

#include <omp.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "backends/cpu/cpu_features.h"
#include "measure/process_memory.h"
#include "decide/encoder.h"
#include "decide/request.h"
#include "io/release.h"
#include "ops/backend.h"
#include "stave/engine.h"
#include "stave/errors.h"
#include "synth/synth_release.h"
#include "text/tokenizer.h"
#include "decide/media_tokens.h"

namespace stave::measure {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

// Builds every request before the engine loads (the release is opened here only for its
// tokenizer and configs, then closed, so the engine's memory figures are its own).
std::vector<BenchRequest> bench_requests(const BenchOptions& o, const std::string& dir) {
  auto release = open_release(dir);
  auto tokenizer = Tokenizer::from_file(release->tokenizer_path);
  std::optional<MediaTokenIds> media_ids;
  if (o.image) {
    if (!release->config.vision.present || !release->image_processor.present)
      throw Error(ErrorKind::kInvalidRequest, "--image needs a release with a vision tower and a processor config");
    media_ids = media_token_ids(*tokenizer, release->config);
  }
  std::vector<BenchRequest> out;
  for (int64_t n : o.prompt_tokens) {
    int64_t image_tokens = 0;
    EncodedLength measure = [&](const std::string& json) -> int64_t {
      DecisionRequest req = parse_decision_request(json);
      EncodeOptions eo;
      eo.max_length = std::max<int64_t>(kDefaultMaxLength, n + 1);
      std::optional<PreparedMedia> media;
      if (media_ids) media.emplace(req.images, release->image_processor, *media_ids);
      EncodedRequest enc = encode_request(req, *tokenizer, eo, media ? &*media : nullptr);
      image_tokens = 0;
      if (enc.media)
        for (int32_t t : enc.media->mm_token_type_ids) image_tokens += t;
      return static_cast<int64_t>(enc.input_ids.size());
    };
    SyntheticRequestSpec spec{n, o.questions, o.image};
    BenchRequest p{synthesize_request(spec, measure), 0};
    p.image_tokens = image_tokens;
    out.push_back(std::move(p));
  }
  return out;
}

namespace {

Summary summary_of(const std::vector<Timings>& t, double Timings::*field) {
  std::vector<double> v;
  for (const auto& x : t) v.push_back(x.*field);
  return summarize(v);
}

std::string human_bytes(uint64_t b) {
  char buf[32];
  const double v = static_cast<double>(b);
  if (v >= 1024.0 * 1024 * 1024) std::snprintf(buf, sizeof buf, "%.2f GiB", v / (1024.0 * 1024 * 1024));
  else std::snprintf(buf, sizeof buf, "%.1f MiB", v / (1024.0 * 1024));
  return buf;
}

nlohmann::ordered_json summary_json(const Summary& s) {
  return {{"p50", s.p50}, {"p90", s.p90}, {"mean", s.mean}, {"min", s.min}, {"max", s.max}, {"stddev", s.stddev}};
}

}  // namespace

std::vector<int64_t> parse_token_list(const std::string& text, const std::string& option) {
  std::vector<int64_t> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size() || v < 1 || v > (1ll << 24))
      throw Error(ErrorKind::kInvalidRequest,
                  option + " takes positive counts separated by commas (like 128,512); bad item \"" + item + "\"");
    out.push_back(v);
  }
  if (out.empty()) throw Error(ErrorKind::kInvalidRequest, option + " is empty");
  return out;
}

BenchReport run_bench(const BenchOptions& o) {
  if (o.repeat < 1) throw Error(ErrorKind::kInvalidRequest, "--repeat must be at least 1");
  if (o.warmup < 0) throw Error(ErrorKind::kInvalidRequest, "--warmup must not be negative");
  if (o.threads < 0) throw Error(ErrorKind::kInvalidRequest, "--threads must not be negative");
  if (o.batch < 1 || o.batch > 4096) throw Error(ErrorKind::kInvalidRequest, "--batch must be between 1 and 4096");
  auto log = [&](const std::string& s) {
    if (o.log) o.log(s);
  };
  const std::string dir = resolve_model_path(o.model);
  log("building requests of exactly " + std::to_string(o.prompt_tokens.size()) + " length(s)");
  std::vector<BenchRequest> requests = bench_requests(o, dir);

  BenchReport r;
  r.model = dir;
  r.model_name = std::filesystem::path(dir).filename().string();
  if (r.model_name.empty()) r.model_name = std::filesystem::path(dir).parent_path().filename().string();
  r.synthetic = synth::is_synthetic_release(dir);
  r.questions = o.questions;
  if (o.image) r.image = std::to_string(o.image->width) + "x" + std::to_string(o.image->height);

  EngineOptions eo;
  eo.model = dir;
  eo.precision = o.precision;
  eo.threads = o.threads;
  eo.device = o.device;
  eo.fp8_cache_gib = o.fp8_cache_gib;
  const auto t0 = Clock::now();
  auto engine = Engine::load(eo);
  r.load_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  const ModelInfo& info = engine->info();
  r.weight_format = info.weight_format;
  r.num_layers = info.num_layers;
  r.hidden_size = info.hidden_size;
  r.threads = omp_get_max_threads();
  r.precision = to_string(o.precision);
  r.isa = o.precision == Precision::kExact ? "reference" : cpu::isa_name(cpu::active_isa());
  r.backend = o.device == "cpu" ? std::string(cpu_backend(o.precision).name()) : o.device;
  MappedBytes m = mapped_under(dir);
  r.weights_mapped_bytes = m.mapped;
  r.weights_resident_after_load = m.resident;
  log("loaded " + r.model_name + " in " + std::to_string(static_cast<int>(r.load_ms)) + " ms");

  for (const BenchRequest& p : requests) {
    DecideOptions d;
    d.max_length = std::max<int64_t>(kDefaultMaxLength, p.request.tokens + 1);
    std::vector<Timings> times;
    std::vector<Request> batch;  // empty: one decide() per run
    if (o.batch > 1) batch.assign(static_cast<size_t>(o.batch), Request::parse(p.request.json));
    auto check = [&](const Decision& dec) {
      if (dec.usage.input_tokens != p.request.tokens || dec.usage.truncated_state_tokens != 0)
        throw Error(ErrorKind::kInternal, "the engine read " + std::to_string(dec.usage.input_tokens) +
                                              " tokens of a request built to be " + std::to_string(p.request.tokens));
    };
    for (int i = 0; i < o.warmup + o.repeat; ++i) {
      Timings run;
      if (batch.empty()) {
        const Decision dec = engine->decide(p.request.json, d);
        check(dec);
        run = dec.timings;
      } else {
        // Per batch: the wall time of the call, the shared prefill, the heads' and encoders' sum.
        const auto tb = Clock::now();
        const std::vector<Decision> decs = engine->decide_batch(batch, d);
        run.total_ms = std::chrono::duration<double, std::milli>(Clock::now() - tb).count();
        run.backbone_ms = decs.front().timings.backbone_ms;
        for (const Decision& dec : decs) {
          check(dec);
          run.head_ms += dec.timings.head_ms;
          run.encode_ms += dec.timings.encode_ms;
          run.vision_ms += dec.timings.vision_ms;
        }
      }
      if (i >= o.warmup) times.push_back(run);
      log("  " + std::to_string(p.request.tokens) + " tokens" + (batch.empty() ? "" : " × " + std::to_string(o.batch)) +
          ": run " + std::to_string(i + 1) + "/" + std::to_string(o.warmup + o.repeat) +
          (i < o.warmup ? " (warm-up)" : "") + " " + std::to_string(static_cast<int>(run.total_ms)) + " ms");
    }
    LengthResult lr;
    lr.prompt_tokens = p.request.tokens;
    lr.image_tokens = p.image_tokens;
    lr.repeat = o.repeat;
    lr.batch = o.batch;
    lr.total_ms = summary_of(times, &Timings::total_ms);
    lr.backbone_ms = summary_of(times, &Timings::backbone_ms);
    lr.head_ms = summary_of(times, &Timings::head_ms);
    lr.encode_ms = summary_of(times, &Timings::encode_ms);
    lr.vision_ms = summary_of(times, &Timings::vision_ms);
    std::vector<double> prefill;
    for (const auto& t : times) prefill.push_back(t.backbone_ms + t.vision_ms);
    const double prefill_p50 = percentile(prefill, 0.5);
    const double run_tokens = static_cast<double>(lr.prompt_tokens) * lr.batch;
    lr.prefill_tokens_per_s = prefill_p50 > 0 ? 1000.0 * run_tokens / prefill_p50 : 0;
    lr.decision_tokens_per_s = lr.total_ms.p50 > 0 ? 1000.0 * run_tokens / lr.total_ms.p50 : 0;
    lr.peak_rss_bytes = peak_rss_bytes();
    lr.weights_resident_bytes = mapped_under(dir).resident;
    r.results.push_back(lr);
  }
  return r;
}

std::string markdown_table(const BenchReport& r) {
  std::ostringstream s;
  char buf[512];
  s << "model: " << r.model << (r.synthetic ? " (random weights, real shapes)" : "") << "\n";
  std::snprintf(buf, sizeof buf,
                "format %s, %lld layers, hidden %lld; load %.0f ms; weights mapped %s, resident after load %s; "
                "%d threads, precision %s, ISA %s (backend %s)%s\n\n",
                r.weight_format.c_str(), static_cast<long long>(r.num_layers), static_cast<long long>(r.hidden_size),
                r.load_ms, human_bytes(r.weights_mapped_bytes).c_str(), human_bytes(r.weights_resident_after_load).c_str(),
                r.threads, r.precision.c_str(), r.isa.c_str(), r.backend.c_str(),
                r.image.empty() ? "" : (", image " + r.image).c_str());
  s << buf;
  s << "| model | format | threads | precision | test | ms p50 | ms p90 | prefill t/s | head ms | peak RSS | weights resident |\n";
  s << "| --- | --- | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n";
  for (const auto& x : r.results) {
    const std::string extra = (x.image_tokens ? " (" + std::to_string(x.image_tokens) + " img)" : std::string()) +
                              (x.batch > 1 ? " × " + std::to_string(x.batch) : std::string());
    std::snprintf(buf, sizeof buf, "| %s | %s | %d | %s | pp%lld%s | %.1f | %.1f | %.1f | %.2f | %s | %s |\n",
                  r.model_name.c_str(), r.weight_format.c_str(), r.threads, r.precision.c_str(),
                  static_cast<long long>(x.prompt_tokens), extra.c_str(), x.total_ms.p50,
                  x.total_ms.p90, x.prefill_tokens_per_s, x.head_ms.p50, human_bytes(x.peak_rss_bytes).c_str(),
                  human_bytes(x.weights_resident_bytes).c_str());
    s << buf;
  }
  return s.str();
}

nlohmann::ordered_json to_json(const BenchReport& r) {
  nlohmann::ordered_json results = nlohmann::ordered_json::array();
  for (const auto& x : r.results)
    results.push_back({{"prompt_tokens", x.prompt_tokens},
                       {"image_tokens", x.image_tokens},
                       {"repeat", x.repeat},
                       {"batch", x.batch},
                       {"total_ms", summary_json(x.total_ms)},
                       {"backbone_ms", summary_json(x.backbone_ms)},
                       {"head_ms", summary_json(x.head_ms)},
                       {"encode_ms", summary_json(x.encode_ms)},
                       {"vision_ms", summary_json(x.vision_ms)},
                       {"prefill_tokens_per_s", x.prefill_tokens_per_s},
                       {"decision_tokens_per_s", x.decision_tokens_per_s},
                       {"peak_rss_bytes", x.peak_rss_bytes},
                       {"weights_resident_bytes", x.weights_resident_bytes}});
  return {{"model", r.model},
          {"synthetic", r.synthetic},
          {"weight_format", r.weight_format},
          {"num_layers", r.num_layers},
          {"hidden_size", r.hidden_size},
          {"load_ms", r.load_ms},
          {"weights_mapped_bytes", r.weights_mapped_bytes},
          {"weights_resident_after_load_bytes", r.weights_resident_after_load},
          {"threads", r.threads},
          {"precision", r.precision},
          {"isa", r.isa},
          {"backend", r.backend},
          {"questions", r.questions},
          {"image", r.image},
          {"results", results}};
}

}  // namespace stave::measure
