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
#include <functional>
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

// Request bodies: one user message (or a prompt) plus the given fields; keys come out sorted,
// which the parser does not care about.
std::string chat_body(const std::string& user, json fields = json::object()) {
  fields["messages"] = json::array({{{"role", "user"}, {"content", user}}});
  return fields.dump();
}

std::string completion_body(json prompt, json fields = json::object()) {
  fields["prompt"] = std::move(prompt);
  return fields.dump();
}

// `body` (a JSON object) with `fields` set or replaced.
std::string with_fields(const std::string& body, const json& fields) {
  json j = json::parse(body);
  j.update(fields);
  return j.dump();
}

// The messages of a one-line chat as a JSON fragment, for bodies written out by hand.
const std::string kChat = R"("messages":[{"role":"user","content":"hi"}])";

// Runs `f` when the scope ends (a test that occupies a worker frees it even when it fails early).
struct OnExit {
  std::function<void()> f;
  ~OnExit() { f(); }
};

TEST(ServeOpenAiRequest, ChatFields) {
  const OpenAiRequest r = parsed_ok(
      OpenAiKind::kChat, chat_body("hi", {{"max_completion_tokens", 7}, {"max_tokens", 99}, {"temperature", 0},
                                          {"top_p", 0.5}, {"seed", 3}, {"stop", "x"}, {"stream", true},
                                          {"stream_options", {{"include_usage", true}}}, {"n", 1},
                                          {"logprobs", false}, {"model", "m"}}));
  EXPECT_EQ(r.generation.max_tokens, 7);  // max_completion_tokens wins, as in OpenAI's API
  EXPECT_EQ(r.generation.sampling.temperature, 0.0);
  EXPECT_EQ(r.generation.sampling.top_p, 0.5);
  EXPECT_EQ(r.generation.sampling.seed, 3u);
  EXPECT_EQ(r.generation.stop, std::vector<std::string>{"x"});
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_EQ(r.model, "m");
  EXPECT_NE(r.body.find("messages"), std::string::npos);
  EXPECT_EQ(parsed_ok(OpenAiKind::kChat, chat_body("hi")).generation.max_tokens, 256);
  EXPECT_EQ(parsed_ok(OpenAiKind::kChat, chat_body("hi", {{"stop", json::array({"a", "b"})}})).generation.stop,
            (std::vector<std::string>{"a", "b"}));
}

TEST(ServeOpenAiRequest, LogprobsFields) {
  auto chat_logprobs = [](const json& fields) {
    return parsed_ok(OpenAiKind::kChat, chat_body("hi", fields)).generation.logprobs;
  };
  EXPECT_EQ(chat_logprobs(json::object()), -1);
  EXPECT_EQ(chat_logprobs({{"logprobs", false}}), -1);
  EXPECT_EQ(chat_logprobs({{"logprobs", true}}), 0);
  EXPECT_EQ(chat_logprobs({{"logprobs", true}, {"top_logprobs", 20}}), 20);
  EXPECT_EQ(chat_logprobs({{"logprobs", true}, {"top_logprobs", nullptr}}), 0);
  EXPECT_EQ(parsed_ok(OpenAiKind::kCompletion, R"({"prompt":"a"})").generation.logprobs, -1);
  EXPECT_EQ(parsed_ok(OpenAiKind::kCompletion, R"({"prompt":"a","logprobs":0})").generation.logprobs, 0);
  EXPECT_EQ(parsed_ok(OpenAiKind::kCompletion, R"({"prompt":"a","logprobs":5})").generation.logprobs, 5);
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
      {OpenAiKind::kChat, chat_body("hi", {{"n", 2}}), "n", "\"n\""},
      {OpenAiKind::kChat, chat_body("hi", {{"logprobs", 1}}), "logprobs", "boolean"},
      {OpenAiKind::kChat, chat_body("hi", {{"top_logprobs", 2}}), "top_logprobs", "needs \"logprobs\": true"},
      {OpenAiKind::kChat, chat_body("hi", {{"logprobs", true}, {"top_logprobs", 21}}), "top_logprobs", "0 to 20"},
      {OpenAiKind::kChat, chat_body("hi", {{"logprobs", true}, {"top_logprobs", -1}}), "top_logprobs", "0 to 20"},
      {OpenAiKind::kCompletion, R"({"prompt":"a","logprobs":21})", "logprobs", "0 to 20"},
      {OpenAiKind::kCompletion, R"({"prompt":"a","logprobs":true})", "logprobs", "0 to 20"},
      {OpenAiKind::kCompletion, R"({"prompt":"a","top_logprobs":2})", "top_logprobs", "chat field"},
      {OpenAiKind::kChat, R"({"messages":[]})", "messages", "messages"},
      {OpenAiKind::kChat, R"({"model":"m"})", "messages", "messages"},
      {OpenAiKind::kCompletion, R"({"messages":[]})", "prompt", "prompt"},
      {OpenAiKind::kCompletion, R"({"prompt":["a","b"]})", "prompt", "one prompt"},
      {OpenAiKind::kCompletion, R"({"prompt":""})", "prompt", "empty"},
      {OpenAiKind::kCompletion, R"({"prompt":{}})", "prompt", "prompt must be"},
      {OpenAiKind::kChat, chat_body("hi", {{"stream", "yes"}}), "stream", "boolean"},
      {OpenAiKind::kChat, chat_body("hi", {{"temperature", 3}}), "temperature", "between 0 and 2"},
      {OpenAiKind::kChat, chat_body("hi", {{"temperature", "hot"}}), "temperature", "temperature"},
      {OpenAiKind::kChat, chat_body("hi", {{"top_p", 0}}), "top_p", "top_p"},
      {OpenAiKind::kChat, chat_body("hi", {{"max_tokens", -1}}), "max_tokens", "max_tokens"},
      {OpenAiKind::kChat, chat_body("hi", {{"stop", json::array({1})}}), "stop", "stop"},
      {OpenAiKind::kChat, chat_body("hi", {{"stop", json::array({"a", "b", "c", "d", "e"})}}), "stop", "at most 4"},
      {OpenAiKind::kChat, chat_body("hi", {{"seed", 1.5}}), "seed", "seed"},
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
  EXPECT_TRUE(chat["choices"][0]["logprobs"].is_null());  // not asked for
}

// The two logprobs schemas, on made-up tokens: token 7 is "h", 8 the first byte of "é" (alone
// it shows as U+FFFD), 9 the second.
TEST(ServeOpenAiReply, LogprobsShapes) {
  LogprobsView view;
  view.token_text = [](int32_t id) { return id == 7 ? std::string("h") : std::string("\xEF\xBF\xBD"); };
  view.token_bytes = [](int32_t id) { return id == 7 ? std::string("h") : id == 8 ? std::string("\xC3") : std::string("\xA9"); };
  Generation g;
  g.prompt_token_ids = {1};
  g.completion_token_ids = {7, 8, 9};
  g.text = "hé";
  g.finish_reason = "length";
  g.logprobs = {{7, -0.25, {{7, -0.25}, {8, -2.0}}}, {8, -0.5, {{8, -0.5}, {7, -1.5}}}, {9, -3.0, {{7, -0.1}, {8, -2.5}}}};
  const OpenAiReplyIds ids{"chatcmpl-1", 1700000000, "clef"};
  const json chat = json::parse(render_openai_reply(OpenAiKind::kChat, ids, g, &view));
  const json& content = chat["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 3u);
  EXPECT_EQ(content[0], json::parse(R"({"token":"h","logprob":-0.25,"bytes":[104],"top_logprobs":[
      {"token":"h","logprob":-0.25,"bytes":[104]},{"token":"\ufffd","logprob":-2.0,"bytes":[195]}]})"));
  EXPECT_EQ(content[1]["bytes"], json::parse("[195]"));
  EXPECT_EQ(content[2]["bytes"], json::parse("[169]"));
  EXPECT_EQ(content[2]["logprob"], -3.0);

  LogprobsView legacy = view;
  const json text = json::parse(render_openai_reply(OpenAiKind::kCompletion, ids, g, &legacy));
  const json& lp = text["choices"][0]["logprobs"];
  EXPECT_EQ(lp["tokens"], json::parse(R"(["h","\ufffd","\ufffd"])"));
  EXPECT_EQ(lp["token_logprobs"], json::parse("[-0.25,-0.5,-3.0]"));
  EXPECT_EQ(lp["text_offset"], json::parse("[0,1,2]"));
  EXPECT_EQ(lp["top_logprobs"][0], json::parse(R"({"h":-0.25,"\ufffd":-2.0})"));
  EXPECT_EQ(lp["top_logprobs"][2], json::parse(R"({"h":-0.1,"\ufffd":-2.5})"));  // one text: the likelier value
  EXPECT_EQ(legacy.text_offset, 3);  // carried on to the next chunk

  // Streamed: a chunk carries the steps given to it; offsets go on from the view.
  const std::vector<StepLogprobs> one = {g.logprobs[0]};
  const json c = json::parse(render_openai_chunk(OpenAiKind::kCompletion, ids, "h", false, nullptr, &legacy, one));
  EXPECT_EQ(c["choices"][0]["logprobs"]["text_offset"], json::parse("[3]"));
  const json cc = json::parse(render_openai_chunk(OpenAiKind::kChat, ids, "h", false, nullptr, &view, one));
  EXPECT_EQ(cc["choices"][0]["logprobs"]["content"][0]["token"], "h");
  EXPECT_TRUE(json::parse(render_openai_chunk(OpenAiKind::kChat, ids, "h", false, nullptr))["choices"][0]["logprobs"].is_null());
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
  httplib::Result post(const std::string& path, const std::string& body, const httplib::Headers& headers = {}) const {
    httplib::Client c("127.0.0.1", port());
    c.set_read_timeout(120);
    return c.Post(path, headers, body, "application/json");
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

  auto streamed = srv.post("/v1/chat/completions",
                           with_fields(kGreedyChat, {{"stream", true}, {"stream_options", {{"include_usage", true}}}}));
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

// The data payloads of a stream that are chunks with choices (not [DONE], not the usage chunk).
std::vector<json> choice_chunks(const std::string& body) {
  std::vector<json> out;
  for (const std::string& p : sse_payloads(body)) {
    if (p == "[DONE]") continue;
    json c = json::parse(p);
    if (!c["choices"].empty()) out.push_back(std::move(c));
  }
  return out;
}

// logprobs over HTTP: whole replies carry the LanguageModel's values in OpenAI's two schemas;
// a stream's chunks carry the same entries, in order, split across its chunks.
TEST(ServeOpenAiHttp, LogprobsWholeAndStreamed) {
  STAVE_REQUIRE_FIXTURE("public/model-bf16/config.json");
  LiveServer srv;
  const auto& lm = *fixture_models().lm;
  const std::string chat_request =
      R"({"messages":[{"role":"user","content":"What is the capital of France?"}],"temperature":0,"max_tokens":6,
          "logprobs":true,"top_logprobs":3})";
  GenerationOptions g = generation_options_from_request(chat_request);
  g.logprobs = 3;
  const Generation expected = lm.chat(chat_request, g);
  ASSERT_EQ(expected.logprobs.size(), expected.completion_token_ids.size());

  auto whole = srv.post("/v1/chat/completions", chat_request);
  ASSERT_TRUE(whole);
  ASSERT_EQ(whole->status, 200) << whole->body;
  const json content = json::parse(whole->body)["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), expected.logprobs.size()) << whole->body;
  for (size_t i = 0; i < content.size(); ++i) {
    const StepLogprobs& s = expected.logprobs[i];
    EXPECT_EQ(content[i]["token"], lm.token_text(s.id));
    EXPECT_DOUBLE_EQ(content[i]["logprob"].get<double>(), s.logprob);
    std::string bytes;
    for (const json& b : content[i]["bytes"]) bytes.push_back(static_cast<char>(b.get<int>()));
    EXPECT_EQ(bytes, lm.token_bytes(s.id));
    ASSERT_EQ(content[i]["top_logprobs"].size(), 3u);
    for (size_t k = 0; k < 3; ++k) {
      EXPECT_EQ(content[i]["top_logprobs"][k]["token"], lm.token_text(s.top[k].id));
      EXPECT_DOUBLE_EQ(content[i]["top_logprobs"][k]["logprob"].get<double>(), s.top[k].logprob);
    }
  }
  auto streamed = srv.post("/v1/chat/completions", with_fields(chat_request, {{"stream", true}}));
  ASSERT_TRUE(streamed);
  ASSERT_EQ(streamed->status, 200) << streamed->body;
  json joined = json::array();
  for (const json& c : choice_chunks(streamed->body))
    if (!c["choices"][0]["logprobs"].is_null())
      for (const json& e : c["choices"][0]["logprobs"]["content"]) joined.push_back(e);
  EXPECT_EQ(joined, content);

  const std::string text_body = R"({"prompt":"The capital of France is","max_tokens":5,"temperature":0,"logprobs":2})";
  auto text = srv.post("/v1/completions", text_body);
  ASSERT_TRUE(text);
  ASSERT_EQ(text->status, 200) << text->body;
  const json lp = json::parse(text->body)["choices"][0]["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), 5u) << text->body;
  ASSERT_EQ(lp["token_logprobs"].size(), 5u);
  ASSERT_EQ(lp["top_logprobs"].size(), 5u);
  EXPECT_EQ(lp["text_offset"][0], 0);
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_GE(lp["top_logprobs"][i].size(), 1u);
    EXPECT_LE(lp["top_logprobs"][i].size(), 3u);  // the top 2 and the picked token
    EXPECT_DOUBLE_EQ(lp["top_logprobs"][i][lp["tokens"][i].get<std::string>()].get<double>(), lp["token_logprobs"][i].get<double>());
  }
  auto tstream = srv.post("/v1/completions", with_fields(text_body, {{"stream", true}}));
  ASSERT_TRUE(tstream);
  json tokens = json::array(), offsets = json::array();
  for (const json& c : choice_chunks(tstream->body)) {
    ASSERT_FALSE(c["choices"][0]["logprobs"].is_null()) << c;
    for (const json& t : c["choices"][0]["logprobs"]["tokens"]) tokens.push_back(t);
    for (const json& o : c["choices"][0]["logprobs"]["text_offset"]) offsets.push_back(o);
  }
  EXPECT_EQ(tokens, lp["tokens"]);
  EXPECT_EQ(offsets, lp["text_offset"]);
}

// The concatenated text of a stream's chunks (chat delta.content or completion text), failing
// the test if any chunk's text holds `never`.
std::string streamed_text(const std::string& body, const std::string& never = "") {
  std::string text;
  for (const json& c : choice_chunks(body)) {
    const json& ch = c["choices"][0];
    const std::string piece = ch.contains("delta") ? ch["delta"].value("content", "") : ch["text"].get<std::string>();
    if (!never.empty()) {
      EXPECT_EQ(piece.find(never), std::string::npos) << "a chunk holds the stop string: " << piece;
    }
    text += piece;
  }
  return text;
}

// seed: the same sampled text twice (and LanguageModel's for that seed); a stop string ends the
// reply before it, whole and streamed, with no chunk holding any of it; max_completion_tokens
// bounds the tokens (usage) with finish_reason "length".
TEST(ServeOpenAiHttp, SeedStopAndMaxCompletionTokens) {
  STAVE_REQUIRE_FIXTURE("public/model-bf16/config.json");
  LiveServer srv;
  const auto& lm = *fixture_models().lm;
  const std::string sampled =
      R"({"prompt":"The sea is","max_tokens":8,"temperature":1.3,"top_p":0.95,"seed":11,"ignore_eos":true})";
  auto a = srv.post("/v1/completions", sampled), b = srv.post("/v1/completions", sampled);
  ASSERT_TRUE(a && b);
  ASSERT_EQ(a->status, 200) << a->body;
  const std::string text_a = json::parse(a->body)["choices"][0]["text"];
  EXPECT_EQ(text_a, json::parse(b->body)["choices"][0]["text"].get<std::string>());
  EXPECT_EQ(text_a, lm.generate(lm.tokenize("The sea is"), generation_options_from_request(sampled)).text);

  // A stop string of two whole characters from the middle of the greedy text (where tokens are a
  // character or two long, so it most likely spans a token boundary).
  const std::string greedy = R"({"prompt":"The capital of France is","max_tokens":12,"temperature":0,"ignore_eos":true})";
  const Generation full = lm.generate(lm.tokenize("The capital of France is"), generation_options_from_request(greedy));
  ASSERT_EQ(full.completion_token_ids.size(), 12u);
  std::vector<size_t> starts;  // where each character of the text starts
  for (size_t i = 0; i < full.text.size(); ++i)
    if ((static_cast<unsigned char>(full.text[i]) & 0xC0) != 0x80) starts.push_back(i);
  starts.push_back(full.text.size());
  ASSERT_GE(starts.size(), 6u) << full.text;
  const size_t k = starts.size() / 2;
  const std::string stop = full.text.substr(starts[k], starts[k + 2] - starts[k]);
  const std::string want = full.text.substr(0, full.text.find(stop));
  json body = json::parse(greedy);
  body["stop"] = {stop};
  auto whole = srv.post("/v1/completions", body.dump());
  ASSERT_TRUE(whole);
  ASSERT_EQ(whole->status, 200) << whole->body;
  const json w = json::parse(whole->body);
  EXPECT_EQ(w["choices"][0]["text"], want);
  EXPECT_EQ(w["choices"][0]["finish_reason"], "stop");
  EXPECT_LT(w["usage"]["completion_tokens"].get<int>(), 12);
  body["stream"] = true;
  auto streamed = srv.post("/v1/completions", body.dump());
  ASSERT_TRUE(streamed);
  EXPECT_EQ(streamed_text(streamed->body, stop), want);
  // The chat route shares the stop handling; here only: never past it.
  auto cs = srv.post("/v1/chat/completions", with_fields(kGreedyChat, {{"stream", true}, {"stop", stop}}));
  ASSERT_TRUE(cs);
  EXPECT_EQ(streamed_text(cs->body, stop).find(stop), std::string::npos);

  auto bounded = srv.post("/v1/chat/completions",
                          R"({"messages":[{"role":"user","content":"Count."}],"max_completion_tokens":3,"max_tokens":50,
                              "ignore_eos":true,"temperature":0})");
  ASSERT_TRUE(bounded);
  ASSERT_EQ(bounded->status, 200) << bounded->body;
  EXPECT_EQ(json::parse(bounded->body)["usage"]["completion_tokens"], 3);
  EXPECT_EQ(json::parse(bounded->body)["choices"][0]["finish_reason"], "length");
}

// The server's context length (--max-length, shared with /v1/systemone and reported as
// context_length) bounds prompt + completion, as vLLM's --max-model-len does.
TEST(ServeOpenAiHttp, TheContextLengthBoundsPromptAndCompletion) {
  STAVE_REQUIRE_FIXTURE("public/model-bf16/config.json");
  ServeOptions o;
  o.decide.max_length = 24;
  LiveServer srv(o);
  EXPECT_EQ(json::parse(srv.get("/v1/models")->body)["data"][0]["context_length"], 24);
  const std::string chat = chat_body("hi", {{"temperature", 0}, {"ignore_eos", true}});
  auto asked = srv.post("/v1/chat/completions", with_fields(chat, {{"max_tokens", 100}}));
  ASSERT_TRUE(asked);
  EXPECT_EQ(asked->status, 400) << asked->body;
  EXPECT_NE(asked->body.find("context length is 24 tokens"), std::string::npos) << asked->body;
  auto defaulted = srv.post("/v1/chat/completions", chat);  // the default budget shrinks to fit
  ASSERT_TRUE(defaulted);
  ASSERT_EQ(defaulted->status, 200) << defaulted->body;
  const json d = json::parse(defaulted->body);
  EXPECT_EQ(d["usage"]["total_tokens"], 24);
  EXPECT_EQ(d["choices"][0]["finish_reason"], "length");
  json ids = json::array();
  for (int i = 0; i < 24; ++i) ids.push_back(1000 + i);
  auto too_long = srv.post("/v1/completions", completion_body(ids));
  ASSERT_TRUE(too_long);
  EXPECT_EQ(too_long->status, 400) << too_long->body;
  EXPECT_NE(too_long->body.find("the prompt has 24 tokens"), std::string::npos) << too_long->body;
  // Refused before the stream starts: a plain 400.
  auto s = srv.post("/v1/chat/completions", with_fields(chat, {{"max_tokens", 100}, {"stream", true}}));
  ASSERT_TRUE(s);
  EXPECT_EQ(s->status, 400) << s->body;
}

// The generation routes sit behind the same API key as /v1/systemone.
TEST(ServeOpenAiHttp, TheApiKeyGuardsTheGenerationRoutes) {
  STAVE_REQUIRE_FIXTURE("public/model-bf16/config.json");
  ServeOptions o;
  o.api_key = "k-9";
  LiveServer srv(o);
  const std::string chat = R"({"messages":[{"role":"user","content":"hi"}],"max_tokens":2})";
  for (const char* path : {"/v1/chat/completions", "/v1/completions"}) {
    auto none = srv.post(path, chat);
    ASSERT_TRUE(none);
    EXPECT_EQ(none->status, 401) << path;
    auto wrong = srv.post(path, chat, {{"Authorization", "Bearer k-8"}});
    ASSERT_TRUE(wrong);
    EXPECT_EQ(wrong->status, 401) << path;
  }
  auto ok = srv.post("/v1/chat/completions", chat, {{"Authorization", "Bearer k-9"}});
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
}

// Generation has its own admission: --max-decode-batch slots and --max-queue waiting, then 503 +
// Retry-After; the decisions' workers (--max-running) are neither needed nor taken.
TEST(ServeOpenAiHttp, AFullQueueAnswers503) {
  STAVE_REQUIRE_FIXTURE("public/model-bf16/config.json");
  ServeOptions o;
  o.max_decode_batch = 1;
  o.max_queue = 0;
  LiveServer srv(o);
  std::mutex m;
  std::condition_variable cv;
  bool open = false;
  auto occupy = [&](AdmissionQueue& q) {
    auto job = q.try_submit([&] {
      std::unique_lock<std::mutex> l(m);
      cv.wait(l, [&] { return open; });
    });
    while (job && q.running() == 0) std::this_thread::sleep_for(1ms);
    return job;
  };
  auto release = [&] {
    {
      std::lock_guard<std::mutex> l(m);
      open = true;
    }
    cv.notify_all();
  };
  const OnExit released{release};  // before the server stops, whatever fails
  // The one decision worker busy: generation still answers.
  ASSERT_TRUE(occupy(srv.server().admission()));
  auto ok = srv.post("/v1/chat/completions", kGreedyChat);
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
  // The one generation slot busy, no queue: 503. The reply above can reach the client a moment
  // before its request leaves the slot, so wait for the slot to be free before taking it.
  for (int i = 0; i < 5000 && srv.server().generation_admission().running() != 0; ++i)
    std::this_thread::sleep_for(1ms);
  ASSERT_TRUE(occupy(srv.server().generation_admission()));
  auto r = srv.post("/v1/chat/completions", kGreedyChat);
  auto c = srv.post("/v1/completions", R"({"prompt":"hi","max_tokens":2})");
  const std::string metrics = srv.get("/metrics")->body;
  release();
  for (const char* line : {"\nstave_generation_slots 1\n", "\nstave_generation_queue_capacity 0\n",
                           "\nstave_generation_requests_running 1\n", "\nstave_generation_queue_depth 0\n"})
    EXPECT_NE(metrics.find(line), std::string::npos) << line << metrics;
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503) << r->body;
  EXPECT_FALSE(r->get_header_value("Retry-After").empty());
  ASSERT_TRUE(c);
  EXPECT_EQ(c->status, 503) << c->body;
  EXPECT_FALSE(c->get_header_value("Retry-After").empty());
}

// stave_generated_tokens_total now (counted as tokens are picked).
int64_t generated_tokens(const LiveServer& srv) {
  const std::string metrics = srv.get("/metrics")->body;
  const std::string name = "\nstave_generated_tokens_total ";
  const size_t at = metrics.find(name);
  if (at == std::string::npos) {
    ADD_FAILURE() << "no " << name << " in " << metrics;
    return -1;
  }
  return std::stoll(metrics.substr(at + name.size()));
}

// A client that reads one event of a long stream and hangs up: its generation stops early.
TEST(ServeOpenAiHttp, StreamStopsWhenTheClientLeaves) {
  STAVE_REQUIRE_FIXTURE("public/model-bf16/config.json");
  LiveServer srv;
  const std::string body =
      R"({"messages":[{"role":"user","content":"Count."}],"stream":true,"max_tokens":16000,"ignore_eos":true})";
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
        srv.server().generation_admission().running() == 0)
      break;
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_NE(metrics.find("stave_decisions_cancelled_total{reason=\"client_gone\"} 1"), std::string::npos) << metrics;
  EXPECT_EQ(srv.server().generation_admission().running(), 0u);
  // The live token counter stopped: the same a while later, far below the request's budget.
  const int64_t stopped_at = generated_tokens(srv);
  EXPECT_GT(stopped_at, 0);
  EXPECT_LT(stopped_at, 16000);
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(generated_tokens(srv), stopped_at) << "tokens were generated after the client left";
}

// A client waiting for a whole (non-streamed) reply that hangs up: the transport sees the socket
// close and the generation stops between decode steps — the worker is free long before the
// reply's 16000 tokens.
TEST(ServeOpenAiHttp, AWholeReplyStopsWhenTheClientLeaves) {
  STAVE_REQUIRE_FIXTURE("public/model-bf16/config.json");
  LiveServer srv;
  const std::string body = R"({"prompt":"Count.","max_tokens":16000,"ignore_eos":true})";
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(srv.port()));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  const std::string req = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                          "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  ASSERT_EQ(::send(fd, req.data(), req.size(), 0), static_cast<ssize_t>(req.size()));
  const auto until = std::chrono::steady_clock::now() + 30s;
  while (srv.server().generation_admission().running() == 0 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(5ms);
  ASSERT_EQ(srv.server().generation_admission().running(), 1u);
  // The token counter grows while the generation runs …
  const int64_t before = generated_tokens(srv);
  while (generated_tokens(srv) < before + 3 && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(10ms);
  EXPECT_GE(generated_tokens(srv), before + 3);
  ::close(fd);
  // The count of cancelled generations and running() are two updates: wait for both.
  std::string metrics;
  while (std::chrono::steady_clock::now() < until + 30s) {
    const bool stopped = srv.server().generation_admission().running() == 0;
    metrics = srv.get("/metrics")->body;
    if (stopped && metrics.find("stave_decisions_cancelled_total{reason=\"client_gone\"} 1") != std::string::npos) break;
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_EQ(srv.server().generation_admission().running(), 0u) << "the generation ran on after its client left";
  EXPECT_NE(metrics.find("stave_decisions_cancelled_total{reason=\"client_gone\"} 1"), std::string::npos) << metrics;
  // … and stops when its client has left.
  const int64_t stopped_at = generated_tokens(srv);
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(generated_tokens(srv), stopped_at);
  EXPECT_LT(stopped_at, 16000);
}

// Continuous batching over HTTP with the default --max-running (1): streaming clients that
// arrive together (different prompts, budgets, one sampled with its own seed) get the same text
// as the same requests sent one after another, while the scheduler decodes several of them in
// one step (the batch-size histogram says a step advanced more than one) — even with the one
// decision worker held busy all along (generation does not use it).
TEST(ServeOpenAiHttp, ConcurrentStreamsGetTheSequentialText) {
  STAVE_REQUIRE_FIXTURE("public/model-bf16/config.json");
  ServeOptions o;
  ASSERT_EQ(o.max_running, 1);
  o.max_decode_batch = 4;  // 6 clients: 2 wait in the generation queue
  LiveServer srv(o);
  std::vector<json> bodies;
  const char* questions[] = {"What is the capital of France?", "Name a colour.", "Count to five.",
                             "Why is the sky blue?", "Say hello.", "What is 2 + 2?"};
  for (size_t i = 0; i < 6; ++i) {
    json b = {{"messages", json::array({{{"role", "user"}, {"content", questions[i]}}})},
              {"max_tokens", 10 + 3 * static_cast<int>(i)}, {"stream", true}, {"ignore_eos", true}};
    if (i == 4) {
      b["temperature"] = 0.9;
      b["seed"] = 11;
    } else {
      b["temperature"] = 0;
    }
    bodies.push_back(b);
  }
  std::vector<std::string> sequential;
  for (const json& b : bodies) {
    auto r = srv.post("/v1/chat/completions", b.dump());
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(sse_payloads(r->body).back(), "[DONE]");
    sequential.push_back(streamed_text(r->body));
  }
  std::mutex m;
  std::condition_variable cv;
  bool open = false;
  auto busy = srv.server().admission().try_submit([&] {
    std::unique_lock<std::mutex> l(m);
    cv.wait(l, [&] { return open; });
  });
  ASSERT_TRUE(busy);
  const OnExit released{[&] {
    {
      std::lock_guard<std::mutex> l(m);
      open = true;
    }
    cv.notify_all();
  }};
  while (srv.server().admission().running() == 0) std::this_thread::sleep_for(1ms);
  std::vector<std::string> concurrent(bodies.size());
  std::vector<int> status(bodies.size(), 0);
  std::vector<std::thread> clients;
  for (size_t i = 0; i < bodies.size(); ++i)
    clients.emplace_back([&, i] {
      auto r = srv.post("/v1/chat/completions", bodies[i].dump());
      if (!r) return;
      status[i] = r->status;
      concurrent[i] = streamed_text(r->body);
    });
  for (auto& t : clients) t.join();
  EXPECT_EQ(srv.server().admission().running(), 1u) << "the decision worker stayed busy";
  for (size_t i = 0; i < bodies.size(); ++i) {
    EXPECT_EQ(status[i], 200) << "client " << i;
    EXPECT_FALSE(sequential[i].empty()) << "client " << i;
    EXPECT_EQ(concurrent[i], sequential[i]) << "client " << i;
  }
  // stave_generation_decode_batch: more sequences advanced than steps taken, and none past 4.
  const std::string metrics = srv.get("/metrics")->body;
  auto value = [&](const std::string& name) {
    const size_t at = metrics.find("\n" + name + " ");
    if (at == std::string::npos) {
      ADD_FAILURE() << "no " << name << " in " << metrics;
      return -1.0;
    }
    return std::stod(metrics.substr(at + name.size() + 2));
  };
  const double steps = value("stave_generation_decode_batch_count");
  const double advanced = value("stave_generation_decode_batch_sum");
  EXPECT_GT(advanced, steps) << "no decode step batched two requests";
  EXPECT_LT(value("stave_generation_decode_batch_bucket{le=\"1\"}"), steps) << "no step had 2 or more sequences";
  EXPECT_EQ(value("stave_generation_decode_batch_bucket{le=\"4\"}"), steps) << "a step went past --max-decode-batch";
  // stave_generation_prefill_batch: every prompt (6 sequential, 6 concurrent) prefilled once,
  // in passes of at most 4 (those admitted in one iteration together).
  EXPECT_EQ(value("stave_generation_prefill_batch_sum"), 12.0);
  const double passes = value("stave_generation_prefill_batch_count");
  EXPECT_GE(passes, 7.0);
  EXPECT_LE(passes, 12.0);
  EXPECT_EQ(value("stave_generation_prefill_batch_bucket{le=\"4\"}"), passes);
}

}  // namespace
}  // namespace stave::server
