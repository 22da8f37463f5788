// The options that stave bench and stave bench-decode share, and what their run functions share.
// Each command adds them in its own order (that is the order --help lists them in); the words
// that differ between the two (what is timed, what runs on the device) are arguments.
#pragma once
#include <functional>
#include <string>

#include <CLI/CLI.hpp>

#include "stave/options.h"

namespace stave::cli::bench_cli {

// The flags kept as text until the command runs (lists and names parsed then, with the
// messages below).
struct TextFlags {
  std::string prompt_tokens;
  std::string precision = "fast";
  std::string json_out;
};

void add_model(CLI::App& sub, std::string& model);
void add_prompt_tokens(CLI::App& sub, std::string& text, const std::string& help);
// --repeat and --warmup; `unit` is what one repetition is ("decisions", "runs").
void add_repeat_warmup(CLI::App& sub, int& repeat, int& warmup, const std::string& unit);
void add_threads(CLI::App& sub, int& threads);
// --precision and --device; `runs_there` is what the device runs ("backbone", "model").
void add_precision_device(CLI::App& sub, std::string& precision, std::string& device, const std::string& runs_there);
void add_json(CLI::App& sub, std::string& path);
// --fp8-cache-gib (EngineOptions::fp8_cache_gib).
void add_fp8_cache(CLI::App& sub, double& gib);

// The --precision value, or the usage error naming it.
Precision precision_flag(const std::string& text);
// Progress lines on stderr, prefixed with the command's name.
std::function<void(const std::string&)> stderr_log(const std::string& command);
// Writes the --json report (already rendered) to `path`; an Io error if it cannot.
void write_json_file(const std::string& path, const std::string& json_text);

}  // namespace stave::cli::bench_cli
