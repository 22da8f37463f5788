#include "bench_cli.h"

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <limits>

#include "command.h"
#include "stave/errors.h"

namespace stave::cli::bench_cli {

void add_model(CLI::App& sub, std::string& model) {
  sub.add_option("--model", model, "release folder or Hugging Face repo id")->required();
}

void add_prompt_tokens(CLI::App& sub, std::string& text, const std::string& help) {
  sub.add_option("--prompt-tokens", text, help)->capture_default_str();
}

void add_repeat_warmup(CLI::App& sub, int& repeat, int& warmup, const std::string& unit) {
  sub.add_option("--repeat", repeat, "timed " + unit + " per length")
      ->capture_default_str()
      ->check(in_range(1, std::numeric_limits<int>::max()));
  sub.add_option("--warmup", warmup, "untimed " + unit + " per length first")
      ->capture_default_str()
      ->check(in_range(0, std::numeric_limits<int>::max()));
}

void add_threads(CLI::App& sub, int& threads) {
  sub.add_option("--threads", threads, "threads (0: all cores)")->capture_default_str()->check(in_range(0, 4096));
}

void add_precision_device(CLI::App& sub, std::string& precision, std::string& device, const std::string& runs_there) {
  sub.add_option("--precision", precision, "exact or fast")->capture_default_str();
  sub.add_option("--device", device, "where the " + runs_there + " runs: cpu, or cuda (builds with STAVE_CUDA)")
      ->capture_default_str();
}

void add_fp8_cache(CLI::App& sub, double& gib) {
  sub.add_option("--fp8-cache-gib", gib,
                 "cuda, fast precision: GiB of GPU memory for FP8 copies of the MXFP4 weights, made at load, so "
                 "products skip the per-product expansion (about 1 byte per weight: 23 GiB for the 27B; 0: none)")
      ->capture_default_str()
      ->check(CLI::Validator(
          [](std::string& value) -> std::string {
            char* end = nullptr;
            const double v = std::strtod(value.c_str(), &end);
            if (value.empty() || end != value.c_str() + value.size() || !std::isfinite(v) || v < 0)
              return "must be a size in GiB of at least 0, not '" + value + "'";
            return std::string();
          },
          "GiB>=0"));
}

void add_json(CLI::App& sub, std::string& path) {
  sub.add_option("--json", path, "also write the results as JSON to this file");
}

Precision precision_flag(const std::string& text) {
  const auto p = parse_precision(text);
  if (!p) throw Error(ErrorKind::kInvalidRequest, "--precision must be exact or fast, not \"" + text + "\"");
  return *p;
}

std::function<void(const std::string&)> stderr_log(const std::string& command) {
  return [command](const std::string& line) { std::cerr << command << ": " << line << std::endl; };
}

void write_json_file(const std::string& path, const std::string& json_text) {
  std::ofstream f(path, std::ios::trunc);
  f << json_text << "\n";
  if (!f) throw Error(ErrorKind::kIo, "cannot write " + path);
}

}  // namespace stave::cli::bench_cli
