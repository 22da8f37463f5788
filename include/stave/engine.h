// stave's C++ API: load a Clef release once, then answer SystemOne decision requests.
//
//   auto engine = stave::Engine::load({.model = "EliovpAI/clef-MXFP4"});
//   stave::Decision d = engine->decide(R"({"model":"clef","state":"...","questions":{...}})");
//   std::cout << d.json << "\n";
//
//   std::vector<stave::Request> batch{stave::Request::parse(a), stave::Request::parse(b)};
//   std::vector<stave::Decision> ds = engine->decide_batch(batch);   // one packed prefill on cuda
//
// `decide` is thread-safe; a request error is a stave::Error (include/stave/errors.h).
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "stave/errors.h"
#include "stave/options.h"
#include "stave/request.h"

namespace stave {

struct Answer {
  std::string id;
  std::string type;                       // "noul", "choice", "score"
  std::vector<std::string> option_ids;    // in request order (noul: true, false)
  std::vector<double> probabilities;      // unrounded, same order as option_ids
  std::vector<float> logits;              // head logits in the reference's option order
  std::vector<std::string> logit_option_ids;  // that order (choice keys sorted by code point)
  std::string choice;                     // choice: the chosen option id
  double value = 0.0;                     // noul: P(true); score: Σ k·p_k; choice: p(choice)
  double confidence = 0.0;                // per DecideOptions::confidence (unrounded)
};

struct Usage {
  int64_t input_tokens = 0;               // tokens the model read (media included)
  int64_t truncated_state_tokens = 0;     // state tokens cut to fit max_length
  int64_t image_tokens = 0;              // vision tokens: image and video pads
};

struct Timings {
  double encode_ms = 0, vision_ms = 0, backbone_ms = 0, head_ms = 0, total_ms = 0;
};

struct Decision {
  std::string model;                      // echo of the request's model
  std::vector<Answer> answers;            // request order
  Usage usage;
  Timings timings;
  std::string json;                       // the SystemOne response body, as the reference spells it
};

struct ModelInfo {
  std::string path;
  std::string weight_format;              // "bf16", "mxfp4", ...
  int64_t hidden_size = 0, num_layers = 0, vocab_size = 0;
  bool vision = false;
  Precision precision = Precision::kFast;
  int64_t max_position_embeddings = 0;
  size_t weight_bytes = 0;                // mapped checkpoint bytes
  bool synthetic = false;                 // made by `stave synth`: random weights, meaningless answers
};

class Engine {
 public:
  static std::unique_ptr<Engine> load(const EngineOptions& options);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  Decision decide(std::string_view request_json, const DecideOptions& options = {}) const;
  // The same decision for a request parsed (and checked, possibly under RequestLimits) with
  // Request::parse: front ends that report field-level issues parse once and decide here.
  Decision decide(const Request& request, const DecideOptions& options = {}) const;
  // Several decisions with their backbone prefills packed into one forward on a GPU device
  // (throughput: the linear layers see all the rows at once); on the CPU, one after another.
  // Each answer is the one decide() gives, up to the accumulation order of the larger products
  // in fast precision; timings.backbone_ms is the whole batch's prefill. The first request that
  // fails to encode throws, and no decision is made.
  std::vector<Decision> decide_batch(std::span<const Request> requests, const DecideOptions& options = {}) const;
  // The reference's encode_record for a request, as JSON (what `stave encode` prints):
  // {"input_ids", "questions": [{id, type, question_span, option_spans, option_ids}], "media"?}.
  // Uses options.max_length and max_state_tokens.
  std::string encode(const Request& request, const DecideOptions& options = {}) const;
  const ModelInfo& info() const;

  struct Impl;

 private:
  explicit Engine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace stave
