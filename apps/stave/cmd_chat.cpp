// stave chat: generate a reply to an OpenAI chat body (or {"messages": [...]}) with the
// release's chat template. Streams the text to stdout, or prints one JSON object (--json).
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "command.h"
#include "stave/language_model.h"
#include "util/mapped_file.h"

namespace stave::cli {
namespace {

struct ChatArgs {
  std::string model;
  std::string precision = "fast";
  std::optional<int64_t> max_tokens;
  std::optional<double> temperature;
  std::optional<uint64_t> seed;
  bool json = false;
  int threads = 0;
  std::string request = "-";
};

int run(const ChatArgs& a) {
  const auto p = parse_precision(a.precision);
  if (!p) return print_error_json("--precision must be exact or fast, not \"" + a.precision + "\"");
  std::string body;
  if (a.request == "-") {
    std::ostringstream ss;
    ss << std::cin.rdbuf();
    body = ss.str();
  } else {
    body = read_file(a.request);
  }
  GenerationOptions defaults;
  GenerationOptions g = generation_options_from_request(body, defaults);  // checks the body before loading
  if (a.max_tokens) g.max_tokens = *a.max_tokens;
  if (a.temperature) g.sampling.temperature = *a.temperature;
  if (a.seed) g.sampling.seed = *a.seed;
  EngineOptions eo;
  eo.model = a.model;
  eo.precision = *p;
  eo.threads = a.threads;
  const auto lm = LanguageModel::load(eo);
  TextCallback stream;
  if (!a.json) stream = [](std::string_view piece) { std::cout << piece << std::flush; };
  const Generation r = lm->chat(body, g, stream);
  if (!a.json) {
    std::cout << std::endl;
    return 0;
  }
  nlohmann::ordered_json out;
  out["prompt_token_ids"] = r.prompt_token_ids;
  out["completion_token_ids"] = r.completion_token_ids;
  out["text"] = r.text;
  out["finish_reason"] = r.finish_reason;
  std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
  return 0;
}

Register reg{{"chat", "Generate a chat reply with the release as a language model", [](CLI::App& sub) {
                auto a = std::make_shared<ChatArgs>();
                sub.add_option("--model", a->model, "release folder or Hugging Face repo id")->required();
                sub.add_option("--precision", a->precision, "exact (fp32, the reference's numerics) or fast")
                    ->capture_default_str();
                sub.add_option("--max-tokens", a->max_tokens, "new tokens at most (default: the request's, else 256)")
                    ->check(in_range(1, 1 << 24));
                sub.add_option("--temperature", a->temperature, "0: greedy (default: the request's, else 1)");
                sub.add_option("--seed", a->seed, "sampling seed (default: the request's, else random)");
                sub.add_flag("--json", a->json,
                             "print {prompt_token_ids, completion_token_ids, text, finish_reason} instead of streaming");
                sub.add_option("--threads", a->threads, "threads (default: all cores)")->check(in_range(0, 4096));
                sub.add_option("REQUEST", a->request, "an OpenAI chat body or {\"messages\": [...]}; - for stdin")
                    ->capture_default_str();
                return std::function<int()>([a] { return run(*a); });
              }, 45}};

}  // namespace
}  // namespace stave::cli
