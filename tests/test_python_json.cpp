// python_json_dumps / clef_render against CPython 3.11:
//   json.dumps(json.loads(text), ensure_ascii=False, separators=(",", ":"), sort_keys=True)
// The expected strings below were printed by CPython for the same input text.
#include <gtest/gtest.h>

#include "text/json_value.h"
#include "text/python_json.h"

namespace stave {
namespace {

std::string dumps(std::string_view text) { return python_json_dumps(parse_json(text)); }

TEST(PythonJsonDumps, SortsKeysRecursivelyByCodePoint) {
  EXPECT_EQ(dumps(R"({"b":1,"a":[1,2,{"d":null,"c":true}],"é":"x","Z":false})"),
            R"({"Z":false,"a":[1,2,{"c":true,"d":null}],"b":1,"é":"x"})");
  // U+FFFF sorts before U+1F600 by code point (UTF-16 order would differ).
  EXPECT_EQ(dumps(R"({"":{},"a":[],"b":{"z":{"y":[{}]}},"\u00e9":1,"\ud83d\ude00":2,"\uffff":3,"~":4})"),
            "{\"\":{},\"a\":[],\"b\":{\"z\":{\"y\":[{}]}},\"~\":4,\"\u00e9\":1,\"\uffff\":3,\"\U0001F600\":2}");
  EXPECT_EQ(dumps(R"({"k":1,"k":2,"j":3})"), R"({"j":3,"k":2})");
}

TEST(PythonJsonDumps, EscapesOnlyQuoteBackslashAndC0) {
  EXPECT_EQ(dumps(R"("a\"b\\c\/d\n\r\t\b\f\u0000\u0001\u001f\u007f\u2028\u2029 é 日本 😀")"),
            "\"a\\\"b\\\\c/d\\n\\r\\t\\b\\f\\u0000\\u0001\\u001f\x7f\u2028\u2029 \u00e9 \u65e5\u672c \U0001F600\"");
  EXPECT_EQ(dumps(R"(["\u000b\u001b\u000e"])"), R"(["\u000b\u001b\u000e"])");
}

TEST(PythonJsonDumps, NumbersAsPythonSpellsThem) {
  EXPECT_EQ(dumps("[123456789012345678901234567890,-0,-0.0,1e16,1E2,1e-05,0.1,1.5e-07,1e15,12345678901234567.0,"
                  "-123456789012345678901234567890,18446744073709551616,9223372036854775807,-9223372036854775808]"),
            "[123456789012345678901234567890,0,-0.0,1e+16,100.0,1e-05,0.1,1.5e-07,1000000000000000.0,"
            "1.2345678901234568e+16,-123456789012345678901234567890,18446744073709551616,9223372036854775807,"
            "-9223372036854775808]");
  EXPECT_EQ(dumps("[1e-400,5e-324,2.5e-320,0.30000000000000004,1.7976931348623157e308]"),
            "[0.0,5e-324,2.5e-320,0.30000000000000004,1.7976931348623157e+308]");
}

TEST(PythonJsonDumps, ScalarsAndEmptyContainers) {
  EXPECT_EQ(dumps("true"), "true");
  EXPECT_EQ(dumps("false"), "false");
  EXPECT_EQ(dumps("null"), "null");
  EXPECT_EQ(dumps("[]"), "[]");
  EXPECT_EQ(dumps("{}"), "{}");
  EXPECT_EQ(dumps(R"([[],{},[{}],{"a":[]}])"), R"([[],{},[{}],{"a":[]}])");
  EXPECT_EQ(dumps(" \"x\" "), "\"x\"");
}

TEST(ClefRender, StringsRawEverythingElseDumped) {
  EXPECT_EQ(clef_render(parse_json(R"("line\nbreak \"q\"")")), "line\nbreak \"q\"");
  EXPECT_EQ(clef_render(parse_json(R"({"b":"\n","a":1.0})")), R"({"a":1.0,"b":"\n"})");
  EXPECT_EQ(clef_render(parse_json("null")), "null");
  EXPECT_EQ(clef_render(parse_json("3")), "3");
  EXPECT_EQ(clef_render(parse_json(R"("")")), "");
}

}  // namespace
}  // namespace stave
