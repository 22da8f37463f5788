// stave encode --model DIR [--max-length N] REQUEST.json: the reference's encode_record for a
// SystemOne request, as JSON (input ids, the spans the joint head reads, and for images the
// media fields). Loads config.json, tokenizer.json and the processor config, not the weights.
#include <filesystem>
#include <iostream>
#include <iterator>

#include <nlohmann/json.hpp>

#include "command.h"
#include "decide/encoder.h"
#include "decide/request.h"
#include "io/model_config.h"
#include "io/release.h"
#include "stave/errors.h"
#include "text/tokenizer.h"
#include "util/mapped_file.h"
#include "vision/media_tokens.h"

namespace stave::cli {
namespace {

nlohmann::ordered_json encoded_to_json(const EncodedRequest& e) {
  nlohmann::ordered_json out;
  out["input_ids"] = e.input_ids;
  auto questions = nlohmann::ordered_json::array();
  for (const auto& q : e.questions) {
    nlohmann::ordered_json j;
    j["id"] = q.id;
    j["type"] = static_cast<int>(q.type);
    j["question_span"] = {q.question_span.first, q.question_span.second};
    auto spans = nlohmann::ordered_json::array();
    for (const auto& s : q.option_spans) spans.push_back({s.first, s.second});
    j["option_spans"] = std::move(spans);
    j["option_ids"] = q.option_ids;
    questions.push_back(std::move(j));
  }
  out["questions"] = std::move(questions);
  if (e.media) {
    nlohmann::ordered_json m;
    auto grids = nlohmann::ordered_json::array();
    for (const auto& g : e.media->image_grid_thw) grids.push_back({g[0], g[1], g[2]});
    m["image_grid_thw"] = std::move(grids);
    m["mm_token_type_ids"] = e.media->mm_token_type_ids;
    m["token_offset"] = e.media->token_offset;
    out["media"] = std::move(m);
  }
  return out;
}

std::string read_request(const std::string& path) {
  if (path == "-") return std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  if (!std::filesystem::is_regular_file(path)) throw Error(ErrorKind::kIo, "request file " + path + " does not exist");
  return read_file(path);
}

struct Options {
  std::string model;
  int64_t max_length = kDefaultMaxLength;
  std::string request;
};

int run_encode(const Options& o) {
  std::string dir = resolve_model_path(o.model);
  std::filesystem::path d(dir);
  for (const char* name : {"config.json", "tokenizer.json"}) {
    if (!std::filesystem::exists(d / name))
      throw Error(ErrorKind::kInvalidModel, "model folder " + dir + " has no " + name);
  }
  const ModelConfig config = parse_model_config(read_file((d / "config.json").string()), (d / "config.json").string());
  auto tokenizer = Tokenizer::from_file((d / "tokenizer.json").string());
  std::string text = read_request(o.request);
  EncodeOptions options;
  options.max_length = o.max_length;
  EncodedRequest encoded;
  try {
    const DecisionRequest request = parse_decision_request(text);
    std::unique_ptr<PreparedMedia> media;
    if (!request.images.empty()) {
      // Images need the processor config (either published layout) to expand their tokens.
      ImageProcessorConfig processor;
      for (const char* name : {"preprocessor_config.json", "processor_config.json"})
        if (std::filesystem::exists(d / name)) {
          processor = parse_image_processor_config(read_file((d / name).string()), (d / name).string());
          break;
        }
      if (!config.vision.present || !processor.present)
        throw Error(ErrorKind::kUnsupported, "this model has no vision tower or processor config; images are not accepted");
      media = std::make_unique<PreparedMedia>(request.images, processor, media_token_ids(*tokenizer, config));
    }
    encoded = encode_request(request, *tokenizer, options, media.get());
  } catch (const Error& e) {
    // An invalid request: the reference's message, exit status 2.
    return print_error_json(e.what());
  }
  std::cout << encoded_to_json(encoded).dump(-1, ' ', false, nlohmann::json::error_handler_t::strict) << std::endl;
  return 0;
}

Register reg{{"encode", "Print the reference's input ids and spans for a SystemOne request (JSON)", [](CLI::App& sub) {
                auto o = std::make_shared<Options>();
                sub.add_option("--model", o->model, "release folder or Hugging Face repo id (tokenizer and config)")
                    ->required();
                sub.add_option("--max-length", o->max_length, "maximum sequence length (the reference's max_length)")
                    ->capture_default_str();
                sub.add_option("REQUEST", o->request, "request JSON file, or - for stdin")->required();
                return std::function<int()>([o]() -> int { return run_encode(*o); });
              }, 60}};

}  // namespace
}  // namespace stave::cli
