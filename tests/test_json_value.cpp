// parse_json against Python's json.loads: key order, duplicates, numbers, and what it refuses.
// Expected values are what CPython 3.11 gives for the same text.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "stave/errors.h"
#include "text/json_value.h"
#include "text/python_json.h"

namespace stave {
namespace {

// The message of the stave::Error that parse_json throws, or "" when it parses.
std::string parse_error(std::string_view text, const JsonParseLimits& limits = {}) {
  try {
    parse_json(text, limits);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidRequest) << e.what();
    return e.what();
  }
  return "";
}

TEST(JsonParse, KeepsKeyOrderAndKinds) {
  JsonValue v = parse_json(R"({"b":1,"a":[true,null,"s",2.5],"c":{}})");
  ASSERT_TRUE(v.is_object());
  ASSERT_EQ(v.members().size(), 3u);
  EXPECT_EQ(v.members()[0].first, "b");
  EXPECT_EQ(v.members()[1].first, "a");
  EXPECT_EQ(v.members()[2].first, "c");
  const JsonValue& a = *v.find("a");
  ASSERT_EQ(a.items().size(), 4u);
  EXPECT_TRUE(a.items()[0].is_bool() && a.items()[0].as_bool());
  EXPECT_TRUE(a.items()[1].is_null());
  EXPECT_EQ(a.items()[2].as_string(), "s");
  EXPECT_EQ(a.items()[3].kind(), JsonValue::Kind::kFloat);
  EXPECT_EQ(a.items()[3].as_double(), 2.5);
  EXPECT_EQ(v.find("b")->kind(), JsonValue::Kind::kInteger);
  EXPECT_EQ(v.find("b")->as_string(), "1");
  EXPECT_EQ(v.find("missing"), nullptr);
}

TEST(JsonParse, DuplicateKeysKeepFirstPositionAndLastValue) {
  // Python: json.loads('{"k":1,"j":3,"k":2}') == {'k': 2, 'j': 3}, in that order.
  JsonValue v = parse_json(R"({"k":1,"j":3,"k":2})");
  ASSERT_EQ(v.members().size(), 2u);
  EXPECT_EQ(v.members()[0].first, "k");
  EXPECT_EQ(v.members()[0].second.as_string(), "2");
  EXPECT_EQ(v.members()[1].first, "j");
  // Past the size where the parser switches to a hash index.
  std::string big = "{";
  for (int i = 0; i < 40; ++i) big += "\"k" + std::to_string(i) + "\":" + std::to_string(i) + ",";
  big += "\"k3\":\"last\",\"k39\":null}";
  JsonValue w = parse_json(big);
  ASSERT_EQ(w.members().size(), 40u);
  EXPECT_EQ(w.members()[3].first, "k3");
  EXPECT_EQ(w.members()[3].second.as_string(), "last");
  EXPECT_TRUE(w.members()[39].second.is_null());
}

TEST(JsonParse, IntegersStayExact) {
  JsonValue v = parse_json("[-0,0,18446744073709551615,18446744073709551616,-9223372036854775809,"
                           "123456789012345678901234567890]");
  EXPECT_EQ(v.items()[0].as_string(), "0");  // Python: json.loads("-0") == 0
  EXPECT_EQ(v.items()[1].as_string(), "0");
  EXPECT_EQ(v.items()[2].as_string(), "18446744073709551615");
  EXPECT_EQ(v.items()[3].as_string(), "18446744073709551616");
  EXPECT_EQ(v.items()[4].as_string(), "-9223372036854775809");
  EXPECT_EQ(v.items()[5].as_string(), "123456789012345678901234567890");
  for (const auto& item : v.items()) EXPECT_EQ(item.kind(), JsonValue::Kind::kInteger);
  EXPECT_FALSE(v.items()[0].truthy());
}

TEST(JsonParse, IntegersPastDoubleRangeStayExact) {
  // 400 and 4300 digits parse in Python (4300 is sys.get_int_max_str_digits()); 4301 do not.
  std::string d400 = "9" + std::string(399, '1');
  std::string d4300 = "-" + std::string(4300, '7');
  std::string text = "[\"12 [3\", 1.5, " + d400 + ", {\"x\": " + d4300 + "}, 7, 1e5]";
  JsonValue v = parse_json(text);
  ASSERT_EQ(v.items().size(), 6u);
  EXPECT_EQ(v.items()[0].as_string(), "12 [3");
  EXPECT_EQ(v.items()[1].as_double(), 1.5);
  EXPECT_EQ(v.items()[2].kind(), JsonValue::Kind::kInteger);
  EXPECT_EQ(v.items()[2].as_string(), d400);
  EXPECT_EQ(v.items()[3].find("x")->as_string(), d4300);
  EXPECT_EQ(v.items()[4].as_string(), "7");
  EXPECT_EQ(v.items()[5].kind(), JsonValue::Kind::kFloat);
  EXPECT_EQ(v.items()[5].as_double(), 1e5);
  EXPECT_EQ(python_json_dumps(v), "[\"12 [3\",1.5," + d400 + ",{\"x\":" + d4300 + "},7,100000.0]");

  std::string err = parse_error("[1, " + std::string(4301, '3') + "]");
  EXPECT_NE(err.find("at byte 5"), std::string::npos) << err;
  EXPECT_NE(err.find("4301 digits"), std::string::npos) << err;
}

TEST(JsonParse, FloatsAreDoubles) {
  JsonValue v = parse_json("[-0.0,1e16,1E2,1e-05,0.1,1e-400,5e-324,1.7976931348623157e308]");
  EXPECT_TRUE(std::signbit(v.items()[0].as_double()));
  EXPECT_EQ(v.items()[0].kind(), JsonValue::Kind::kFloat);
  EXPECT_EQ(v.items()[1].as_double(), 1e16);
  EXPECT_EQ(v.items()[2].as_double(), 100.0);
  EXPECT_EQ(v.items()[3].as_double(), 1e-05);
  EXPECT_EQ(v.items()[4].as_double(), 0.1);
  EXPECT_EQ(v.items()[5].as_double(), 0.0);  // Python: underflow gives 0.0
  EXPECT_EQ(v.items()[6].as_double(), 5e-324);
  EXPECT_FALSE(v.items()[0].truthy());
  EXPECT_TRUE(v.items()[4].truthy());
}

TEST(JsonParse, StringsAndEscapes) {
  JsonValue v = parse_json(R"(["\u00e9\ud83d\ude00", "a\u0000b", "\/"])");
  EXPECT_EQ(v.items()[0].as_string(), "\xc3\xa9\xf0\x9f\x98\x80");
  EXPECT_EQ(v.items()[1].as_string(), std::string("a\0b", 3));
  EXPECT_EQ(v.items()[2].as_string(), "/");
}

TEST(JsonParse, Truthiness) {
  JsonValue v = parse_json(R"([null,false,true,0,1,0.0,"",[],{},"x",[0],{"a":null}])");
  std::vector<bool> expected{false, false, true, false, true, false, false, false, false, true, true, true};
  ASSERT_EQ(v.items().size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_EQ(v.items()[i].truthy(), expected[i]) << i;
}

TEST(JsonParse, RefusesWhatPythonCannotRepresentOrWeRefuse) {
  for (const char* text : {"NaN", "[Infinity]", "[-Infinity]", "[1e400]", "[-1e400]"}) {
    std::string err = parse_error(text);
    EXPECT_NE(err.find("invalid JSON at byte"), std::string::npos) << text << ": " << err;
  }
  EXPECT_NE(parse_error("[1e400]").find("overflow"), std::string::npos);
  // Invalid UTF-8 (raw and overlong), lone surrogates, raw control characters.
  for (std::string text : {std::string("[\"\xff\"]"), std::string("[\"\xc0\xaf\"]"), std::string("[\"\xed\xa0\x80\"]"),
                           std::string(R"(["\ud800"])"), std::string(R"(["\udc00x"])"), std::string(R"(["\ud800\u0041"])"),
                           std::string("[\"a\nb\"]"), std::string("[\"a\x01\"]")}) {
    std::string err = parse_error(text);
    EXPECT_NE(err.find("invalid JSON at byte"), std::string::npos) << text << ": " << err;
    // The message must itself be valid UTF-8 (the server puts it into JSON).
    EXPECT_EQ(err.find('\xff'), std::string::npos);
  }
  for (const char* text : {"", " ", "{} x", "[1,]", "{\"a\" 1}", "{'a':1}", "[01]", "[1.]", "[.5]", "[+1]",
                           "/*c*/1", "[1] // c", "tru", "{\"a\":1,}", "\"abc"}) {
    EXPECT_NE(parse_error(text), "") << text;
  }
}

TEST(JsonParse, ErrorGivesBytePosition) {
  std::string err = parse_error("{\"a\": [1, 2, x]}");
  EXPECT_NE(err.find("at byte 14"), std::string::npos) << err;
  EXPECT_NE(err.find("line 1, column 14"), std::string::npos) << err;
}

TEST(JsonParse, DepthLimit) {
  JsonParseLimits limits;
  limits.max_depth = 5;
  EXPECT_EQ(parse_error("[[[[{\"a\":1}]]]]", limits), "");
  std::string err = parse_error("[[[[{\"a\":[1]}]]]]", limits);
  EXPECT_NE(err.find("at byte 10"), std::string::npos) << err;
  EXPECT_NE(err.find("deeper than 5"), std::string::npos) << err;
  // The default limit (128) with a deep input: refused without exhausting the stack.
  std::string deep(100000, '[');
  EXPECT_NE(parse_error(deep).find("at byte 129"), std::string::npos);
  std::string ok = std::string(128, '[') + std::string(128, ']');
  EXPECT_EQ(parse_error(ok), "");
}

TEST(JsonParse, SizeLimitIsRequestTooLarge) {
  JsonParseLimits limits;
  limits.max_bytes = 10;
  EXPECT_NO_THROW(parse_json("[1,2,3,4]", limits));
  try {
    parse_json("[1,2,3,4,5]", limits);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kRequestTooLarge);
  }
}

TEST(JsonValue, DeepTreeDestroysWithoutRecursion) {
  // Built through the API (no parser limit): a chain a million levels deep.
  JsonValue v = JsonValue::array();
  for (int i = 0; i < 1000000; ++i) {
    std::vector<JsonValue> items;
    items.push_back(std::move(v));
    v = JsonValue::array(std::move(items));
  }
  JsonValue o = JsonValue::object();
  for (int i = 0; i < 1000000; ++i) {
    std::vector<JsonValue::Member> members;
    members.emplace_back("k", std::move(o));
    o = JsonValue::object(std::move(members));
  }
  SUCCEED();  // destruction at scope exit must not overflow the stack
}

TEST(JsonValue, IntegerFactoryCanonicalizes) {
  EXPECT_EQ(JsonValue::integer("-0").as_string(), "0");
  EXPECT_EQ(JsonValue::integer("007").as_string(), "7");
  EXPECT_EQ(JsonValue::integer("-007").as_string(), "-7");
  EXPECT_EQ(JsonValue::integer("42").as_double(), 42.0);
}

}  // namespace
}  // namespace stave
