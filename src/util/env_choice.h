// Switches read from the environment (the CUDA backend's STAVE_CUDA_* kernel choices).
// env_choice: one of a few named values. Unset or empty gives the first choice's value; a name
// not among the choices is an Error (kUnsupported) naming the variable, the value and every
// choice: "VAR is 'x': expected 'a', 'b' or 'c'". Several names may give the same value (aliases).
#pragma once
#include <cerrno>
#include <cstdlib>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

#include "stave/errors.h"

namespace stave {

template <class T>
T env_choice(const char* var, std::initializer_list<std::pair<std::string_view, T>> choices) {
  const char* e = std::getenv(var);
  if (!e || !*e) return choices.begin()->second;
  for (const auto& [name, value] : choices)
    if (name == e) return value;
  std::string message = std::string(var) + " is '" + e + "': expected ";
  size_t i = 0;
  for (const auto& choice : choices) {
    if (i > 0) message.append(i + 1 == choices.size() ? " or " : ", ");
    message.append(1, '\'').append(choice.first).append(1, '\'');
    ++i;
  }
  throw Error(ErrorKind::kUnsupported, message);
}

// A whole number read from the environment: unset or empty gives `unset`; anything but a decimal
// integer in [lo, hi] is an Error (kUnsupported): "VAR is 'x': expected lo … hi".
inline int env_int(const char* var, int lo, int hi, int unset) {
  const char* e = std::getenv(var);
  if (!e || !*e) return unset;
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(e, &end, 10);
  if (*end != '\0' || errno == ERANGE || v < lo || v > hi || *e == ' ' || *e == '+')
    throw Error(ErrorKind::kUnsupported, std::string(var) + " is '" + e + "': expected " + std::to_string(lo) +
                                             " … " + std::to_string(hi));
  return static_cast<int>(v);
}

}  // namespace stave
