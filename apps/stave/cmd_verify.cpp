// stave verify DIR: every file matches SHA256SUMS and the folder is a loadable release.
#include <unistd.h>

#include <iostream>

#include "command.h"
#include "io/checksums.h"
#include "io/release.h"
#include "model/model_check.h"
#include "stave/errors.h"

namespace stave::cli {
namespace {

Register reg{{"verify", "Check a release folder: SHA256SUMS and that stave can load it", [](CLI::App& sub) {
                auto dir = std::make_shared<std::string>();
                sub.add_option("DIR", *dir, "release folder or Hugging Face repo id")->required();
                return std::function<int()>([dir]() -> int {
                  bool ok = true;
                  std::string path;
                  try {
                    path = resolve_model_path(*dir);
                    const bool tty = isatty(2);
                    auto results = verify_sha256sums(
                        path,
                        [](const std::string& f, void* is_tty) {
                          if (*static_cast<const bool*>(is_tty)) std::cerr << "\rchecking " << f << "\033[K" << std::flush;
                        },
                        const_cast<bool*>(&tty));
                    if (tty) std::cerr << "\r\033[K" << std::flush;
                    for (const auto& r : results) {
                      if (r.status == ChecksumResult::Status::kOk) {
                        std::cout << "ok        " << r.file << "\n";
                      } else {
                        ok = false;
                        std::cout << (r.status == ChecksumResult::Status::kMissing ? "MISSING   " : "MISMATCH  ") << r.file
                                  << "\n";
                      }
                    }
                  } catch (const Error& e) {
                    ok = false;
                    std::cout << "FAILED    SHA256SUMS: " << e.what() << "\n";
                  }
                  try {
                    auto release = open_release(path.empty() ? *dir : path);
                    check_release_loadable(*release);
                    std::cout << "ok        loadable release (" << release->config.text.num_hidden_layers << " layers, hidden "
                              << release->config.text.hidden_size << ")\n";
                  } catch (const Error& e) {
                    ok = false;
                    std::cout << "FAILED    load: " << e.what() << "\n";
                  }
                  std::cout << (ok ? "verified" : "verification FAILED") << std::endl;
                  return ok ? 0 : 1;
                });
              }, 50}};

}  // namespace
}  // namespace stave::cli
