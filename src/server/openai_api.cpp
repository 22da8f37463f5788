#include "server/openai_api.h"

#include <algorithm>

#include <nlohmann/json.hpp>

namespace stave::server {
namespace {

using Json = nlohmann::json;
using OJson = nlohmann::ordered_json;

ApiError bad(const std::string& field, const std::string& msg) {
  std::vector<std::string> loc = {"body"};
  if (!field.empty()) loc.push_back(field);
  return api_error(400, "invalid_request_error", msg, loc);
}

std::string dump(const OJson& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

// Which field generation_options_from_request's message names (its messages quote the field).
std::string field_named_in(const std::string& msg) {
  for (const char* f : {"max_completion_tokens", "max_tokens", "temperature", "top_p", "top_k", "min_p",
                        "repetition_penalty", "presence_penalty", "frequency_penalty", "seed", "stop_token_ids",
                        "stop", "ignore_eos", "\"n\""})
    if (msg.find(f) != std::string::npos) return std::string(f) == "\"n\"" ? "n" : f;
  return "";
}

bool present(const Json& j, const char* name) { return j.contains(name) && !j[name].is_null(); }

// Fields we do not implement: refused by name rather than ignored.
std::optional<ApiError> unsupported_fields(const Json& j) {
  if (present(j, "echo") && !(j["echo"].is_boolean() && !j["echo"].get<bool>()))
    return bad("echo", "echo is not supported");
  if (present(j, "best_of") && !(j["best_of"].is_number_integer() && j["best_of"].get<int64_t>() == 1))
    return bad("best_of", "best_of other than 1 is not supported");
  if (present(j, "suffix")) return bad("suffix", "suffix is not supported");
  if (present(j, "logit_bias") && !(j["logit_bias"].is_object() && j["logit_bias"].empty()))
    return bad("logit_bias", "logit_bias is not supported");
  return std::nullopt;
}

bool in_logprobs_range(const Json& v) {
  return v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() <= kMaxTopLogprobs;
}

// Chat: logprobs (boolean) and top_logprobs (0 … 20, needs logprobs: true). Completions:
// logprobs: N (0 … 20). The result: GenerationOptions::logprobs (−1: none).
std::variant<int64_t, ApiError> parse_logprobs(const Json& j, OpenAiKind kind) {
  const std::string range = "an integer from 0 to " + std::to_string(kMaxTopLogprobs);
  if (kind == OpenAiKind::kCompletion) {
    if (present(j, "top_logprobs"))
      return bad("top_logprobs", "top_logprobs is a chat field; completions take \"logprobs\": N");
    if (!present(j, "logprobs")) return int64_t{-1};
    if (!in_logprobs_range(j["logprobs"])) return bad("logprobs", "logprobs must be " + range);
    return j["logprobs"].get<int64_t>();
  }
  bool on = false;
  if (present(j, "logprobs")) {
    if (!j["logprobs"].is_boolean()) return bad("logprobs", "logprobs must be a boolean");
    on = j["logprobs"].get<bool>();
  }
  if (!present(j, "top_logprobs")) return on ? int64_t{0} : int64_t{-1};
  if (!in_logprobs_range(j["top_logprobs"])) return bad("top_logprobs", "top_logprobs must be " + range);
  if (!on) return bad("top_logprobs", "top_logprobs needs \"logprobs\": true");
  return j["top_logprobs"].get<int64_t>();
}

std::optional<ApiError> parse_prompt(const Json& j, OpenAiRequest& r) {
  if (!j.contains("prompt")) return bad("prompt", "prompt is required");
  const Json& p = j["prompt"];
  if (p.is_string()) {
    r.prompt = p.get<std::string>();
  } else if (p.is_array() && p.size() == 1 && p[0].is_string()) {
    r.prompt = p[0].get<std::string>();
  } else if (p.is_array() && !p.empty() && std::all_of(p.begin(), p.end(), [](const Json& e) { return e.is_number_integer(); })) {
    for (const Json& e : p) r.prompt_token_ids.push_back(static_cast<int32_t>(e.get<int64_t>()));
  } else if (p.is_array() && p.size() > 1) {
    return bad("prompt", "one prompt per request (a list of prompts is the same as n > 1, which is not supported)");
  } else {
    return bad("prompt", "prompt must be a string, a list of one string, or a list of token ids");
  }
  if (r.prompt && r.prompt->empty()) return bad("prompt", "prompt is empty");
  return std::nullopt;
}

OJson usage(int64_t prompt_tokens, int64_t completion_tokens) {
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens}};
}

OJson head(OpenAiKind kind, const OpenAiReplyIds& ids, const char* object) {
  (void)kind;
  return {{"id", ids.id}, {"object", object}, {"created", ids.created}, {"model", ids.model}};
}

int64_t code_points(const std::string& s) {
  int64_t n = 0;
  for (const char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

OJson byte_list(const std::string& b) {
  OJson out = OJson::array();
  for (const char c : b) out.push_back(static_cast<unsigned char>(c));
  return out;
}

OJson chat_logprobs(std::span<const StepLogprobs> steps, const LogprobsView& v) {
  auto entry = [&](int32_t id, double logprob) {
    return OJson{{"token", v.token_text(id)}, {"logprob", logprob}, {"bytes", byte_list(v.token_bytes(id))}};
  };
  OJson content = OJson::array();
  for (const StepLogprobs& s : steps) {
    OJson e = entry(s.id, s.logprob);
    e["top_logprobs"] = OJson::array();
    for (const TokenLogprob& t : s.top) e["top_logprobs"].push_back(entry(t.id, t.logprob));
    content.push_back(std::move(e));
  }
  return {{"content", std::move(content)}};
}

OJson completion_logprobs(std::span<const StepLogprobs> steps, LogprobsView& v) {
  OJson tokens = OJson::array(), token_logprobs = OJson::array(), top = OJson::array(), offsets = OJson::array();
  for (const StepLogprobs& s : steps) {
    const std::string text = v.token_text(s.id);
    tokens.push_back(text);
    token_logprobs.push_back(s.logprob);
    OJson alternatives = OJson::object();
    for (const TokenLogprob& t : s.top) alternatives.emplace(v.token_text(t.id), t.logprob);  // a repeated text keeps its first (likelier) value
    alternatives.emplace(text, s.logprob);  // the picked token is always there (OpenAI: up to N + 1)
    top.push_back(std::move(alternatives));
    offsets.push_back(v.text_offset);
    v.text_offset += code_points(text);
  }
  return {{"tokens", std::move(tokens)}, {"token_logprobs", std::move(token_logprobs)},
          {"top_logprobs", std::move(top)}, {"text_offset", std::move(offsets)}};
}

OJson logprobs_json(OpenAiKind kind, std::span<const StepLogprobs> steps, LogprobsView* v) {
  if (!v) return nullptr;
  return kind == OpenAiKind::kChat ? chat_logprobs(steps, *v) : completion_logprobs(steps, *v);
}

}  // namespace

std::string render_openai_logprobs(OpenAiKind kind, std::span<const StepLogprobs> steps, LogprobsView& view) {
  return dump(logprobs_json(kind, steps, &view));
}

std::variant<OpenAiRequest, ApiError> parse_openai_request(OpenAiKind kind, std::string_view body,
                                                           int64_t chat_max_tokens) {
  const Json j = Json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return bad("", "the body must be a JSON object");
  OpenAiRequest r;
  r.kind = kind;
  if (present(j, "model")) {
    if (!j["model"].is_string()) return bad("model", "model must be a string");
    r.model = j["model"].get<std::string>();
  }
  if (kind == OpenAiKind::kChat) {
    if (!j.contains("messages") || !j["messages"].is_array() || j["messages"].empty())
      return bad("messages", "messages must be a non-empty list of messages");
    r.body = std::string(body);
  } else if (auto e = parse_prompt(j, r)) {
    return *e;
  }
  if (auto e = unsupported_fields(j)) return *e;
  auto logprobs = parse_logprobs(j, kind);
  if (auto* e = std::get_if<ApiError>(&logprobs)) return *e;
  if (present(j, "stream")) {
    if (!j["stream"].is_boolean()) return bad("stream", "stream must be a boolean");
    r.stream = j["stream"].get<bool>();
  }
  if (present(j, "stream_options")) {
    const Json& so = j["stream_options"];
    if (!so.is_object()) return bad("stream_options", "stream_options must be an object");
    if (present(so, "include_usage")) {
      if (!so["include_usage"].is_boolean()) return bad("stream_options", "stream_options.include_usage must be a boolean");
      r.include_usage = so["include_usage"].get<bool>();
    }
  }
  GenerationOptions defaults;
  defaults.max_tokens = kind == OpenAiKind::kChat ? chat_max_tokens : kCompletionDefaultMaxTokens;
  try {
    r.generation = generation_options_from_request(body, defaults);
  } catch (const Error& e) {
    return bad(field_named_in(e.what()), e.what());
  }
  r.generation.logprobs = std::get<int64_t>(logprobs);
  r.max_tokens_given = present(j, "max_tokens") || present(j, "max_completion_tokens");
  const SamplingOptions& s = r.generation.sampling;
  if (!(s.temperature >= 0.0 && s.temperature <= 2.0)) return bad("temperature", "temperature must be between 0 and 2");
  if (!(s.top_p > 0.0 && s.top_p <= 1.0)) return bad("top_p", "top_p must be in (0, 1]");
  if (r.generation.stop.size() > 4) return bad("stop", "stop takes at most 4 strings");
  for (const std::string& st : r.generation.stop)
    if (st.empty()) return bad("stop", "a stop string must not be empty");
  return r;
}

std::string render_openai_reply(OpenAiKind kind, const OpenAiReplyIds& ids, const Generation& g,
                                LogprobsView* logprobs) {
  const bool chat = kind == OpenAiKind::kChat;
  OJson j = head(kind, ids, chat ? "chat.completion" : "text_completion");
  OJson choice = {{"index", 0}};
  if (chat) choice["message"] = {{"role", "assistant"}, {"content", g.text}};
  else choice["text"] = g.text;
  choice["logprobs"] = logprobs_json(kind, g.logprobs, logprobs);
  choice["finish_reason"] = g.finish_reason;
  j["choices"] = OJson::array({choice});
  j["usage"] = usage(static_cast<int64_t>(g.prompt_token_ids.size()), static_cast<int64_t>(g.completion_token_ids.size()));
  return dump(j);
}

std::string render_openai_chunk(OpenAiKind kind, const OpenAiReplyIds& ids, std::string_view text, bool role,
                                const std::string* finish_reason, LogprobsView* logprobs,
                                std::span<const StepLogprobs> steps) {
  const bool chat = kind == OpenAiKind::kChat;
  OJson j = head(kind, ids, chat ? "chat.completion.chunk" : "text_completion");
  OJson choice = {{"index", 0}};
  if (chat) {
    OJson delta = OJson::object();
    if (role) delta["role"] = "assistant";
    if (!text.empty() || role) delta["content"] = std::string(text);
    choice["delta"] = delta;
  } else {
    choice["text"] = std::string(text);
  }
  choice["logprobs"] = logprobs_json(kind, steps, logprobs);
  choice["finish_reason"] = finish_reason ? OJson(*finish_reason) : OJson(nullptr);
  j["choices"] = OJson::array({choice});
  return dump(j);
}

std::string render_openai_usage_chunk(OpenAiKind kind, const OpenAiReplyIds& ids, int64_t prompt_tokens,
                                      int64_t completion_tokens) {
  OJson j = head(kind, ids, kind == OpenAiKind::kChat ? "chat.completion.chunk" : "text_completion");
  j["choices"] = OJson::array();
  j["usage"] = usage(prompt_tokens, completion_tokens);
  return dump(j);
}

std::string render_openai_stream_error(const std::string& message, const std::string& type) {
  OJson j = {{"error", {{"message", message}, {"type", type}, {"param", nullptr}, {"code", nullptr}}}};
  return dump(j);
}

std::string sse_event(std::string_view payload) {
  std::string out = "data: ";
  out += payload;
  out += "\n\n";
  return out;
}

}  // namespace stave::server
