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
std::optional<ApiError> unsupported_fields(const Json& j, OpenAiKind kind) {
  if (kind == OpenAiKind::kChat) {
    if (present(j, "logprobs") && !(j["logprobs"].is_boolean() && !j["logprobs"].get<bool>()))
      return bad("logprobs", "logprobs is not supported");
  } else if (present(j, "logprobs")) {
    return bad("logprobs", "logprobs is not supported");
  }
  if (present(j, "top_logprobs")) return bad("top_logprobs", "logprobs is not supported (top_logprobs)");
  if (present(j, "echo") && !(j["echo"].is_boolean() && !j["echo"].get<bool>()))
    return bad("echo", "echo is not supported");
  if (present(j, "best_of") && !(j["best_of"].is_number_integer() && j["best_of"].get<int64_t>() == 1))
    return bad("best_of", "best_of other than 1 is not supported");
  if (present(j, "suffix")) return bad("suffix", "suffix is not supported");
  if (present(j, "logit_bias") && !(j["logit_bias"].is_object() && j["logit_bias"].empty()))
    return bad("logit_bias", "logit_bias is not supported");
  return std::nullopt;
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

}  // namespace

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
  if (auto e = unsupported_fields(j, kind)) return *e;
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
  const SamplingOptions& s = r.generation.sampling;
  if (!(s.temperature >= 0.0 && s.temperature <= 2.0)) return bad("temperature", "temperature must be between 0 and 2");
  if (!(s.top_p > 0.0 && s.top_p <= 1.0)) return bad("top_p", "top_p must be in (0, 1]");
  if (r.generation.stop.size() > 4) return bad("stop", "stop takes at most 4 strings");
  for (const std::string& st : r.generation.stop)
    if (st.empty()) return bad("stop", "a stop string must not be empty");
  return r;
}

std::string render_openai_reply(OpenAiKind kind, const OpenAiReplyIds& ids, const Generation& g) {
  const bool chat = kind == OpenAiKind::kChat;
  OJson j = head(kind, ids, chat ? "chat.completion" : "text_completion");
  OJson choice = {{"index", 0}};
  if (chat) choice["message"] = {{"role", "assistant"}, {"content", g.text}};
  else choice["text"] = g.text;
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = g.finish_reason;
  j["choices"] = OJson::array({choice});
  j["usage"] = usage(static_cast<int64_t>(g.prompt_token_ids.size()), static_cast<int64_t>(g.completion_token_ids.size()));
  return dump(j);
}

std::string render_openai_chunk(OpenAiKind kind, const OpenAiReplyIds& ids, std::string_view text, bool role,
                                const std::string* finish_reason) {
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
  choice["logprobs"] = nullptr;
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
