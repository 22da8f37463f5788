// stave perplexity: score token windows with the release as a language model.
//   --text FILE: the model card's protocol (tokenize the file, non-overlapping windows of --ctx
//   tokens, the first --windows of them); --ids IDS.json: an array of token-id arrays.
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "command.h"
#include "stave/language_model.h"
#include "util/mapped_file.h"

namespace stave::cli {
namespace {

struct PerplexityArgs {
  std::string model;
  std::string precision = "fast";
  std::string text, ids;
  int64_t ctx = 1024;
  int64_t windows = 64;
  bool per_token = false;
  int threads = 0;
};

std::vector<std::vector<int32_t>> read_ids(const std::string& path) {
  const auto j = nlohmann::json::parse(read_file(path), nullptr, false);
  if (j.is_discarded() || !j.is_array() || j.empty())
    throw Error(ErrorKind::kInvalidRequest, path + ": expected a non-empty JSON array of token-id arrays");
  std::vector<std::vector<int32_t>> out;
  for (size_t w = 0; w < j.size(); ++w) {
    if (!j[w].is_array()) throw Error(ErrorKind::kInvalidRequest, path + ": window " + std::to_string(w) + " is not an array");
    std::vector<int32_t> ids;
    for (const auto& v : j[w]) {
      if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX)
        throw Error(ErrorKind::kInvalidRequest, path + ": window " + std::to_string(w) + " holds a value that is not a token id");
      ids.push_back(v.get<int32_t>());
    }
    out.push_back(std::move(ids));
  }
  return out;
}

int run(const PerplexityArgs& a) {
  if (a.text.empty() == a.ids.empty()) return print_error_json("give either --text FILE or --ids IDS.json");
  const auto p = parse_precision(a.precision);
  if (!p) return print_error_json("--precision must be exact or fast, not \"" + a.precision + "\"");
  std::vector<std::vector<int32_t>> windows;
  std::string text;
  if (!a.ids.empty()) windows = read_ids(a.ids);
  else text = read_file(a.text);
  EngineOptions eo;
  eo.model = a.model;
  eo.precision = *p;
  eo.threads = a.threads;
  const auto lm = LanguageModel::load(eo);
  if (!a.text.empty()) {
    const std::vector<int32_t> ids = lm->tokenize(text);
    windows = LanguageModel::split_windows(ids, a.ctx, a.windows);
    if (windows.empty())
      return print_error_json(a.text + " has " + std::to_string(ids.size()) + " tokens: not one window of " +
                              std::to_string(a.ctx));
  }
  const Perplexity r = lm->perplexity(windows);
  nlohmann::ordered_json out;
  out["windows"] = nlohmann::ordered_json::array();
  for (const PerplexityWindow& w : r.windows) {
    nlohmann::ordered_json j;
    j["tokens"] = w.tokens;
    j["mean_nll"] = w.mean_nll;
    j["ppl"] = w.ppl;
    if (a.per_token) j["nll"] = w.nll;
    out["windows"].push_back(std::move(j));
  }
  out["mean_nll"] = r.mean_nll;
  out["ppl"] = r.ppl;
  std::cout << out.dump() << std::endl;
  return 0;
}

Register reg{{"perplexity", "Perplexity of token windows, the release used as a language model", [](CLI::App& sub) {
                auto a = std::make_shared<PerplexityArgs>();
                sub.add_option("--model", a->model, "release folder or Hugging Face repo id")->required();
                sub.add_option("--precision", a->precision, "exact (fp32, the reference's numerics) or fast")
                    ->capture_default_str();
                sub.add_option("--text", a->text, "a text file: tokenized, cut into windows of --ctx tokens");
                auto* ctx = sub.add_option("--ctx", a->ctx, "tokens per window (with --text)")
                                ->capture_default_str()
                                ->check(in_range(2, 1 << 20));
                auto* windows = sub.add_option("--windows", a->windows, "windows scored at most (with --text)")
                                    ->capture_default_str()
                                    ->check(in_range(1, 1 << 20));
                // --ids windows are scored as given: --ctx / --windows would be silently ignored.
                sub.add_option("--ids", a->ids, "a JSON array of token-id arrays, each scored as one window")
                    ->excludes(ctx)
                    ->excludes(windows);
                sub.add_flag("--per-token", a->per_token, "add each window's per-token NLL (\"nll\")");
                sub.add_option("--threads", a->threads, "threads (default: all cores)")->check(in_range(0, 4096));
                return std::function<int()>([a] { return run(*a); });
              }, 40}};

}  // namespace
}  // namespace stave::cli
