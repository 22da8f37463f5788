// The message of the stave::Error a call throws, for tests that check what an error names.
#pragma once
#include <functional>
#include <string>

#include "stave/errors.h"

namespace stave::test {

// f()'s Error message, or "(no error)" when it throws none (other exceptions pass through).
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace stave::test
