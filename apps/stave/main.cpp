// stave: the command line. Every subcommand lives in its own cmd_*.cpp file.
#include <algorithm>
#include <charconv>
#include <iostream>

#include <nlohmann/json.hpp>

#include "command.h"
#include "stave/errors.h"

namespace stave::cli {

std::vector<Command>& registry() {
  static std::vector<Command> commands;
  return commands;
}

int print_error_json(const std::string& message) {
  nlohmann::json j = {{"error", {{"message", message}}}};
  std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
  std::cerr << "stave: " << message << std::endl;
  return 2;
}

CLI::Validator in_range(int64_t lo, int64_t hi) {
  const std::string range = hi == std::numeric_limits<int64_t>::max()
                                ? "at least " + std::to_string(lo)
                                : "between " + std::to_string(lo) + " and " + std::to_string(hi);
  return CLI::Validator(
      [lo, hi, range](std::string& value) -> std::string {
        int64_t v = 0;
        const char* end = value.data() + value.size();
        auto [ptr, ec] = std::from_chars(value.data(), end, v);
        if (ec != std::errc() || ptr != end || value.empty())
          return "must be an integer " + range + ", not '" + value + "'";
        if (v < lo || v > hi) return "must be " + range + ", not " + value;
        return std::string();
      },
      range.rfind("at least", 0) == 0 ? "INT>=" + std::to_string(lo)
                                      : "INT in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
}

}  // namespace stave::cli

int main(int argc, char** argv) {
  using namespace stave::cli;
  CLI::App app{"stave: Clef decisions, native and exact"};
  app.set_version_flag("--version", std::string("stave ") + STAVE_VERSION_STRING);
  app.require_subcommand(1);
  auto& cmds = registry();
  std::sort(cmds.begin(), cmds.end(), [](const Command& a, const Command& b) {
    return a.order != b.order ? a.order < b.order : a.name < b.name;
  });
  std::function<int()> run;
  for (auto& c : cmds) {
    CLI::App* sub = app.add_subcommand(c.name, c.description);
    auto fn = c.setup(*sub);
    sub->callback([&run, fn] { run = fn; });
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0 as CLI11 prints them; a usage error is an error like any
    // other: {"error": ...} on stdout, exit status 2.
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);
    return print_error_json(e.what());
  }
  try {
    return run ? run() : 0;
  } catch (const stave::Error& e) {
    return print_error_json(e.what());
  } catch (const std::exception& e) {
    return print_error_json(std::string("internal error: ") + e.what());
  }
}
