// Python's spelling of JSON and numbers, byte for byte, as the Clef reference produces it.
#pragma once
#include <string>
#include <string_view>

#include "text/json_value.h"

namespace stave {

// json.dumps(v, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
std::string python_json_dumps(const JsonValue& v);

// Appends `s` as json.dumps(s, ensure_ascii=False) spells it: quoted, with only '"', '\\' and
// the C0 controls escaped (everything else, DEL and U+2028 included, copied as is).
void append_python_json_string(std::string& out, std::string_view s);

// Clef's render(v): a string as is (no quotes), anything else through python_json_dumps.
std::string clef_render(const JsonValue& v);

// repr(float): shortest round-trip digits; scientific when exp < -4 or >= 16; "1.0", "1e-05",
// "-0.0", "inf"/"nan" (never produced for valid input).
std::string python_float_repr(double v);

// round(x, ndigits) with CPython semantics (exact binary value, half-to-even on exact ties).
double python_round(double x, int ndigits);

}  // namespace stave
