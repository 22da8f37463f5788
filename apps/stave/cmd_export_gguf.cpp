// stave export-gguf: a release's backbone as a llama.cpp `qwen35` GGUF (src/export), for
// running llama.cpp on the same shapes and weights as stave.
#include <unistd.h>

#include <cstdio>
#include <iostream>

#include "command.h"
#include "export/qwen35_gguf.h"

namespace stave::cli {
namespace {

Register reg{{"export-gguf", "Write the backbone as a llama.cpp qwen35 GGUF (BF16 stays BF16, MXFP4 maps losslessly)",
              [](CLI::App& sub) {
                auto o = std::make_shared<gguf::ExportOptions>();
                sub.add_option("--model", o->model, "release folder or Hugging Face repo id")->required();
                sub.add_option("--out", o->out, "output .gguf file")->required();
                return std::function<int()>([o]() -> int {
                  const bool tty = isatty(2);
                  o->progress = [tty, last = -1](uint64_t done, uint64_t total) mutable {
                    const int pct = total ? static_cast<int>(100 * done / total) : 100;
                    if (pct == last) return;
                    last = pct;
                    if (tty) std::fprintf(stderr, "\rexport-gguf: %3d%%  %.0f / %.0f MB ", pct, done / 1e6, total / 1e6);
                    else if (pct % 10 == 0) std::fprintf(stderr, "export-gguf: %d%%\n", pct);
                  };
                  auto s = gguf::export_qwen35_gguf(*o);
                  if (tty) std::fprintf(stderr, "\n");
                  std::cout << "wrote " << o->out << ": qwen35, " << s.tensors << " tensors, " << s.bytes << " bytes of "
                            << s.weight_format << " weights (backbone only; joint head and vision are not exported)"
                            << std::endl;
                  return 0;
                });
              }, 86}};

}  // namespace
}  // namespace stave::cli
