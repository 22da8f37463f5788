// The OpenAI-compatible endpoints of stave serve: request parsing and validation (400 naming
// the field), reply and chunk shapes, the bounded stream between a generation and its
// connection, and, over HTTP on the fixture release, /v1/chat/completions and /v1/completions
// whole and streamed (server-sent events over chunked encoding, ending in [DONE]) giving the
// text LanguageModel gives, a full queue answering 503, cancellation when the client goes away,
// and the generation metrics.
#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "server/admission_queue.h"
#include "server/http_stream.h"
#include "server/openai_api.h"
#include "server/server.h"
#include "stave/engine.h"
#include "stave/language_model.h"
#include "test_serve_util.h"
#include "test_util.h"

namespace stave::server {
namespace {
using json = nlohmann::json;
using namespace std::chrono_literals;

OpenAiRequest parsed_ok(OpenAiKind kind, const std::string& body) {
  auto r = parse_openai_request(kind, body, 256);
  if (auto* e = std::get_if<ApiError>(&r)) {
    ADD_FAILURE() << body << " → " << e->message();
    return {};
  }
  return std::get<OpenAiRequest>(r);
}

ApiError parsed_error(OpenAiKind kind, const std::string& body) {
  auto r = parse_openai_request(kind, body, 256);
  if (auto* e = std::get_if<ApiError>(&r)) return *e;
  ADD_FAILURE() << body << " was accepted";
  return {};
}

const std::string kChat = R"("messages":[{"role":"user","content":"hi"}])";

TEST(ServeOpenAiRequest, ChatFields) {
  const OpenAiRequest r = parsed_ok(OpenAiKind::kChat, "{" + kChat + R"(,"max_completion_tokens":7,"max_tokens":99,
      "temperature":0,"top_p":0.5,"seed":3,"stop":"x","stream":true,"stream_options":{"include_usage":true},"n":1,
      "logprobs":false,"model":"m"})");
  EXPECT_EQ(r.generation.max_tokens, 7);  // max_completion_tokens wins, as in OpenAI's API
  EXPECT_EQ(r.generation.sampling.temperature, 0.0);
  EXPECT_EQ(r.generation.sampling.top_p, 0.5);
  EXPECT_EQ(r.generation.sampling.seed, 3u);
  EXPECT_EQ(r.generation.stop, std::vector<std::string>{"x"});
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_EQ(r.model, "m");
  EXPECT_NE(r.body.find("messages"), std::string::npos);
  EXPECT_EQ(parsed_ok(OpenAiKind::kChat, "{" + kChat + "}").generation.max_tokens, 256);
  EXPECT_EQ(parsed_ok(OpenAiKind::kChat, "{" + kChat + R"(,"stop":["a","b"]})").generation.stop,
            (std::vector<std::string>{"a", "b"}));
}

TEST(ServeOpenAiRequest, CompletionPrompts) {
  const OpenAiRequest text = parsed_ok(OpenAiKind::kCompletion, R"({"prompt":"Once"})");
  EXPECT_EQ(text.prompt, "Once");
  EXPECT_EQ(text.generation.max_tokens, kCompletionDefaultMaxTokens);
  EXPECT_EQ(parsed_ok(OpenAiKind::kCompletion, R"({"prompt":["Once"]})").prompt, "Once");
  EXPECT_EQ(parsed_ok(OpenAiKind::kCompletion, R"({"prompt":[1,2,3],"max_tokens":4})").prompt_token_ids,
            (std::vector<int32_t>{1, 2, 3}));
}

TEST(ServeOpenAiRequest, RefusalsNameTheField) {
  struct Case {
    OpenAiKind kind;
    std::string body, field, says;
  };
  const std::vector<Case> cases = {
      {OpenAiKind::kChat, R"({"n":2,)" + kChat + "}", "n", "\"n\""},
      {OpenAiKind::kChat, R"({"logprobs":true,)" + kChat + "}", "logprobs", "logprobs is not supported"},
      {OpenAiKind::kChat, R"({"top_logprobs":2,)" + kChat + "}", "top_logprobs", "logprobs is not supported"},
      {OpenAiKind::kCompletion, R"({"prompt":"a","logprobs":1})", "logprobs", "logprobs is not supported"},
      {OpenAiKind::kChat, R"({"messages":[]})", "messages", "messages"},
      {OpenAiKind::kChat, R"({"model":"m"})", "messages", "messages"},
      {OpenAiKind::kCompletion, R"({"messages":[]})", "prompt", "prompt"},
      {OpenAiKind::kCompletion, R"({"prompt":["a","b"]})", "prompt", "one prompt"},
      {OpenAiKind::kCompletion, R"({"prompt":""})", "prompt", "empty"},
      {OpenAiKind::kCompletion, R"({"prompt":{}})", "prompt", "prompt must be"},
      {OpenAiKind::kChat, R"({"stream":"yes",)" + kChat + "}", "stream", "boolean"},
      {OpenAiKind::kChat, R"({"temperature":3,)" + kChat + "}", "temperature", "between 0 and 2"},
      {OpenAiKind::kChat, R"({"temperature":"hot",)" + kChat + "}", "temperature", "temperature"},
      {OpenAiKind::kChat, R"({"top_p":0,)" + kChat + "}", "top_p", "top_p"},
      {OpenAiKind::kChat, R"({"max_tokens":-1,)" + kChat + "}", "max_tokens", "max_tokens"},
      {OpenAiKind::kChat, R"({"stop":[1],)" + kChat + "}", "stop", "stop"},
      {OpenAiKind::kChat, R"({"stop":["a","b","c","d","e"],)" + kChat + "}", "stop", "at most 4"},
      {OpenAiKind::kChat, R"({"seed":1.5,)" + kChat + "}", "seed", "seed"},
      {OpenAiKind::kCompletion, R"({"prompt":"a","echo":true})", "echo", "echo"},
  };
  for (const Case& c : cases) {
    const ApiError e = parsed_error(c.kind, c.body);
    EXPECT_EQ(e.status, 400) << c.body;
    ASSERT_FALSE(e.issues.empty()) << c.body;
    ASSERT_EQ(e.issues.front().loc.size(), 2u) << c.body << " → " << e.message();
    EXPECT_EQ(e.issues.front().loc[1], c.field) << c.body;
    EXPECT_NE(e.message().find(c.says), std::string::npos) << c.body << " → " << e.message();
  }
  EXPECT_EQ(parsed_error(OpenAiKind::kChat, "[1]").status, 400);
  EXPECT_EQ(parsed_error(OpenAiKind::kChat, "{").status, 400);
}

TEST(ServeOpenAiReply, Shapes) {
  Generation g;
  g.prompt_token_ids = {1, 2, 3};
  g.completion_token_ids = {4, 5};
  g.text = "hé";
  g.finish_reason = "stop";
  const OpenAiReplyIds ids{"chatcmpl-1", 1700000000, "clef"};
  const json chat = json::parse(render_openai_reply(OpenAiKind::kChat, ids, g));
  EXPECT_EQ(chat["id"], "chatcmpl-1");
  EXPECT_EQ(chat["object"], "chat.completion");
  EXPECT_EQ(chat["created"], 1700000000);
  EXPECT_EQ(chat["model"], "clef");
  EXPECT_EQ(chat["choices"][0]["index"], 0);
  EXPECT_EQ(chat["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(chat["choices"][0]["message"]["content"], "hé");
  EXPECT_EQ(chat["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(chat["usage"], json({{"prompt_tokens", 3}, {"completion_tokens", 2}, {"total_tokens", 5}}));
  const json text = json::parse(render_openai_reply(OpenAiKind::kCompletion, ids, g));
  EXPECT_EQ(text["object"], "text_completion");
  EXPECT_EQ(text["choices"][0]["text"], "hé");

  const json first = json::parse(render_openai_chunk(OpenAiKind::kChat, ids, "", true, nullptr));
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"], json({{"role", "assistant"}, {"content", ""}}));
  EXPECT_TRUE(first["choices"][0]["finish_reason"].is_null());
  const json piece = json::parse(render_openai_chunk(OpenAiKind::kChat, ids, "ab", false, nullptr));
  EXPECT_EQ(piece["choices"][0]["delta"], json({{"content", "ab"}}));
  const std::string length = "length";
  const json last = json::parse(render_openai_chunk(OpenAiKind::kChat, ids, "", false, &length));
  EXPECT_EQ(last["choices"][0]["delta"], json::object());
  EXPECT_EQ(last["choices"][0]["finish_reason"], "length");
  const json usage = json::parse(render_openai_usage_chunk(OpenAiKind::kChat, ids, 3, 2));
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["total_tokens"], 5);
  const json tc = json::parse(render_openai_chunk(OpenAiKind::kCompletion, ids, "ab", false, nullptr));
  EXPECT_EQ(tc["object"], "text_completion");
  EXPECT_EQ(tc["choices"][0]["text"], "ab");
  EXPECT_EQ(sse_event("[DONE]"), "data: [DONE]\n\n");
}

TEST(ServeHttpStream, BoundedProducerWaitsForTheReaderAndStopsWhenItLeaves) {
  HttpStream s(8);
  std::atomic<int> notified{0};
  s.set_notify([&] { ++notified; });
  EXPECT_TRUE(s.take().bytes.empty());  // nothing yet: asks to be notified
  EXPECT_TRUE(s.write("12345678"));
  EXPECT_EQ(notified.load(), 1);
  std::atomic<bool> second_done{false};
  std::thread producer([&] {
    EXPECT_TRUE(s.write("abc"));  // the buffer is full: waits for a take
    second_done = true;
    EXPECT_FALSE(s.write(std::string(100, 'x')));  // waits, then the reader leaves
  });
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(second_done.load());
  EXPECT_EQ(s.take().bytes, "12345678");
  while (!second_done.load()) std::this_thread::sleep_for(1ms);
  std::this_thread::sleep_for(20ms);
  s.close();
  producer.join();
  EXPECT_TRUE(s.closed());
  HttpStream t;
  t.end();
  EXPECT_TRUE(t.take().ended);
}

// ---------------------------------------------------------------------------------------------
// Over HTTP, on the fixture release

struct Fixture {
  std::shared_ptr<const Engine> engine;
  std::shared_ptr<const LanguageModel> lm;
};

const Fixture& fixture_models() {
  static Fixture f = [] {
    EngineOptions eo;
    eo.model = test::fixture("public/model-bf16");
    eo.precision = Precision::kExact;
    return Fixture{Engine::load(eo), LanguageModel::load(eo)};
  }();
  return f;
}

// A server on the BF16 fixture with both its engine and its language model.
class LiveServer : public test::RunningServer {
 public:
  explicit LiveServer(ServeOptions o = {})
      : RunningServer(with_bf16_model(std::move(o)), "public/model-bf16", fixture_models().engine) {
    server().set_language_model(fixture_models().lm);
  }
  httplib::Result post(const std::string& path, const std::string& body) const {
    httplib::Client c("127.0.0.1", port());
    c.set_read_timeout(120);
    return c.Post(path, body, "application/json");
  }
  httplib::Result get(const std::string& path) const {
    httplib::Client c("127.0.0.1", port());
    return c.Get(path);
  }

 private:
  static ServeOptions with_bf16_model(ServeOptions o) {
    o.engine.model = test::fixture("public/model-bf16");
    return o;
  }
};

// The hooks the server uses: on_token sees every generated id; a raised cancel flag stops the
// generation at its next step.
TEST(ServeOpenAiModel, OnTokenAndCancelHooks) {
  STAVE_REQUIRE_FIXTURE("public/model-bf16/config.json");
  const LanguageModel& lm = *fixture_models().lm;
  const std::vector<int32_t> prompt = lm.tokenize("The sea is");
  GenerationOptions g;
  g.max_tokens = 6;
  g.sampling.temperature = 0;
  g.ignore_eos = true;
  std::vector<int32_t> seen;
  g.on_token = [&](int32_t id) { seen.push_back(id); };
  const Generation whole = lm.generate(prompt, g);
  EXPECT_EQ(seen, whole.completion_token_ids);
  std::atomic<bool> cancel{false};
  g.cancel = &cancel;
  int picked = 0;
  g.on_token = [&](int32_t) {
    if (++picked == 2) cancel = true;
  };
  EXPECT_THROW(lm.generate(prompt, g), DecisionCancelled);
  EXPECT_EQ(picked, 2);
}

// The data: payloads of an event stream, in order.
std::vector<std::string> sse_payloads(const std::string& body) {
  std::vector<std::string> out;
  size_t at = 0;
  while ((at = body.find("data: ", at)) != std::string::npos) {
    const size_t end = body.find("\n\n", at);
    out.push_back(body.substr(at + 6, end - at - 6));
    at = end;
  }
  return out;
}

const std::string kGreedyChat =
    R"({"messages":[{"role":"user","content":"What is the capital of France?"}],"temperature":0,"max_tokens":12})";

TEST(ServeOpenAiHttp, ChatWholeAndStreamedGiveTheLanguageModelsText) {
  STAVE_REQUIRE_FIXTURE("public/model-bf16/config.json");
  LiveServer srv;
  GenerationOptions g = generation_options_from_request(kGreedyChat);
  const Generation expected = fixture_models().lm->chat(kGreedyChat, g);

  auto whole = srv.post("/v1/chat/completions", kGreedyChat);
  ASSERT_TRUE(whole);
  ASSERT_EQ(whole->status, 200) << whole->body;
  const json j = json::parse(whole->body);
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["choices"][0]["message"]["content"], expected.text);
  EXPECT_EQ(j["choices"][0]["finish_reason"], expected.finish_reason);
  EXPECT_EQ(j["usage"]["prompt_tokens"], expected.prompt_token_ids.size());
  EXPECT_EQ(j["usage"]["completion_tokens"], expected.completion_token_ids.size());

  json sbody = json::parse(kGreedyChat);
  sbody["stream"] = true;
  sbody["stream_options"] = {{"include_usage", true}};
  auto streamed = srv.post("/v1/chat/completions", sbody.dump());
  ASSERT_TRUE(streamed);
  ASSERT_EQ(streamed->status, 200) << streamed->body;
  EXPECT_EQ(streamed->get_header_value("Content-Type"), "text/event-stream");
  EXPECT_EQ(streamed->get_header_value("Transfer-Encoding"), "chunked");
  const auto events = sse_payloads(streamed->body);
  ASSERT_GE(events.size(), 4u) << streamed->body;
  EXPECT_EQ(events.back(), "[DONE]");
  std::string text, finish;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    const json c = json::parse(events[i]);
    EXPECT_EQ(c["object"], "chat.completion.chunk");
    EXPECT_EQ(c["id"], json::parse(events[0])["id"]);
    if (c.contains("usage")) {
      EXPECT_EQ(c["usage"]["completion_tokens"], expected.completion_token_ids.size());
      continue;
    }
    if (c["choices"][0]["delta"].contains("content")) text += c["choices"][0]["delta"]["content"].get<std::string>();
    if (!c["choices"][0]["finish_reason"].is_null()) finish = c["choices"][0]["finish_reason"];
  }
  EXPECT_EQ(json::parse(events[0])["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(text, expected.text);
  EXPECT_EQ(finish, expected.finish_reason);

  const std::string metrics = srv.get("/metrics")->body;
  EXPECT_NE(metrics.find("stave_time_to_first_token_seconds_count 2"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("stave_inter_token_latency_seconds_count"), std::string::npos);
  EXPECT_NE(metrics.find("stave_generation_tokens_per_second_count"), std::string::npos);
  EXPECT_NE(metrics.find("stave_requests_total{endpoint=\"/v1/chat/completions\",status=\"200\"} 2"), std::string::npos)
      << metrics;
  const json models = json::parse(srv.get("/v1/models")->body);
  EXPECT_EQ(models["data"][0]["capabilities"]["chat_completions"], true);
}

TEST(ServeOpenAiHttp, CompletionsAndRefusals) {
  STAVE_REQUIRE_FIXTURE("public/model-bf16/config.json");
  LiveServer srv;
  const std::string body = R"({"prompt":"The capital of France is","max_tokens":5,"temperature":0})";
  const auto& lm = *fixture_models().lm;
  const Generation expected = lm.generate(lm.tokenize("The capital of France is"), generation_options_from_request(body));
  auto r = srv.post("/v1/completions", body);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json j = json::parse(r->body);
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["choices"][0]["text"], expected.text);
  EXPECT_EQ(j["choices"][0]["finish_reason"], expected.finish_reason);
  EXPECT_EQ(j["usage"]["total_tokens"], expected.prompt_token_ids.size() + expected.completion_token_ids.size());

  auto n2 = srv.post("/v1/chat/completions", R"({"n":2,"messages":[{"role":"user","content":"hi"}]})");
  ASSERT_TRUE(n2);
  EXPECT_EQ(n2->status, 400);
  EXPECT_NE(n2->body.find("\"n\""), std::string::npos) << n2->body;
  auto other = srv.post("/v1/completions", R"({"model":"gpt-4","prompt":"a"})");
  ASSERT_TRUE(other);
  EXPECT_EQ(other->status, 404);
  auto get = srv.get("/v1/chat/completions");
  ASSERT_TRUE(get);
  EXPECT_EQ(get->status, 405);
  auto bad_id = srv.post("/v1/completions", R"({"prompt":[99999999]})");
  ASSERT_TRUE(bad_id);
  EXPECT_EQ(bad_id->status, 400) << bad_id->body;
}

TEST(ServeOpenAiHttp, AFullQueueAnswers503) {
  STAVE_REQUIRE_FIXTURE("public/model-bf16/config.json");
  ServeOptions o;
  o.max_running = 1;
  o.max_queue = 0;
  LiveServer srv(o);
  std::mutex m;
  std::condition_variable cv;
  bool open = false;
  auto busy = srv.server().admission().try_submit([&] {
    std::unique_lock<std::mutex> l(m);
    cv.wait(l, [&] { return open; });
  });
  ASSERT_TRUE(busy);
  while (srv.server().admission().running() == 0) std::this_thread::sleep_for(1ms);
  auto r = srv.post("/v1/chat/completions", kGreedyChat);
  {
    std::lock_guard<std::mutex> l(m);
    open = true;
  }
  cv.notify_all();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);
  EXPECT_FALSE(r->get_header_value("Retry-After").empty());
}

// A client that reads one event of a long stream and hangs up: its generation stops early.
TEST(ServeOpenAiHttp, StreamStopsWhenTheClientLeaves) {
  STAVE_REQUIRE_FIXTURE("public/model-bf16/config.json");
  LiveServer srv;
  const std::string body =
      R"({"messages":[{"role":"user","content":"Count."}],"stream":true,"max_tokens":100000,"ignore_eos":true})";
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(srv.port()));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  const std::string req = "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                          "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  ASSERT_EQ(::send(fd, req.data(), req.size(), 0), static_cast<ssize_t>(req.size()));
  std::string got;
  char buf[4096];
  while (got.find("data: ") == std::string::npos) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    ASSERT_GT(n, 0);
    got.append(buf, static_cast<size_t>(n));
  }
  EXPECT_NE(got.find("Transfer-Encoding: chunked"), std::string::npos) << got;
  ::close(fd);
  // The generation notices at its next writes and stops; the worker is free again.
  const auto until = std::chrono::steady_clock::now() + 60s;
  std::string metrics;
  while (std::chrono::steady_clock::now() < until) {
    metrics = srv.get("/metrics")->body;
    if (metrics.find("stave_decisions_cancelled_total{reason=\"client_gone\"} 1") != std::string::npos &&
        srv.server().admission().running() == 0)
      break;
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_NE(metrics.find("stave_decisions_cancelled_total{reason=\"client_gone\"} 1"), std::string::npos) << metrics;
  EXPECT_EQ(srv.server().admission().running(), 0u);
  const std::string tokens = "\nstave_generated_tokens_total ";
  const size_t at = metrics.find(tokens);
  ASSERT_NE(at, std::string::npos);
  EXPECT_LT(std::stoll(metrics.substr(at + tokens.size())), 100000);
}

}  // namespace
}  // namespace stave::server
