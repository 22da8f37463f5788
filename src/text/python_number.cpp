// Python's float repr and round(), which the reference's outputs are spelled with.
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "text/python_json.h"

namespace stave {

std::string python_float_repr(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  // Shortest round-trip digits in scientific form: d[.ddd]e±XX.
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  std::string s(buf, res.ptr);
  bool negative = s[0] == '-';
  if (negative) s.erase(0, 1);
  size_t epos = s.find('e');
  std::string mantissa = s.substr(0, epos);
  int exp = std::atoi(s.c_str() + epos + 1);
  std::string digits;
  for (char c : mantissa)
    if (c != '.') digits.push_back(c);
  // repr uses scientific notation when the decimal exponent is < -4 or >= 16.
  std::string out;
  if (exp < -4 || exp >= 16) {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out.append(".").append(digits, 1);
    char e[16];  // a double's exponent has at most 3 digits; the room keeps -Wformat-truncation quiet
    std::snprintf(e, sizeof e, "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
    out += e;
  } else if (exp < 0) {
    out.append("0.").append(static_cast<size_t>(-exp - 1), '0').append(digits);
  } else {
    size_t int_len = static_cast<size_t>(exp) + 1;
    if (digits.size() <= int_len) {
      out = digits + std::string(int_len - digits.size(), '0') + ".0";
    } else {
      out.append(digits, 0, int_len).append(".").append(digits, int_len);
    }
  }
  if (negative) out.insert(out.begin(), '-');
  return out;
}

double python_round(double x, int ndigits) {
  if (!std::isfinite(x) || x == 0.0) return x;
  // glibc printf rounds the exact binary value correctly (half-to-even on exact ties), which is
  // what CPython's round() does through _Py_dg_dtoa; strtod returns the nearest double.
  char buf[512];
  std::snprintf(buf, sizeof buf, "%.*f", ndigits, x);
  double r = std::strtod(buf, nullptr);
  if (r == 0.0) return std::copysign(0.0, x);  // round(-0.00001, 4) == -0.0 in Python
  return r;
}

}  // namespace stave
