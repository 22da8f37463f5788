// stave bench-decode: time to first token and decode tokens/s of the release as a language
// model, per prompt length and batch size (src/measure/decode_bench.h).
#include <iostream>

#include "bench_cli.h"
#include "command.h"
#include "measure/bench_run.h"
#include "measure/decode_bench.h"

namespace stave::cli {
namespace {

Register reg{{"bench-decode", "Time generation: time to first token and decode tokens/s (like llama-bench -p N -n M)",
              [](CLI::App& sub) {
                auto o = std::make_shared<measure::DecodeBenchOptions>();
                auto flags = std::make_shared<bench_cli::TextFlags>();
                flags->prompt_tokens = "128,512";
                auto batches = std::make_shared<std::string>("1");
                bench_cli::add_model(sub, o->model);
                bench_cli::add_prompt_tokens(sub, flags->prompt_tokens, "prompt lengths (random token ids), comma-separated");
                sub.add_option("--batch", *batches,
                               "concurrent requests per run, comma-separated (e.g. 1,8,32); above 1 they decode "
                               "together through the continuous-batching scheduler")
                    ->capture_default_str();
                sub.add_option("--new-tokens", o->new_tokens, "tokens decoded per run (eos ignored)")
                    ->capture_default_str()
                    ->check(in_range(2, 1 << 20));
                bench_cli::add_repeat_warmup(sub, o->repeat, o->warmup, "runs");
                bench_cli::add_threads(sub, o->threads);
                bench_cli::add_precision_device(sub, flags->precision, o->device, "model");
                bench_cli::add_fp8_cache(sub, o->fp8_cache_gib);
                sub.add_option("--seed", o->seed, "seed of the random prompt ids")->capture_default_str();
                bench_cli::add_json(sub, flags->json_out);
                return std::function<int()>([o, flags, batches]() -> int {
                  o->prompt_tokens = measure::parse_token_list(flags->prompt_tokens);
                  o->batches = measure::parse_token_list(*batches, "--batch");
                  o->precision = bench_cli::precision_flag(flags->precision);
                  o->log = bench_cli::stderr_log("bench-decode");
                  const measure::DecodeReport report = measure::run_decode_bench(*o);
                  std::cout << measure::markdown_table(report) << std::flush;
                  if (!flags->json_out.empty()) bench_cli::write_json_file(flags->json_out, measure::to_json(report).dump(2));
                  return 0;
                });
              },
              86}};

}  // namespace
}  // namespace stave::cli
