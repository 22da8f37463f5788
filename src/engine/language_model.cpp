// The release as a language model: the CPU backbone (prefill / decode steps over a
// SequenceState) and the lm_head; perplexity of token windows; generation with a sampler, stop
// tokens / strings and streaming text; chat through the release's chat template.
#include "backends/registry.h"
#include "stave/language_model.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "engine/device_backbone.h"
#include "engine/generation_sequence.h"
#include "engine/language_model_impl.h"
#include "engine/release_from_options.h"
#include "generate/chat_template.h"
#include "io/release.h"
#include "model/backbone.h"
#include "model/lm_head.h"
#include "formats/tensor_names.h"
#include "ops/backend.h"
#include "text/tokenizer.h"

namespace stave {
namespace {

using Json = nlohmann::ordered_json;

// generation_config.json's eos_token_id (an int or a list), if the file has one.
std::vector<int32_t> generation_config_eos(const std::string& dir) {
  const std::filesystem::path p = std::filesystem::path(dir) / "generation_config.json";
  if (!std::filesystem::exists(p)) return {};
  std::ifstream f(p);
  std::ostringstream s;
  s << f.rdbuf();
  const Json j = Json::parse(s.str(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) throw Error(ErrorKind::kInvalidModel, p.string() + " is not a JSON object");
  const auto it = j.find("eos_token_id");
  std::vector<int32_t> out;
  if (it == j.end() || it->is_null()) return out;
  if (it->is_number_integer()) out.push_back(it->get<int32_t>());
  else if (it->is_array())
    for (const Json& v : *it) {
      if (!v.is_number_integer()) throw Error(ErrorKind::kInvalidModel, p.string() + ": eos_token_id holds a non-integer");
      out.push_back(v.get<int32_t>());
    }
  else throw Error(ErrorKind::kInvalidModel, p.string() + ": eos_token_id must be an integer or a list");
  return out;
}

Json parse_request(std::string_view request_json) {
  Json j = Json::parse(request_json, nullptr, false);
  if (j.is_discarded()) throw Error(ErrorKind::kInvalidRequest, "the chat request is not valid JSON");
  if (!j.is_object()) throw Error(ErrorKind::kInvalidRequest, "the chat request must be a JSON object");
  return j;
}

}  // namespace

LanguageModel::LanguageModel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
LanguageModel::~LanguageModel() = default;

std::unique_ptr<LanguageModel> LanguageModel::load(const EngineOptions& options) {
  const BackendOptions device_options = device_backend_options(options);  // checked before anything loads
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  if (options.threads > 0) omp_set_num_threads(options.threads);
  impl->release = open_release_for(options);
  const Release& rel = *impl->release;
  const std::string& dir = rel.dir;
  impl->tokenizer = Tokenizer::from_file(rel.tokenizer_path);
  // The backbone on the chosen device.
  impl->device_backend = make_backend(options.device, options.precision, device_options);
  impl->backend = impl->device_backend.get();
  // On a device the lm_head's product runs there too (its weight resident); on the CPU, the
  // vectorized fp32 kernels in both precisions (above).
  impl->head_backend = impl->backend->device() == Device::kCpu ? &cpu_backend(Precision::kFast) : impl->backend;
  impl->head_rows = options.precision == Precision::kExact ? 15 : 64;
  impl->backbone = std::make_unique<Backbone>(rel, *impl->backend);
  impl->lm_head = std::make_unique<LmHead>(rel);
  try {
    impl->chat_template = std::make_unique<ChatTemplate>(ChatTemplate::from_release(dir));
  } catch (const Error& e) {
    impl->chat_template_error = e.what();  // perplexity and generate work without one; chat reports it
  }
  impl->eos = generation_config_eos(dir);
  if (impl->eos.empty())
    if (const auto id = impl->tokenizer->token_to_id("<|im_end|>")) impl->eos.push_back(*id);
  return std::unique_ptr<LanguageModel>(new LanguageModel(std::move(impl)));
}

const std::vector<int32_t>& LanguageModel::eos_token_ids() const { return impl_->eos; }
int64_t LanguageModel::vocab_size() const { return impl_->lm_head->vocab(); }

std::vector<int32_t> LanguageModel::tokenize(std::string_view text) const { return impl_->tokenizer->encode(text); }
// An id of the model's vocabulary that no token has (the lm_head's padded rows) has no text, as
// Hugging Face's decode skips it; an id past the model's vocabulary is an error (the tokenizer's).
bool LanguageModel::Impl::textless(int32_t id) const {
  return id >= 0 && id < lm_head->vocab() && !tokenizer->has_token(id);
}
std::string LanguageModel::detokenize(const std::vector<int32_t>& ids) const {
  std::vector<int32_t> kept;
  kept.reserve(ids.size());
  for (const int32_t id : ids)
    if (!impl_->textless(id)) kept.push_back(id);
  return impl_->tokenizer->decode(kept);
}
std::string LanguageModel::token_text(int32_t id) const { return impl_->textless(id) ? std::string() : impl_->tokenizer->decode({id}); }
std::string LanguageModel::token_bytes(int32_t id) const { return impl_->textless(id) ? std::string() : impl_->tokenizer->token_bytes(id); }

std::vector<std::vector<int32_t>> LanguageModel::split_windows(std::span<const int32_t> ids, int64_t ctx,
                                                               int64_t max_windows) {
  if (ctx < 2) throw Error(ErrorKind::kInvalidRequest, "the window length must be at least 2 tokens, got " + std::to_string(ctx));
  if (max_windows < 1) throw Error(ErrorKind::kInvalidRequest, "the number of windows must be positive");
  std::vector<std::vector<int32_t>> out;
  for (size_t at = 0; at + static_cast<size_t>(ctx) <= ids.size() && static_cast<int64_t>(out.size()) < max_windows;
       at += static_cast<size_t>(ctx))
    out.emplace_back(ids.begin() + static_cast<std::ptrdiff_t>(at), ids.begin() + static_cast<std::ptrdiff_t>(at + ctx));
  return out;
}

Perplexity LanguageModel::perplexity(std::span<const std::vector<int32_t>> windows) const {
  const Impl& m = *impl_;
  m.set_threads();
  if (windows.empty()) throw Error(ErrorKind::kInvalidRequest, "perplexity needs at least one window");
  for (size_t w = 0; w < windows.size(); ++w)
    if (windows[w].size() < 2)
      throw Error(ErrorKind::kInvalidRequest, "window " + std::to_string(w) + " has " + std::to_string(windows[w].size()) +
                                                  " tokens; a window needs at least 2 (one prediction)");
  Perplexity out;
  double total = 0.0;
  int64_t count = 0;
  for (const std::vector<int32_t>& ids : windows) {
    const int64_t L = static_cast<int64_t>(ids.size());
    const std::vector<float> hidden = m.backbone->forward(ids);
    PerplexityWindow w;
    w.tokens = L;
    // Position t predicts token t + 1: the first L − 1 hidden rows against ids[1..L).
    w.nll = m.lm_head->nll(*m.head_backend, hidden.data(), L - 1, std::span(ids).subspan(1), m.head_rows);
    double sum = 0.0;
    for (double x : w.nll) sum += x;
    w.mean_nll = sum / static_cast<double>(L - 1);
    w.ppl = std::exp(w.mean_nll);
    total += sum;
    count += L - 1;
    out.windows.push_back(std::move(w));
  }
  out.mean_nll = total / static_cast<double>(count);
  out.ppl = std::exp(out.mean_nll);
  return out;
}

std::string LanguageModel::render_chat(std::string_view request_json) const {
  if (!impl_->chat_template) throw Error(ErrorKind::kInvalidModel, impl_->chat_template_error);
  return impl_->chat_template->render(parse_request(request_json));
}

Generation LanguageModel::generate(std::span<const int32_t> prompt_ids, const GenerationOptions& options,
                                   const TextCallback& on_text) const {
  const Impl& m = *impl_;
  m.set_threads();
  GenerationSequence seq(m, prompt_ids, options, on_text);
  const GenerationSequence::Deliver now = [](const std::function<void()>& f) { f(); };
  if (seq.ended()) return seq.finish(now);
  Backbone::SequenceState state = m.backbone->new_state(seq.expected_tokens());
  auto check_cancel = [&] {
    if (seq.cancelled()) throw DecisionCancelled();
  };
  check_cancel();
  std::vector<float> logits = m.last_logits(m.backbone->prefill(prompt_ids, state));
  while (!seq.take(logits, now)) {
    check_cancel();
    const int32_t next[1] = {seq.last_token()};
    logits = m.last_logits(m.backbone->decode_step(state, next));
  }
  return seq.finish(now);
}

Generation LanguageModel::chat(std::string_view request_json, const GenerationOptions& options,
                               const TextCallback& on_text) const {
  const std::string prompt = render_chat(request_json);
  const std::vector<int32_t> ids = tokenize(prompt);
  return generate(ids, options, on_text);
}

}  // namespace stave
