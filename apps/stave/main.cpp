// stave: the command line. Every subcommand lives in its own cmd_*.cpp file.
#include <algorithm>
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
    return app.exit(e);
  }
  try {
    return run ? run() : 0;
  } catch (const stave::Error& e) {
    return print_error_json(e.what());
  } catch (const std::exception& e) {
    return print_error_json(std::string("internal error: ") + e.what());
  }
}
