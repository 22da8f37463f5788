// Expected strings are what CPython 3 prints (repr / round), not values from our own code.
#include <gtest/gtest.h>

#include "text/python_json.h"

namespace stave {
namespace {

TEST(PythonFloatRepr, MatchesCPython) {
  EXPECT_EQ(python_float_repr(1.0), "1.0");
  EXPECT_EQ(python_float_repr(100.0), "100.0");
  EXPECT_EQ(python_float_repr(0.1), "0.1");
  EXPECT_EQ(python_float_repr(0.30000000000000004), "0.30000000000000004");
  EXPECT_EQ(python_float_repr(1e-05), "1e-05");
  EXPECT_EQ(python_float_repr(0.0001), "0.0001");
  EXPECT_EQ(python_float_repr(1.5e-07), "1.5e-07");
  EXPECT_EQ(python_float_repr(1e16), "1e+16");
  EXPECT_EQ(python_float_repr(1e15), "1000000000000000.0");
  EXPECT_EQ(python_float_repr(12345678901234567.0), "1.2345678901234568e+16");
  EXPECT_EQ(python_float_repr(-0.0), "-0.0");
  EXPECT_EQ(python_float_repr(0.0), "0.0");
  EXPECT_EQ(python_float_repr(-2.5), "-2.5");
  EXPECT_EQ(python_float_repr(1e300), "1e+300");
  EXPECT_EQ(python_float_repr(5e-324), "5e-324");
  EXPECT_EQ(python_float_repr(123.456), "123.456");
  EXPECT_EQ(python_float_repr(1.7976931348623157e308), "1.7976931348623157e+308");
}

TEST(PythonRound, FourDigitsLikeCPython) {
  EXPECT_EQ(python_round(0.00015, 4), 0.0001);  // the double is just below the tie
  EXPECT_EQ(python_round(0.00025, 4), 0.0003);
  EXPECT_EQ(python_round(0.99995, 4), 1.0);
  EXPECT_EQ(python_round(0.12345, 4), 0.1235);  // 0.12345 is stored above the tie
  EXPECT_EQ(python_round(2.675, 2), 2.67);
  EXPECT_EQ(python_round(0.5, 0), 0.0);
  EXPECT_EQ(python_round(1.5, 0), 2.0);
  EXPECT_EQ(python_float_repr(python_round(0.97000001, 4)), "0.97");
  EXPECT_EQ(python_float_repr(python_round(-0.00001, 4)), "-0.0");
}

}  // namespace
}  // namespace stave
