// stave quantize --in BF16_DIR --out DIR: a Quark-compatible MXFP4 release (W4A4, "even"
// scales) from a BF16 one, optionally with AWQ smoothing computed on calibration text.
#include <iostream>

#include "command.h"
#include "quantize/awq.h"
#include "quantize/awq_release.h"
#include "quantize/calibration.h"
#include "quantize/quantize_release.h"
#include "formats/quark_config.h"
#include "stave/errors.h"
#include "util/progress.h"

namespace stave::cli {
namespace {

struct QuantizeArgs {
  quantize::QuantizeOptions options;
  std::string shard_size = "5GB";
  std::string scale_mode = "even";
  bool progress = false, no_progress = false;
  // AWQ (src/quantize/awq.h)
  bool awq = false;
  std::string calib;
  quantize::CalibrationOptions calib_options;
  std::string awq_search = "w4a4";
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
                sub.add_flag("--awq", a->awq, "smooth the MLPs with AWQ first (Quark's qwen3_5 recipe; needs --calib)");
                sub.add_option("--calib", a->calib,
                               "AWQ calibration text: FILE.txt (blank-line separated samples) or FILE.jsonl "
                               "({\"text\": ...} or {\"input_ids\": [...]} per line)");
                sub.add_option("--calib-samples", a->calib_options.samples, "AWQ calibration samples")
                    ->capture_default_str()
                    ->check(in_range(1));
                sub.add_option("--seq-len", a->calib_options.seq_len, "AWQ tokens per calibration sample")
                    ->capture_default_str()
                    ->check(in_range(1));
                sub.add_option("--awq-search", a->awq_search,
                               "AWQ error measure: w4a4 (activations quantized too, as the release runs) or w4a16 "
                               "(weights only, as Quark's search hooks do)")
                    ->capture_default_str();
                return std::function<int()>([a]() -> int {
                  auto& o = a->options;
                  try {
                    o.shard_bytes = quantize::parse_byte_size(a->shard_size);
                  } catch (const Error& e) {
                    throw Error(e.kind(), std::string("--shard-size: ") + e.what());
                  }
                  auto mode = quant::parse_scale_mode(a->scale_mode);
                  if (!mode)
                    throw Error(ErrorKind::kInvalidRequest,
                                "--scale-mode must be even, floor or ceil, not \"" + a->scale_mode + "\"");
                  o.scale_mode = *mode;
                  o.progress = a->no_progress ? ProgressBar::Mode::kNever
                               : a->progress  ? ProgressBar::Mode::kAlways
                                              : ProgressBar::Mode::kAuto;
                  if (!a->awq && (!a->calib.empty() || a->awq_search != "w4a4"))
                    throw Error(ErrorKind::kInvalidRequest, "--calib and --awq-search need --awq");
                  quantize::AwqReleaseResult awq;
                  if (a->awq) {
                    if (a->calib.empty()) throw Error(ErrorKind::kInvalidRequest, "--awq needs --calib FILE.txt|FILE.jsonl");
                    if (a->awq_search != "w4a4" && a->awq_search != "w4a16")
                      throw Error(ErrorKind::kInvalidRequest,
                                  "--awq-search must be w4a4 or w4a16, not \"" + a->awq_search + "\"");
                    quantize::AwqReleaseOptions ao;
                    ao.in_dir = o.in_dir;
                    ao.exclude = o.exclude;
                    ao.calib_path = a->calib;
                    ao.calibration = a->calib_options;
                    ao.awq.scale_mode = o.scale_mode;
                    ao.awq.quantize_inputs = a->awq_search == "w4a4";
                    std::cerr << "AWQ: calibrating on " << a->calib << " (up to " << a->calib_options.samples
                              << " samples of " << a->calib_options.seq_len << " tokens)" << std::endl;
                    awq = quantize::awq_release(ao);
                    std::cerr << "AWQ: " << awq.calibration_samples << " samples, " << awq.calibration_tokens
                              << " tokens\n  layer  ratio(gate,up)  mse plain -> best   ratio(down)  mse plain -> best\n";
                    for (const auto& l : awq.layers)
                      std::cerr << "  " << l.layer << "  " << l.ratio_gate_up << "  " << l.loss_gate_up_plain << " -> "
                                << l.loss_gate_up_best << "  " << l.ratio_down << "  " << l.loss_down_plain << " -> "
                                << l.loss_down_best << "\n";
                    o.edits = &awq.edits;
                  }
                  quantize::QuantizeSummary s = quantize::quantize_release(o);
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
