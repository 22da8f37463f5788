// stave bench: decision latency, prefill throughput and memory per prompt length (src/bench).
#include <iostream>

#include "bench_cli.h"
#include "command.h"
#include "measure/bench_run.h"

namespace stave::cli {
namespace {

Register reg{{"bench", "Time decisions on synthetic requests of exact token lengths (like llama-bench -p)", [](CLI::App& sub) {
                auto o = std::make_shared<measure::BenchOptions>();
                auto flags = std::make_shared<bench_cli::TextFlags>();
                flags->prompt_tokens = "256,512,2048";
                auto image = std::make_shared<std::string>();
                bench_cli::add_model(sub, o->model);
                bench_cli::add_prompt_tokens(sub, flags->prompt_tokens, "encoded request lengths, comma-separated");
                sub.add_option("--questions", o->questions, "questions per request (noul, choice, score in turn)")
                    ->capture_default_str()
                    ->check(in_range(1, std::numeric_limits<int>::max()));
                bench_cli::add_repeat_warmup(sub, o->repeat, o->warmup, "decisions");
                bench_cli::add_threads(sub, o->threads);
                sub.add_option("--batch", o->batch,
                               "decisions per run, through Engine::decide_batch (one packed prefill on cuda)")
                    ->capture_default_str()
                    ->check(in_range(1, 4096));
                bench_cli::add_precision_device(sub, flags->precision, o->device, "backbone");
                bench_cli::add_fp8_cache(sub, o->fp8_cache_gib);
                sub.add_option("--image", *image, "add one WxH PNG to each request (counted in the length)");
                bench_cli::add_json(sub, flags->json_out);
                return std::function<int()>([o, flags, image]() -> int {
                  o->prompt_tokens = measure::parse_token_list(flags->prompt_tokens);
                  o->precision = bench_cli::precision_flag(flags->precision);
                  if (!image->empty()) o->image = measure::parse_image_size(*image);
                  o->log = bench_cli::stderr_log("bench");
                  const measure::BenchReport report = measure::run_bench(*o);
                  std::cout << measure::markdown_table(report) << std::flush;
                  if (!flags->json_out.empty()) bench_cli::write_json_file(flags->json_out, measure::to_json(report).dump(2));
                  return 0;
                });
              }, 85}};

}  // namespace
}  // namespace stave::cli
