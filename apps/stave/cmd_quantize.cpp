// stave quantize --in BF16_DIR --out DIR: a Quark-compatible MXFP4 release (W4A4, "even"
// scales) from a BF16 one, optionally with AWQ smoothing computed on calibration text.
#include <iostream>

#include "command.h"
#include "quant/quantize_release.h"
#include "quant/quark_config.h"
#include "stave/errors.h"
#include "util/progress.h"

namespace stave::cli {
namespace {

struct QuantizeArgs {
  quant::QuantizeOptions options;
  std::string shard_size = "5GB";
  std::string scale_mode = "even";
  bool progress = false, no_progress = false;
};

Register reg{{"quantize", "Quantize a BF16 release to Quark MXFP4 (every language-model linear)", [](CLI::App& sub) {
                auto a = std::make_shared<QuantizeArgs>();
                sub.add_option("--in", a->options.in_dir, "BF16 release folder")->required();
                sub.add_option("--out", a->options.out_dir, "output folder (created; must be empty)")->required();
                sub.add_option("--exclude", a->options.exclude,
                               "keep a linear in BF16: a name (model.language_model.layers.0.mlp.down_proj), "
                               "re:REGEX or a glob; repeatable")
                    ->take_all();
                sub.add_option("--shard-size", a->shard_size, "maximum shard size (5GB, 500MB, 2GiB, bytes)")
                    ->capture_default_str();
                sub.add_option("--scale-mode", a->scale_mode, "MXFP4 scale rounding: even (Quark's default), floor, ceil")
                    ->capture_default_str();
                sub.add_flag("--progress", a->progress, "draw the progress bar even when stderr is not a terminal");
                sub.add_flag("--no-progress", a->no_progress, "never draw the progress bar");
                return std::function<int()>([a]() -> int {
                  auto& o = a->options;
                  o.shard_bytes = quant::parse_byte_size(a->shard_size);
                  auto mode = quant::parse_scale_mode(a->scale_mode);
                  if (!mode)
                    throw Error(ErrorKind::kInvalidRequest,
                                "--scale-mode must be even, floor or ceil, not \"" + a->scale_mode + "\"");
                  o.scale_mode = *mode;
                  o.progress = a->no_progress ? ProgressBar::Mode::kNever
                               : a->progress  ? ProgressBar::Mode::kAlways
                                              : ProgressBar::Mode::kAuto;
                  quant::QuantizeSummary s = quant::quantize_release(o);
                  std::cout << "quantized " << s.quantized.size() << " linears to MXFP4 (scale mode " << a->scale_mode
                            << "), kept " << s.excluded.size() << " in BF16\n"
                            << "wrote " << o.out_dir << ": " << s.shards << (s.shards == 1 ? " shard, " : " shards, ")
                            << ProgressBar::format_bytes(static_cast<double>(s.bytes_out)) << " of tensors (from "
                            << ProgressBar::format_bytes(static_cast<double>(s.bytes_in)) << "), " << s.files.size()
                            << " files" << std::endl;
                  return 0;
                });
              }, 60}};

}  // namespace
}  // namespace stave::cli
