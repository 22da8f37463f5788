// Subcommands register themselves here (one file per subcommand), so the CLI stays a thin
// layer: each command parses its flags and calls the library.
#pragma once
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace stave::cli {

struct Command {
  std::string name;
  std::string description;
  // Adds options to `sub` and returns the function to run; it returns the exit status.
  std::function<std::function<int()>(CLI::App& sub)> setup;
  int order = 100;  // position in --help
};

std::vector<Command>& registry();

struct Register {
  explicit Register(Command c) { registry().push_back(std::move(c)); }
};

// Prints {"error": {"message": ...}} on stdout (the machine-readable contract) and the
// message on stderr; returns the exit status 2.
int print_error_json(const std::string& message);

// Every numeric option states its range: a value outside it (a negative thread count, a port
// past 65535) is a usage error that names the option, exit status 2 — never a silent wrap.
CLI::Validator in_range(int64_t lo, int64_t hi = std::numeric_limits<int64_t>::max());

}  // namespace stave::cli
