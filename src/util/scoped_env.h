// Sets (or, with nullptr, unsets) an environment variable for one scope and puts the old value
// back: for tests and benchmarks of switches the code reads from the environment on each call.
// Not thread-safe (setenv): use it where nothing else reads the environment concurrently.
#pragma once
#include <cstdlib>
#include <optional>
#include <string>

namespace stave {

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value)
      setenv(name, value, 1);
    else
      unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_)
      setenv(name_, old_->c_str(), 1);
    else
      unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

}  // namespace stave
