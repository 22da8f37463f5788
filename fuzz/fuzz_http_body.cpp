// stave serve's request path on arbitrary bytes. An input that starts with an upper-case letter
// is a whole HTTP request (request line, headers, body): it goes through the transport's parser
// under the default HttpLimits (server/http_parse.h: strict framing, head and body limits),
// which must either refuse it with a 4xx or hand over a request; a POST /v1/systemone request's
// body then takes the path below. Any other input is a body (the seeds are JSON).
// The body → response path of POST /v1/systemone (src/server/systemone_body.h), with the
// server's default limits: every body must become either an error reply (400,
// 404, 413 or 422, at least one issue, `loc` starting at "body", valid JSON in both the Jev and
// the Workers AI spelling) or an accepted request whose reply (usage extras added, optionally
// enveloped) is valid JSON — never a crash, never a 500.
// Accepted requests get a decision without answers by default: a real forward pass takes
// seconds under the sanitizers. With STAVE_FUZZ_MODEL=<release folder> they are decided for real
// (run with a larger -timeout, e.g. 120).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "decide/answers.h"
#include "decide/request_handle.h"
#include "server/api_error.h"
#include "server/http_parse.h"
#include "server/model_names.h"
#include "server/serve_options.h"
#include "server/systemone_body.h"
#include "stave/engine.h"

namespace {

const stave::Engine* engine() {
  static std::unique_ptr<stave::Engine> e = [] {
    std::string path;
    if (const char* env = std::getenv("STAVE_FUZZ_MODEL"); env && *env) path = env;
    std::unique_ptr<stave::Engine> out;
    if (path.empty() || !std::filesystem::exists(path + "/config.json")) return out;
    stave::EngineOptions o;
    o.model = path;
    o.threads = 1;
    out = stave::Engine::load(o);
    return out;
  }();
  return e.get();
}

void check_json(const std::string& text) {
  if (!nlohmann::json::accept(text)) std::abort();
}

void check_error(const stave::server::ApiError& e) {
  if (e.status != 400 && e.status != 404 && e.status != 413 && e.status != 422) std::abort();
  if (e.issues.empty()) std::abort();
  for (const auto& i : e.issues)
    if (i.loc.empty() || i.loc.front() != "body" || i.msg.empty() || i.type.empty()) std::abort();
  check_json(stave::server::render_error(e, false));
  check_json(stave::server::render_error(e, true));
}

}  // namespace

// Loading the model (the tokenizer above all) takes seconds under the sanitizers: do it before
// the first input, so it does not count against libFuzzer's per-input timeout.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)engine();
  return 0;
}

namespace {

// The transport's verdict on raw request bytes; returns the body to decide, if any.
std::optional<std::string> http_request(std::string_view bytes) {
  using namespace stave::server;
  static const HttpLimits limits = [] {
    HttpLimits l;
    l.max_body_bytes = ServeOptions{}.max_body_bytes;
    return l;
  }();
  std::string_view rest = bytes;
  std::optional<std::string> body;
  // Pipelined requests: each one in turn, as a connection reads them.
  for (int i = 0; i < 8 && !rest.empty(); ++i) {
    ParsedRequest p = parse_request_bytes(rest, limits, [](const HttpRequest& head) {
      return head.path == "/v1/systemone" ? limits.max_body_bytes : size_t{1024};
    });
    if (p.refusal) {
      const int s = p.refusal->status;
      if (s != 400 && s != 408 && s != 413 && s != 414 && s != 431) std::abort();
      if (p.refusal->message.empty()) std::abort();
      return body;
    }
    if (!p.request) return body;  // the bytes end before a request: a connection would just close
    if (p.consumed == 0 || p.consumed > rest.size()) std::abort();
    if (p.request->body.size() > (p.request->path == "/v1/systemone" ? limits.max_body_bytes : 1024)) std::abort();
    if (!body && p.request->method == "POST" && p.request->path == "/v1/systemone") body = p.request->body;
    rest.remove_prefix(p.consumed);
  }
  return body;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace stave::server;
  static const ModelNames names("/models/tiny", "", {"prod"}, true);
  static const stave::RequestLimits limits = ServeOptions::default_limits();
  std::string_view body(reinterpret_cast<const char*>(data), size);
  std::string from_http;
  if (size > 0 && data[0] >= 'A' && data[0] <= 'Z') {
    auto b = http_request(body);
    if (!b) return 0;
    from_http = std::move(*b);
    body = from_http;
  }
  auto parsed = parse_systemone_body(body, names, limits);
  if (auto* e = std::get_if<ApiError>(&parsed)) {
    check_error(*e);
    return 0;
  }
  const stave::DecisionRequest& request = std::get<stave::DecisionRequest>(parsed);
  if (!names.serves(request.model)) std::abort();
  const stave::Engine* eng = engine();
  stave::DecideOptions o;
  o.max_length = 512;  // keeps each decision short under the sanitizers
  try {
    stave::Decision d;
    if (eng) {
      d = eng->decide(stave::make_request(request), o);
    } else {
      stave::SystemOneResponse r;  // the reference's spelling of a response without answers
      r.model = request.model;
      r.input_tokens = static_cast<int64_t>(size);
      d.json = stave::render_systemone_response(r);
      d.usage.truncated_state_tokens = static_cast<int64_t>(size % 7);
    }
    const std::string plain = render_systemone_reply(d, 1.5, false);
    check_json(plain);
    const auto j = nlohmann::json::parse(plain);
    if (!j["usage"].contains("latency_ms") || !j["usage"].contains("truncated_state_tokens")) std::abort();
    check_json(render_systemone_reply(d, 1.5, true));
  } catch (const stave::Error& err) {
    check_error(from_engine_error(err));
  }
  return 0;
}
