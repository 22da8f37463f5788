// stave bench-decode: time to first token and decode tokens/s of the release as a language
// model, per prompt length and batch size (src/measure/decode_bench.h).
#include <fstream>
#include <iostream>

#include "measure/bench_run.h"
#include "measure/decode_bench.h"
#include "command.h"
#include "stave/errors.h"

namespace stave::cli {
namespace {

Register reg{{"bench-decode", "Time generation: time to first token and decode tokens/s (like llama-bench -p N -n M)",
              [](CLI::App& sub) {
                auto o = std::make_shared<measure::DecodeBenchOptions>();
                auto tokens = std::make_shared<std::string>("128,512");
                auto batches = std::make_shared<std::string>("1");
                auto precision = std::make_shared<std::string>("fast");
                auto json_out = std::make_shared<std::string>();
                sub.add_option("--model", o->model, "release folder or Hugging Face repo id")->required();
                sub.add_option("--prompt-tokens", *tokens, "prompt lengths (random token ids), comma-separated")
                    ->capture_default_str();
                sub.add_option("--batch", *batches,
                               "concurrent requests per run, comma-separated (e.g. 1,8,32); above 1 they decode "
                               "together through the continuous-batching scheduler")
                    ->capture_default_str();
                sub.add_option("--new-tokens", o->new_tokens, "tokens decoded per run (eos ignored)")
                    ->capture_default_str()
                    ->check(in_range(2, 1 << 20));
                sub.add_option("--repeat", o->repeat, "timed runs per length")
                    ->capture_default_str()
                    ->check(in_range(1, std::numeric_limits<int>::max()));
                sub.add_option("--warmup", o->warmup, "untimed runs per length first")
                    ->capture_default_str()
                    ->check(in_range(0, std::numeric_limits<int>::max()));
                sub.add_option("--threads", o->threads, "threads (0: all cores)")->capture_default_str()->check(in_range(0, 4096));
                sub.add_option("--precision", *precision, "exact or fast")->capture_default_str();
                sub.add_option("--device", o->device, "where the model runs: cpu, or cuda (builds with STAVE_CUDA)")
                    ->capture_default_str();
                sub.add_option("--seed", o->seed, "seed of the random prompt ids")->capture_default_str();
                sub.add_option("--json", *json_out, "also write the results as JSON to this file");
                return std::function<int()>([o, tokens, batches, precision, json_out]() -> int {
                  o->prompt_tokens = measure::parse_token_list(*tokens);
                  o->batches = measure::parse_token_list(*batches);
                  auto p = parse_precision(*precision);
                  if (!p) throw Error(ErrorKind::kInvalidRequest, "--precision must be exact or fast, not \"" + *precision + "\"");
                  o->precision = *p;
                  o->log = [](const std::string& line) { std::cerr << "bench-decode: " << line << std::endl; };
                  const measure::DecodeReport report = measure::run_decode_bench(*o);
                  std::cout << measure::markdown_table(report) << std::flush;
                  if (!json_out->empty()) {
                    std::ofstream f(*json_out, std::ios::trunc);
                    f << measure::to_json(report).dump(2) << "\n";
                    if (!f) throw Error(ErrorKind::kIo, "cannot write " + *json_out);
                  }
                  return 0;
                });
              },
              86}};

}  // namespace
}  // namespace stave::cli
