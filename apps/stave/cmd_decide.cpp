// stave decide: answer SystemOne requests with a Clef release (one request, or a JSONL batch).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "bench_cli.h"
#include "command.h"
#include "request_files.h"
#include "stave/engine.h"
#include "util/mapped_file.h"

namespace stave::cli {
namespace {

struct DecideArgs {
  std::string model;
  std::string revision;
  std::string precision = "fast";
  std::string device = "cpu";
  double fp8_cache_gib = 0;
  int64_t max_length = 16384;
  int64_t max_state_tokens = -1;
  int threads = 0;
  bool logits = false;
  std::string confidence = "reference";
  std::string truncate = "keep";
  bool verify = false;
  std::string request;
  std::string batch;
  std::string out;
  int pack = 1;
};

std::string read_input(const std::string& path) {
  if (path == "-") {
    std::ostringstream ss;
    ss << std::cin.rdbuf();
    return ss.str();
  }
  return read_file(path);
}

int run(const DecideArgs& a) {
  if (a.request.empty() == a.batch.empty())
    return print_error_json("give either a REQUEST.json (or - for stdin) or --batch IN.jsonl");
  if (a.pack < 1 || a.pack > 4096) return print_error_json("--pack must be between 1 and 4096");
  if (a.pack > 1 && a.batch.empty()) return print_error_json("--pack needs --batch IN.jsonl");
  EngineOptions eo;
  eo.model = a.model;
  eo.revision = a.revision;
  auto p = parse_precision(a.precision);
  if (!p) return print_error_json("--precision must be exact or fast, not \"" + a.precision + "\"");
  eo.precision = *p;
  eo.device = a.device;
  eo.fp8_cache_gib = a.fp8_cache_gib;
  eo.threads = a.threads;
  eo.verify_checksums = a.verify;
  DecideOptions d;
  d.max_length = a.max_length;
  if (a.max_state_tokens >= 0) d.max_state_tokens = a.max_state_tokens;
  d.include_logits = a.logits;
  auto c = parse_confidence_mode(a.confidence);
  if (!c) return print_error_json("--confidence must be reference, workers-ai or jev, not \"" + a.confidence + "\"");
  d.confidence = *c;
  if (a.truncate != "keep" && a.truncate != "refuse")
    return print_error_json("--truncate must be keep or refuse, not \"" + a.truncate + "\"");
  d.truncation = a.truncate == "refuse" ? TruncationPolicy::kRefuse : TruncationPolicy::kTruncate;

  // Read the request (or open the batch) before loading the model, so a bad path fails fast.
  std::string single;
  if (!a.request.empty()) single = read_input(a.request);
  std::ifstream in;
  if (!a.batch.empty()) {
    in.open(a.batch);
    if (!in) return print_error_json("cannot read " + a.batch);
  }
  auto engine = Engine::load(eo);
  if (engine->info().synthetic)
    std::cerr << "note: " << engine->info().path
              << " was made by `stave synth`: its weights are RANDOM, so the answers are meaningless\n";

  if (!a.request.empty()) {
    Decision dec = engine->decide(parse_cli_request(single, request_base_dir(a.request)), d);
    std::cout << dec.json << std::endl;
    return 0;
  }
  // Batch: one request per line in, one response (or {"error":...}) per line out, in order.
  // Exit status: 0 when every line was answered, 1 when some lines hold errors, 2 when the
  // batch could not run (README "Commands").
  const std::string base_dir = request_base_dir(a.batch);
  std::ofstream file;
  if (!a.out.empty()) {
    file.open(a.out, std::ios::trunc);
    if (!file) return print_error_json("cannot write " + a.out);
  }
  std::ostream& out = a.out.empty() ? std::cout : file;
  std::string line;
  int64_t n = 0, failed = 0;  // n: requests read (non-blank lines), the line number of errors
  const bool tty = isatty(2);
  const auto start = std::chrono::steady_clock::now();
  auto error_line = [&](const Error& e, int64_t number) {
    ++failed;
    nlohmann::json j = {{"error", {{"message", e.what()}, {"line", number}}}};
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  };
  // --pack N: up to N requests are answered together (Engine::decide_batch: one packed prefill
  // on cuda). A line that does not parse gets its error at once; if the group fails (one of
  // its requests cannot be encoded), each request is answered alone, so every line gets its
  // own answer or error, in order.
  struct Pending {
    int64_t number;
    std::optional<Request> request;  // empty: `text` holds the line's error
    std::string text;
  };
  std::vector<Pending> group;
  auto flush_group = [&] {
    std::vector<Request> requests;
    for (const Pending& p : group)
      if (p.request) requests.push_back(*p.request);
    std::vector<std::string> answers;
    bool together = requests.size() > 1;
    if (together) {
      try {
        for (const Decision& dec : engine->decide_batch(requests, d)) answers.push_back(dec.json);
      } catch (const Error&) {
        together = false;  // answered one by one below, each with its own error
        answers.clear();
      }
    }
    size_t next = 0;
    for (Pending& p : group) {
      if (p.request) {
        if (together) {
          p.text = answers[next++];
        } else {
          try {
            p.text = engine->decide(*p.request, d).json;
          } catch (const Error& e) {
            p.text = error_line(e, p.number);
          }
        }
      }
      out << p.text << "\n";
    }
    out.flush();
    group.clear();
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(stderr, tty ? "\rdecide: %lld done, %lld failed, %.2f/s" : "decide: %lld done, %lld failed, %.2f/s\n",
                 static_cast<long long>(n), static_cast<long long>(failed), s > 0 ? n / s : 0.0);
  };
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    ++n;
    if (a.pack == 1) {  // one at a time
      Pending p{n, std::nullopt, {}};
      try {
        p.text = engine->decide(parse_cli_request(line, base_dir), d).json;
      } catch (const Error& e) {
        p.text = error_line(e, n);
      }
      group.push_back(std::move(p));
      flush_group();
      continue;
    }
    Pending p{n, std::nullopt, {}};
    try {
      p.request = parse_cli_request(line, base_dir);
    } catch (const Error& e) {
      p.text = error_line(e, n);
    }
    group.push_back(std::move(p));
    if (static_cast<int>(group.size()) >= a.pack) flush_group();
  }
  if (!group.empty()) flush_group();
  if (tty) std::fprintf(stderr, "\n");
  return failed ? 1 : 0;
}

Register reg{{"decide", "Answer a SystemOne decision request with a Clef release", [](CLI::App& sub) {
                auto a = std::make_shared<DecideArgs>();
                sub.add_option("--model", a->model, "release folder or Hugging Face repo id (EliovpAI/clef-MXFP4)")
                    ->required();
                sub.add_option("--revision", a->revision, "with a repo id: branch, tag or commit hash (default main)");
                sub.add_option("--precision", a->precision, "exact (fp32, the reference's numerics) or fast")
                    ->capture_default_str();
                sub.add_option("--device", a->device, "where the backbone runs: cpu, or cuda (builds with STAVE_CUDA)")
                    ->capture_default_str();
                bench_cli::add_fp8_cache(sub, a->fp8_cache_gib);
                sub.add_option("--max-length", a->max_length, "token budget (the state is cut to fit)")
                    ->capture_default_str()
                    ->check(in_range(1));
                sub.add_option("--max-state-tokens", a->max_state_tokens, "cut the state to this many tokens first")
                    ->check(in_range(0));
                sub.add_option("--threads", a->threads, "threads (default: all cores)")->check(in_range(0, 4096));
                sub.add_flag("--logits", a->logits, "add \"logits\": {question: [...]} to the response");
                sub.add_option("--confidence", a->confidence, "reference (max p), workers-ai or jev")
                    ->capture_default_str();
                sub.add_option("--truncate", a->truncate, "keep (cut the state, as the reference) or refuse")
                    ->capture_default_str();
                sub.add_flag("--verify", a->verify, "check SHA256SUMS before loading");
                sub.add_option("--batch", a->batch, "JSONL file: one request per line");
                sub.add_option("--out", a->out, "with --batch: write responses here instead of stdout");
                sub.add_option("--pack", a->pack,
                               "with --batch: answer up to N requests together (one packed prefill on cuda)")
                    ->capture_default_str()
                    ->check(in_range(1, 4096));
                sub.add_option("REQUEST", a->request, "request JSON file, or - for stdin");
                return std::function<int()>([a] { return run(*a); });
              }, 10}};

}  // namespace
}  // namespace stave::cli
