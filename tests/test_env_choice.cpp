// util/env_choice.h: the STAVE_CUDA_* switches' reader.
#include <gtest/gtest.h>

#include <string>

#include "stave/errors.h"
#include "test_env.h"
#include "util/env_choice.h"

namespace stave {
namespace {

enum class Pick { kA, kB, kC };

Pick pick() {
  return env_choice<Pick>("STAVE_TEST_PICK", {{"a", Pick::kA}, {"b", Pick::kB}, {"c", Pick::kC}, {"alias", Pick::kB}});
}

TEST(EnvChoice, UnsetOrEmptyIsTheFirstChoice) {
  {
    const test::ScopedEnv e("STAVE_TEST_PICK", nullptr);
    EXPECT_EQ(pick(), Pick::kA);
  }
  const test::ScopedEnv e("STAVE_TEST_PICK", "");
  EXPECT_EQ(pick(), Pick::kA);
}

TEST(EnvChoice, EveryNameAndAliasGivesItsValue) {
  const std::pair<const char*, Pick> cases[] = {{"a", Pick::kA}, {"b", Pick::kB}, {"c", Pick::kC}, {"alias", Pick::kB}};
  for (const auto& [name, want] : cases) {
    const test::ScopedEnv e("STAVE_TEST_PICK", name);
    EXPECT_EQ(pick(), want) << name;
  }
}

TEST(EnvChoice, AnotherNameIsAnErrorNamingEveryChoice) {
  const test::ScopedEnv e("STAVE_TEST_PICK", "B");
  try {
    pick();
    FAIL() << "no error for 'B'";
  } catch (const Error& err) {
    EXPECT_EQ(err.kind(), ErrorKind::kUnsupported);
    EXPECT_EQ(std::string(err.what()), "STAVE_TEST_PICK is 'B': expected 'a', 'b', 'c' or 'alias'");
  }
}

TEST(EnvInt, UnsetOrEmptyGivesTheUnsetValue) {
  {
    const test::ScopedEnv e("STAVE_TEST_INT", nullptr);
    EXPECT_EQ(env_int("STAVE_TEST_INT", 0, 31, 7), 7);
  }
  const test::ScopedEnv e("STAVE_TEST_INT", "");
  EXPECT_EQ(env_int("STAVE_TEST_INT", 0, 31, 7), 7);
}

TEST(EnvInt, NumbersInRangeAreRead) {
  for (const auto& [text, want] : {std::pair{"0", 0}, {"31", 31}, {"-3", -3}, {"012", 12}}) {
    const test::ScopedEnv e("STAVE_TEST_INT", text);
    EXPECT_EQ(env_int("STAVE_TEST_INT", -5, 31, 7), want) << text;
  }
}

TEST(EnvInt, AnythingElseIsAnErrorNamingTheRange) {
  for (const char* text : {"32", "-6", "1x", "x", " 1", "+1", "1.0", "99999999999999999999"}) {
    const test::ScopedEnv e("STAVE_TEST_INT", text);
    try {
      env_int("STAVE_TEST_INT", -5, 31, 7);
      ADD_FAILURE() << "no error for '" << text << "'";
    } catch (const Error& err) {
      EXPECT_EQ(err.kind(), ErrorKind::kUnsupported);
      EXPECT_EQ(std::string(err.what()), std::string("STAVE_TEST_INT is '") + text + "': expected -5 … 31");
    }
  }
}

}  // namespace
}  // namespace stave
