// Replays inputs through the fuzz targets' entry points in an ordinary build (no libFuzzer, no
// sanitizers): `stave_fuzz_replay TARGET PATH...` runs TARGET's LLVMFuzzerTestOneInput on every
// file under each PATH (missing paths are skipped), after its LLVMFuzzerInitialize if it has
// one. A target signals a broken invariant with abort(), so a bad input fails the process.
// fuzz/replay.cmake compiles every fuzz/fuzz_*.cpp into this one program, renaming each
// target's entry points (see replay_targets.h, generated there); CTest runs it on
// fuzz/regressions/<target>/ and fuzz/corpus/<target>/.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "replay_targets.h"

namespace fs = std::filesystem;

namespace {

std::vector<fs::path> inputs(const std::vector<std::string>& paths) {
  std::vector<fs::path> out;
  for (const auto& p : paths) {
    if (fs::is_regular_file(p)) out.emplace_back(p);
    if (!fs::is_directory(p)) continue;
    for (const auto& e : fs::recursive_directory_iterator(p))
      if (e.is_regular_file() && e.path().filename().string()[0] != '.') out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s TARGET PATH...\ntargets:", argv[0]);
    for (const auto& t : kReplayTargets) std::fprintf(stderr, " %s", t.name);
    std::fprintf(stderr, "\n");
    return 2;
  }
  const ReplayTarget* target = nullptr;
  for (const auto& t : kReplayTargets)
    if (std::strcmp(t.name, argv[1]) == 0) target = &t;
  if (!target) {
    std::fprintf(stderr, "unknown fuzz target %s\n", argv[1]);
    return 2;
  }
  if (target->init) target->init(&argc, &argv);
  const auto files = inputs(std::vector<std::string>(argv + 2, argv + argc));
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::fprintf(stderr, "%s: %s (%zu bytes)\n", target->name, f.c_str(), bytes.size());
    target->one(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  }
  std::printf("%s: %zu inputs replayed, none failed\n", target->name, files.size());
  return 0;
}
