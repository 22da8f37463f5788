// stave bench: decision latency, prefill throughput and memory per prompt length (src/bench).
#include <fstream>
#include <iostream>

#include "measure/bench_run.h"
#include "command.h"
#include "stave/errors.h"

namespace stave::cli {
namespace {

Register reg{{"bench", "Time decisions on synthetic requests of exact token lengths (like llama-bench -p)", [](CLI::App& sub) {
                auto o = std::make_shared<measure::BenchOptions>();
                auto tokens = std::make_shared<std::string>("256,512,2048");
                auto precision = std::make_shared<std::string>("fast");
                auto image = std::make_shared<std::string>();
                auto json_out = std::make_shared<std::string>();
                sub.add_option("--model", o->model, "release folder or Hugging Face repo id")->required();
                sub.add_option("--prompt-tokens", *tokens, "encoded request lengths, comma-separated")
                    ->capture_default_str();
                sub.add_option("--questions", o->questions, "questions per request (noul, choice, score in turn)")
                    ->capture_default_str()
                    ->check(in_range(1, std::numeric_limits<int>::max()));
                sub.add_option("--repeat", o->repeat, "timed decisions per length")
                    ->capture_default_str()
                    ->check(in_range(1, std::numeric_limits<int>::max()));
                sub.add_option("--warmup", o->warmup, "untimed decisions per length first")
                    ->capture_default_str()
                    ->check(in_range(0, std::numeric_limits<int>::max()));
                sub.add_option("--threads", o->threads, "threads (0: all cores)")->capture_default_str()->check(in_range(0, 4096));
                sub.add_option("--batch", o->batch,
                               "decisions per run, through Engine::decide_batch (one packed prefill on cuda)")
                    ->capture_default_str()
                    ->check(in_range(1, 4096));
                sub.add_option("--precision", *precision, "exact or fast")->capture_default_str();
                sub.add_option("--device", o->device, "where the backbone runs: cpu, or cuda (builds with STAVE_CUDA)")
                    ->capture_default_str();
                sub.add_option("--image", *image, "add one WxH PNG to each request (counted in the length)");
                sub.add_option("--json", *json_out, "also write the results as JSON to this file");
                return std::function<int()>([o, tokens, precision, image, json_out]() -> int {
                  o->prompt_tokens = measure::parse_token_list(*tokens);
                  auto p = parse_precision(*precision);
                  if (!p) throw Error(ErrorKind::kInvalidRequest, "--precision must be exact or fast, not \"" + *precision + "\"");
                  o->precision = *p;
                  if (!image->empty()) o->image = measure::parse_image_size(*image);
                  o->log = [](const std::string& line) { std::cerr << "bench: " << line << std::endl; };
                  measure::BenchReport report = measure::run_bench(*o);
                  std::cout << measure::markdown_table(report) << std::flush;
                  if (!json_out->empty()) {
                    std::ofstream f(*json_out, std::ios::trunc);
                    f << measure::to_json(report).dump(2) << "\n";
                    if (!f) throw Error(ErrorKind::kIo, "cannot write " + *json_out);
                  }
                  return 0;
                });
              }, 85}};

}  // namespace
}  // namespace stave::cli
