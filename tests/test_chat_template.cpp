// The chat-template interpreter (src/text/jinja) against Jinja2 itself and the fixtures:
//  - the release template rendered for the four fixture chats equals the reference's
//    prompt_text byte for byte, and tokenizes to prompt_ids;
//  - tests/data/chat_templates/cases.json: the Qwen3 template (the fixture's, which is Qwen3's)
//    and a Qwen3.5-family template (see tests/data/chat_templates/README.md) on tools, tool
//    calls, reasoning, content parts, images and the templates' own refusals, expected output
//    rendered by Jinja2 with Hugging Face's settings (tools/reference/render_chat_templates.py);
//  - constructs.json: one small template per construct, expected output from Jinja2 likewise;
//  - the error paths: unsupported constructs and bad input are Errors naming them.
#include <gtest/gtest.h>

#include "generate/chat_template.h"
#include "stave/errors.h"
#include "test_util.h"
#include "text/jinja/template.h"
#include "text/tokenizer.h"

namespace stave {
namespace {

using OJson = nlohmann::ordered_json;

OJson read_ordered(const std::string& path) { return OJson::parse(read_file(path)); }
std::string data_dir() { return std::string(STAVE_SOURCE_DIR) + "/tests/data/chat_templates"; }

void check_fixture_chats(const std::string& variant) {
  const auto lm = read_ordered(test::fixture("public/lm/lm-" + variant + ".json"));
  const ChatTemplate t = ChatTemplate::from_release(test::fixture("public/model-" + variant));
  const auto tok = Tokenizer::from_file(test::fixture("public/model-" + variant + "/tokenizer.json"));
  ASSERT_EQ(lm["chats"].size(), 4u);
  for (const auto& chat : lm["chats"]) {
    const OJson request = {{"messages", chat["messages"]}};
    const std::string prompt = t.render(request);
    EXPECT_EQ(prompt, chat["prompt_text"].get<std::string>());
    EXPECT_EQ(tok->encode(prompt), chat["prompt_ids"].get<std::vector<int32_t>>());
  }
}

TEST(ChatTemplate, FixtureChatsRenderTheReferencePromptBf16) {
  STAVE_REQUIRE_FIXTURE("public/lm/lm-bf16.json");
  check_fixture_chats("bf16");
}

TEST(ChatTemplate, FixtureChatsRenderTheReferencePromptMxfp4) {
  STAVE_REQUIRE_FIXTURE("public/lm/lm-mxfp4.json");
  check_fixture_chats("mxfp4");
}

// Context of a Jinja2-rendered case: HF passes tools and documents as None when absent.
OJson with_hf_defaults(OJson ctx) {
  if (!ctx.contains("tools")) ctx["tools"] = nullptr;
  if (!ctx.contains("documents")) ctx["documents"] = nullptr;
  return ctx;
}

TEST(ChatTemplate, Qwen3AndQwen35TemplatesMatchJinja2) {
  const auto cases = read_ordered(data_dir() + "/cases.json");
  ASSERT_GE(cases.size(), 10u);
  for (const auto& c : cases) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const jinja::Template t(read_file(data_dir() + "/" + c["template"].get<std::string>()));
    const OJson ctx = with_hf_defaults(c["context"]);
    if (c.contains("expected")) {
      EXPECT_EQ(t.render(ctx), c["expected"].get<std::string>());
    } else {
      try {
        t.render(ctx);
        ADD_FAILURE() << "expected the template to refuse: " << c["error"];
      } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kInvalidRequest);
        EXPECT_NE(std::string(e.what()).find(c["error"].get<std::string>()), std::string::npos) << e.what();
      }
    }
  }
}

TEST(ChatTemplate, EachConstructMatchesJinja2) {
  const auto cases = read_ordered(data_dir() + "/constructs.json");
  ASSERT_GE(cases.size(), 30u);
  for (const auto& c : cases) {
    SCOPED_TRACE(c["name"].get<std::string>() + ": " + c["template"].get<std::string>());
    try {
      EXPECT_EQ(jinja::Template(c["template"].get<std::string>()).render(c["context"]), c["expected"].get<std::string>());
    } catch (const Error& e) {
      ADD_FAILURE() << e.what();
    }
  }
}

TEST(ChatTemplate, GenerationBlockRendersItsBody) {  // HF's AssistantTracker extension
  EXPECT_EQ(jinja::Template("a{% generation %}b{{ 1 }}{% endgeneration %}c").render(OJson::object()), "ab1c");
}

void expect_error(const std::string& source, const OJson& ctx, ErrorKind kind, const std::string& needle) {
  SCOPED_TRACE(source);
  try {
    jinja::Template(source).render(ctx);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(ChatTemplate, UnsupportedConstructsAreNamed) {
  const OJson none = OJson::object();
  expect_error("{% include 'x.jinja' %}", none, ErrorKind::kUnsupported, "{% include %}");
  expect_error("{% extends 'base' %}", none, ErrorKind::kUnsupported, "{% extends %}");
  expect_error("{% call m() %}x{% endcall %}", none, ErrorKind::kUnsupported, "{% call %}");
  expect_error("{% filter upper %}x{% endfilter %}", none, ErrorKind::kUnsupported, "{% filter %}");
  expect_error("{% raw %}{{ x }}{% endraw %}", none, ErrorKind::kUnsupported, "{% raw %}");
  expect_error("{{ x|wordwrap(5) }}", OJson{{"x", "a"}}, ErrorKind::kUnsupported, "filter 'wordwrap'");
  expect_error("{{ x is sameas_not_a_test }}", OJson{{"x", 1}}, ErrorKind::kUnsupported, "is sameas_not_a_test");
  expect_error("{{ 'a'.zfill(3) }}", none, ErrorKind::kUnsupported, "str.zfill()");
  expect_error("{{ [1].index(1) }}", none, ErrorKind::kUnsupported, "list.index()");
  expect_error("{% for x in l recursive %}{% endfor %}", OJson{{"l", OJson::array()}}, ErrorKind::kUnsupported, "recursive");
  expect_error("{{ f(*args) }}", none, ErrorKind::kUnsupported, "*args");
  expect_error("{{ cycler(1, 2) }}", none, ErrorKind::kUnsupported, "cycler()");
  expect_error("{{ '%s!' % 'x' }}", none, ErrorKind::kUnsupported, "str % value");
  expect_error("{% for x in [1] %}{{ loop.cycle('a', 'b') }}{% endfor %}", none, ErrorKind::kUnsupported, "loop.cycle()");
}

TEST(ChatTemplate, BadTemplatesAndInputsAreErrors) {
  const OJson none = OJson::object();
  expect_error("{% if x %}a", none, ErrorKind::kInvalidModel, "ends inside a block");
  expect_error("{{ x ", none, ErrorKind::kInvalidModel, "unterminated tag");
  expect_error("{# x", none, ErrorKind::kInvalidModel, "unterminated comment");
  expect_error("{% endif %}", none, ErrorKind::kInvalidModel, "without its opening block");
  expect_error("{{ 'abc }}", none, ErrorKind::kInvalidModel, "");
  expect_error("{{ 1 + }}", none, ErrorKind::kInvalidModel, "unexpected");
  expect_error("{{ a.b }}", none, ErrorKind::kInvalidRequest, "'a' is undefined");
  expect_error("{{ m.content.startswith('x') }}", OJson{{"m", {{"content", OJson::array()}}}}, ErrorKind::kInvalidRequest,
               "list has no method 'startswith'");
  expect_error("{{ 1 + 'a' }}", none, ErrorKind::kInvalidRequest, "unsupported operand types for +: int and str");
  expect_error("{{ raise_exception('No messages provided.') }}", none, ErrorKind::kInvalidRequest, "No messages provided.");
  expect_error("{% set x.y = 1 %}", OJson{{"x", 1}}, ErrorKind::kInvalidRequest, "only namespace() objects");
  expect_error("{% for x in n %}{% endfor %}", OJson{{"n", nullptr}}, ErrorKind::kInvalidRequest, "not iterable");
  expect_error("{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}", none, ErrorKind::kInvalidRequest, "recursion");
  expect_error("{{ 1 // 0 }}", none, ErrorKind::kInvalidRequest, "by zero");
  expect_error("{{ " + std::string(1000, '(') + "1" + std::string(1000, ')') + " }}", none, ErrorKind::kInvalidModel,
               "nested deeper");
  expect_error("{{ " + std::string(1000, '-') + "1 }}", none, ErrorKind::kInvalidModel, "nested deeper");
  std::string chain = "{{ 1";
  for (int i = 0; i < 100000; ++i) chain += " + 1";
  expect_error(chain + " }}", none, ErrorKind::kInvalidModel, "tokens");
  std::string deep;
  for (int i = 0; i < 5000; ++i) deep += "{% if true %}";
  expect_error(deep, none, ErrorKind::kInvalidModel, "nested deeper");
}

TEST(ChatTemplate, RequestShapeIsChecked) {
  const ChatTemplate t("{% for m in messages %}{{ m.role }}:{{ m.content }};{% endfor %}{{ add_generation_prompt }}{{ x }}");
  EXPECT_EQ(t.render(OJson::parse(R"({"messages": [{"role": "user", "content": "hi"}]})")), "user:hi;True");
  EXPECT_EQ(t.render(OJson::parse(R"({"messages": [{"role": "user", "content": "hi"}], "add_generation_prompt": false,
                                      "chat_template_kwargs": {"x": 5}})")),
            "user:hi;False5");
  for (const char* bad : {R"({})", R"({"messages": []})", R"({"messages": [{"content": "x"}]})",
                          R"({"messages": [{"role": "user"}], "add_generation_prompt": 1})",
                          R"({"messages": [{"role": "user"}], "chat_template_kwargs": []})"}) {
    SCOPED_TRACE(bad);
    try {
      t.render(OJson::parse(bad));
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidRequest);
    }
  }
}

}  // namespace
}  // namespace stave
