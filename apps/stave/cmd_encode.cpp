// stave encode --model DIR [--max-length N] REQUEST.json: the reference's encode_record for a
// SystemOne request, as JSON (input ids, the spans the joint head reads, and for images the
// media fields). Loads config.json, tokenizer.json and the processor config, not the weights.
#include <filesystem>
#include <iostream>
#include <iterator>

#include "command.h"
#include "decide/request_handle.h"
#include "engine/release_encoder.h"
#include "io/release.h"
#include "request_files.h"
#include "stave/errors.h"
#include "util/mapped_file.h"

namespace stave::cli {
namespace {

std::string read_request(const std::string& path) {
  if (path == "-") return std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  if (!std::filesystem::is_regular_file(path)) throw Error(ErrorKind::kIo, "request file " + path + " does not exist");
  return read_file(path);
}

struct Options {
  std::string model;
  int64_t max_length = kDefaultMaxLength;
  std::string revision;
  std::string request;
};

int run_encode(const Options& o) {
  const ReleaseEncoder encoder(resolve_model_path(o.model, o.revision));
  std::string text = read_request(o.request);
  EncodeOptions options;
  options.max_length = o.max_length;
  EncodedRequest encoded;
  try {
    encoded = encoder.encode(decision_request(parse_cli_request(text, request_base_dir(o.request))), options);
  } catch (const Error& e) {
    // An invalid request: the reference's message, exit status 2.
    return print_error_json(e.what());
  }
  std::cout << encoded_request_json(encoded) << std::endl;
  return 0;
}

Register reg{{"encode", "Print the reference's input ids and spans for a SystemOne request (JSON)", [](CLI::App& sub) {
                auto o = std::make_shared<Options>();
                sub.add_option("--model", o->model, "release folder or Hugging Face repo id (tokenizer and config)")
                    ->required();
                sub.add_option("--revision", o->revision, "with a repo id: branch, tag or commit hash (default main)");
                sub.add_option("--max-length", o->max_length, "maximum sequence length (the reference's max_length)")
                    ->capture_default_str()
                    ->check(in_range(1));
                sub.add_option("REQUEST", o->request, "request JSON file, or - for stdin")->required();
                return std::function<int()>([o]() -> int { return run_encode(*o); });
              }, 60}};

}  // namespace
}  // namespace stave::cli
