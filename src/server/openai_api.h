// The OpenAI-compatible generation API of `stave serve`: POST /v1/chat/completions and
// POST /v1/completions bodies parsed and checked into a request for LanguageModel, and the
// replies in OpenAI's shapes (chat.completion, chat.completion.chunk, text_completion) and
// server-sent-event framing. No networking here: server/openai_service.h runs them.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "server/api_error.h"
#include "stave/language_model.h"

namespace stave::server {

enum class OpenAiKind { kChat, kCompletion };

struct OpenAiRequest {
  OpenAiKind kind = OpenAiKind::kChat;
  std::string model;                // as sent; "" when absent
  std::string body;                 // chat: the whole body, for LanguageModel::render_chat
  std::optional<std::string> prompt;          // completion: the prompt text …
  std::vector<int32_t> prompt_token_ids;      // … or its token ids
  GenerationOptions generation;
  bool max_tokens_given = false;    // max_tokens / max_completion_tokens in the body (else a default)
  bool stream = false;
  bool include_usage = false;       // stream_options.include_usage: a last chunk with usage
};

// Default new-token budgets when the body sets none: OpenAI's 16 for completions; for chat
// (which OpenAI bounds only by the context) `chat_max_tokens`.
inline constexpr int64_t kCompletionDefaultMaxTokens = 16;

// 400 with the field named for anything wrong or unsupported (n ≠ 1, echo, best_of, a prompt
// list of several prompts, logprobs out of 0 … 20, …). Log-probabilities: chat `logprobs: true`
// with `top_logprobs` 0 … 20 (default 0); completions `logprobs: N` (0 … 20). Either sets
// generation.logprobs.
std::variant<OpenAiRequest, ApiError> parse_openai_request(OpenAiKind kind, std::string_view body,
                                                           int64_t chat_max_tokens);

// What every reply and chunk of one request shares.
struct OpenAiReplyIds {
  std::string id;       // "chatcmpl-…" / "cmpl-…"
  int64_t created = 0;  // Unix seconds
  std::string model;
};

// What a reply shows of a token's log-probabilities: its text and bytes (LanguageModel::token_text
// and token_bytes), and, for completions, where the next token's text starts in the completion
// text (text_offset: Unicode code points, each token counted by its own text, as vLLM counts;
// carried from chunk to chunk of a stream).
struct LogprobsView {
  std::function<std::string(int32_t)> token_text;
  std::function<std::string(int32_t)> token_bytes;
  int64_t text_offset = 0;
};

// The choice's "logprobs" value for these steps. Chat: {"content": [{token, logprob, bytes,
// top_logprobs: [{token, logprob, bytes}]}]}; completions (legacy): {tokens, token_logprobs,
// top_logprobs: [{token: logprob} — the top ones plus the picked token], text_offset}.
std::string render_openai_logprobs(OpenAiKind kind, std::span<const StepLogprobs> steps, LogprobsView& view);

// `logprobs` (null: the request asked for none) is render_openai_logprobs's value.
std::string render_openai_reply(OpenAiKind kind, const OpenAiReplyIds& ids, const Generation& g,
                                LogprobsView* logprobs = nullptr);

// One streamed chunk: `text` is the new completion text; `role` (chat, the first chunk only)
// adds delta.role; `finish_reason` set ends the choice; `logprobs` (with `steps`: the tokens
// picked since the last chunk) the request's logprobs.
std::string render_openai_chunk(OpenAiKind kind, const OpenAiReplyIds& ids, std::string_view text, bool role,
                                const std::string* finish_reason, LogprobsView* logprobs = nullptr,
                                std::span<const StepLogprobs> steps = {});
// The chunk stream_options.include_usage asks for: no choices, usage.
std::string render_openai_usage_chunk(OpenAiKind kind, const OpenAiReplyIds& ids, int64_t prompt_tokens,
                                      int64_t completion_tokens);
// OpenAI's error object {"error": {"message", "type", "param", "code"}}, sent as an event when a
// stream fails after its head was sent.
std::string render_openai_stream_error(const std::string& message, const std::string& type);

// Server-sent-event framing: "data: <payload>\n\n"; the stream ends with sse_event("[DONE]").
std::string sse_event(std::string_view payload);

}  // namespace stave::server
