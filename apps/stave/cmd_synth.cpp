// stave synth: a release folder with random weights and the real shapes (for demos and benchmarks).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "command.h"
#include "synth/presets.h"
#include "synth/synth_release.h"

namespace stave::cli {
namespace {

std::string default_tokenizer() {
  if (const char* env = std::getenv("STAVE_TOKENIZER"); env && *env) return env;
  for (const char* p : {"models/qwen3-tokenizer", "../models/qwen3-tokenizer"})
    if (std::filesystem::exists(std::filesystem::path(p) / "tokenizer.json")) return p;
  return "";
}

Register reg{{"synth", "Write a release folder with random weights and real Clef shapes", [](CLI::App& sub) {
                auto o = std::make_shared<synth::SynthOptions>();
                auto layers = std::make_shared<int>(0);
                std::string names;
                for (const auto& n : synth::preset_names()) names += (names.empty() ? "" : ", ") + n;
                sub.add_option("--preset", o->preset, "model shape: " + names)->capture_default_str();
                sub.add_option("--format", o->format, "bf16 or mxfp4 (Quark layout)")->capture_default_str();
                sub.add_option("--out", o->out, "output folder")->required();
                sub.add_option("--seed", o->seed, "random seed")->capture_default_str()->check(in_range(0));
                sub.add_option("--layers", *layers, "override the number of layers (keeps the 3:1 pattern)")
                    ->check(in_range(1, 1024));
                sub.add_option("--tokenizer", o->tokenizer,
                               "tokenizer.json or its folder (default: $STAVE_TOKENIZER or models/qwen3-tokenizer)");
                sub.add_option("--shard-size", o->shard_bytes, "bytes per safetensors shard")
                    ->capture_default_str()
                    ->check(in_range(1));
                return std::function<int()>([o, layers]() -> int {
                  if (*layers > 0) o->layers = *layers;
                  if (o->tokenizer.empty()) o->tokenizer = default_tokenizer();
                  const bool tty = isatty(2);
                  auto start = std::chrono::steady_clock::now();
                  o->progress = [tty, start, last = -1.0, decile = -1](uint64_t done, uint64_t total) mutable {
                    double frac = total ? static_cast<double>(done) / static_cast<double>(total) : 1.0;
                    if (frac - last < 0.01 && done != total) return;
                    last = frac;
                    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
                    double mb = static_cast<double>(done) / 1e6;
                    if (tty)
                      std::fprintf(stderr, "\rsynth: %5.1f%%  %.0f / %.0f MB  %.0f MB/s ", frac * 100, mb,
                                   static_cast<double>(total) / 1e6, s > 0 ? mb / s : 0.0);
                    else if (int d = static_cast<int>(frac * 10); d != decile) {  // logs: a line per 10%
                      decile = d;
                      std::fprintf(stderr, "synth: %3.0f%%  %.0f / %.0f MB\n", frac * 100, mb,
                                   static_cast<double>(total) / 1e6);
                    }
                  };
                  synth::synth_release(*o);
                  if (tty) std::fprintf(stderr, "\n");
                  std::cout << "wrote " << o->out << ": preset " << o->preset << ", " << o->format
                            << " — RANDOM weights (real shapes, meaningless answers; for demos and benchmarks)"
                            << std::endl;
                  return 0;
                });
              }, 80}};

}  // namespace
}  // namespace stave::cli
