// One decision, end to end: parse → encode (+ images) → vision tower → backbone → joint head →
// answers. Everything heavy is loaded once in Engine::load; decide() only reads shared state,
// so it is safe to call from many threads.
#include "backends/registry.h"
#include "stave/engine.h"

#include <omp.h>

#include <chrono>
#include <cstdlib>
#include <mutex>

#include "decide/answers.h"
#include "decide/encoder.h"
#include "decide/request.h"
#include "decide/request_handle.h"
#include "engine/device_backbone.h"
#include "engine/prefill_coalescer.h"
#include "engine/release_encoder.h"
#include "engine/release_from_options.h"
#include "io/release.h"
#include "io/synthetic_marker.h"
#include "model/backbone.h"
#include "model/joint_head.h"
#include "ops/backend.h"
#include "text/tokenizer.h"
#include "decide/media_tokens.h"
#include "vision/mrope_positions.h"
#include "vision/vision_tower.h"

namespace stave {
namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kMaxPackedSequences = 64;  // sequences per coalesced prefill
double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

// The encoder's questions as the joint head reads them (the head knows no protocol types).
std::vector<HeadQuestion> head_questions(const std::vector<EncodedQuestion>& encoded) {
  std::vector<HeadQuestion> out;
  out.reserve(encoded.size());
  for (const EncodedQuestion& q : encoded)
    out.push_back({q.id, static_cast<int>(q.type), q.question_span, q.option_spans, q.option_ids});
  return out;
}

void throw_if_cancelled(const DecideOptions& o) {
  if (o.cancel && o.cancel->load(std::memory_order_relaxed)) throw DecisionCancelled();
}

std::string weight_format_of(const Release& r) {
  if (!r.config.quantization_config_json.empty()) return "mxfp4";
  const TensorRef* t = r.weights.find("model.language_model.layers.0.mlp.down_proj.weight");
  if (t && t->dtype == DType::kF32) return "f32";
  if (t && t->dtype == DType::kF16) return "f16";
  return "bf16";
}

void check_decide_options(const ModelInfo& info, const DecideOptions& options) {
  if (options.max_length <= 0)
    throw Error(ErrorKind::kInvalidRequest, "max_length must be positive, got " + std::to_string(options.max_length));
  if (options.max_length > info.max_position_embeddings)
    throw Error(ErrorKind::kInvalidRequest, "max_length " + std::to_string(options.max_length) +
                                                " exceeds the model's max_position_embeddings " +
                                                std::to_string(info.max_position_embeddings));
}

}  // namespace

struct Engine::Impl {
  EngineOptions options;
  std::unique_ptr<Release> release;
  std::unique_ptr<Tokenizer> tokenizer;
  std::shared_ptr<const Backend> cpu;  // the CPU backend (wrapped by StagedBackend under STAVE_STAGES)
  const Backend* backend = nullptr;
  std::unique_ptr<Backbone> backbone;
  std::shared_ptr<DeviceBackbone> device_backbone;  // set when options.device is not "cpu"
  std::unique_ptr<PrefillCoalescer> coalescer;      // device backbone with batch_tokens > 0
  std::shared_ptr<const Backend> head_backend;      // the GPU's, for a fast decision on cuda
  std::unique_ptr<JointHead> head;
  std::unique_ptr<VisionTower> vision;
  MediaTokenIds media_ids;
  ModelInfo info;
};

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Engine::~Engine() = default;

std::unique_ptr<Engine> Engine::load(const EngineOptions& options) {
  if (options.batch_tokens < 0)
    throw Error(ErrorKind::kInvalidRequest,
                "batch_tokens must not be negative, got " + std::to_string(options.batch_tokens));
  const BackendOptions device_options = device_backend_options(options);  // checked before anything loads
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  if (options.threads > 0) omp_set_num_threads(options.threads);
  impl->release = open_release_for(options);
  const Release& rel = *impl->release;
  const std::string& dir = rel.dir;
  impl->tokenizer = Tokenizer::from_file(rel.tokenizer_path);
  impl->cpu = make_backend("cpu", options.precision);
  impl->backend = impl->cpu.get();
  impl->backbone = std::make_unique<Backbone>(rel, *impl->backend);
  impl->device_backbone = make_device_backbone(rel, options, device_options);
  if (impl->device_backbone && options.batch_tokens > 0)
    impl->coalescer = std::make_unique<PrefillCoalescer>(*impl->device_backbone, options.batch_tokens,
                                                         kMaxPackedSequences);
  impl->head_backend = make_device_head_backend(options);
  impl->head = std::make_unique<JointHead>(rel, impl->head_backend ? *impl->head_backend : *impl->backend);
  if (rel.config.vision.present) {
    impl->vision = std::make_unique<VisionTower>(rel.config, rel.weights, *impl->backend);
    impl->media_ids = media_token_ids(*impl->tokenizer, rel.config);
  }
  ModelInfo& info = impl->info;
  info.path = dir;
  info.weight_format = weight_format_of(rel);
  info.hidden_size = rel.config.text.hidden_size;
  info.num_layers = rel.config.text.num_hidden_layers;
  info.vocab_size = rel.config.text.vocab_size;
  info.vision = rel.config.vision.present && rel.image_processor.present;
  info.precision = options.precision;
  info.max_position_embeddings = rel.config.text.max_position_embeddings;
  info.weight_bytes = rel.weights.total_bytes() + rel.head.total_bytes();
  info.synthetic = is_synthetic_release(dir);
  return std::unique_ptr<Engine>(new Engine(std::move(impl)));
}

const ModelInfo& Engine::info() const { return impl_->info; }

// A request encoded and ready for the backbone: ids, image features as embedding overrides
// (pointing into `features`, so a Prepared is moved, never copied), M-RoPE positions, and the
// Decision with the timings and usage known so far.
namespace {

struct Prepared {
  Prepared() = default;
  Prepared(Prepared&&) = default;
  Prepared(const Prepared&) = delete;
  Clock::time_point t0;
  EncodedRequest enc;
  std::vector<float> features;
  std::vector<EmbeddingOverride> overrides;
  std::vector<int32_t> positions;
  Decision out;
};

Prepared prepare(const Engine::Impl& m, const DecisionRequest& request, const DecideOptions& options) {
  check_decide_options(m.info, options);  // callers that parsed the request themselves get the same checks
  // The OpenMP thread count is per calling thread: a server calls decide from its own workers,
  // not from the thread that ran load().
  if (m.options.threads > 0 && omp_get_max_threads() != m.options.threads) omp_set_num_threads(m.options.threads);
  Prepared p;
  p.t0 = Clock::now();
  Decision& out = p.out;
  check_decide_options(m.info, options);

  // 1. Encoding (images are decoded and preprocessed here).
  std::unique_ptr<PreparedMedia> media;
  if (!request.images.empty() || !request.videos.empty()) {
    if (!m.info.vision)
      throw Error(ErrorKind::kUnsupported,
                  std::string("this model has no vision tower or processor config; ") +
                      (request.images.empty() ? "videos" : "images") + " are not accepted");
    media = std::make_unique<PreparedMedia>(request.images, request.videos, m.release->image_processor,
                                            m.release->video_processor, m.media_ids);
  }
  EncodeOptions eo;
  eo.max_length = options.max_length;
  eo.max_state_tokens = options.max_state_tokens;
  p.enc = encode_request(request, *m.tokenizer, eo, media.get());
  const EncodedRequest& enc = p.enc;
  if (options.truncation == TruncationPolicy::kRefuse && enc.truncated_state_tokens > 0)
    throw Error(ErrorKind::kRequestTooLarge,
                "the state is " + std::to_string(enc.state_tokens + enc.truncated_state_tokens) + " tokens but only " +
                    std::to_string(enc.state_tokens) + " fit in max_length " + std::to_string(options.max_length) +
                    " (truncation policy: refuse)");
  out.timings.encode_ms = ms_since(p.t0);
  const int64_t L = static_cast<int64_t>(enc.input_ids.size());
  const int64_t H = m.info.hidden_size;

  // 2. Image features replace the <|image_pad|> embeddings, in order; M-RoPE positions.
  if (media) {
    const auto tv = Clock::now();
    // The reference runs the tower on all images, then on all videos (two calls), and
    // scatters each into its own pad tokens in order.
    std::vector<float> image_features, video_features;
    {
      std::vector<float> pixels;
      int64_t rows = 0;
      for (const auto& img : media->images()) {
        pixels.insert(pixels.end(), img.pixel_values.begin(), img.pixel_values.end());
        rows += img.rows;
      }
      if (rows > 0) image_features = m.vision->forward(pixels.data(), rows, media->grids()).merged;
    }
    {
      std::vector<float> pixels;
      int64_t rows = 0;
      for (const auto& v : media->videos()) {
        pixels.insert(pixels.end(), v.patches.pixel_values.begin(), v.patches.pixel_values.end());
        rows += v.patches.rows;
      }
      if (rows > 0) video_features = m.vision->forward(pixels.data(), rows, media->video_grids()).merged;
    }
    p.features = std::move(image_features);
    const size_t n_image_rows = p.features.size() / static_cast<size_t>(H);
    p.features.insert(p.features.end(), video_features.begin(), video_features.end());
    size_t next_image = 0, next_video = n_image_rows;
    const size_t total_rows = p.features.size() / static_cast<size_t>(H);
    for (int64_t q = 0; q < L; ++q) {
      const int32_t id = enc.input_ids[q];
      size_t row;
      if (id == m.media_ids.image_pad) {
        row = next_image++;
        if (row >= n_image_rows) throw Error(ErrorKind::kInternal, "more image tokens than image features");
      } else if (m.media_ids.video_pad >= 0 && id == m.media_ids.video_pad) {
        row = next_video++;
        if (row >= total_rows) throw Error(ErrorKind::kInternal, "more video tokens than video features");
      } else {
        continue;
      }
      p.overrides.push_back({q, p.features.data() + row * H});
    }
    if (next_image != n_image_rows || next_video != total_rows)
      throw Error(ErrorKind::kInternal, "image/video token counts do not match the vision features");
    p.positions =
        mrope_position_ids(L, enc.media ? &*enc.media : nullptr, m.release->config.vision.spatial_merge_size).ids;
    out.usage.image_tokens = static_cast<int64_t>(p.overrides.size());
    out.timings.vision_ms = ms_since(tv);
  }
  return p;
}

Decision finish(const Engine::Impl& m, const DecisionRequest& request, Prepared& p, HiddenRows hidden,
                const DecideOptions& options) {
  Decision& out = p.out;
  const EncodedRequest& enc = p.enc;
  const int64_t L = static_cast<int64_t>(enc.input_ids.size());
  const auto th = Clock::now();
  const auto logits = m.head->forward(hidden, L, enc.input_ids, head_questions(enc.questions));
  out.timings.head_ms = ms_since(th);

  // 4. Answers, spelled as the reference spells them.
  AnswerOptions ao;
  ao.confidence = options.confidence;
  ao.include_logits = options.include_logits;
  const SystemOneResponse resp = build_systemone_response(request, enc.questions, logits, L, ao);
  out.json = render_systemone_response(resp);
  out.model = resp.model;
  out.usage.input_tokens = L;
  out.usage.truncated_state_tokens = enc.truncated_state_tokens;
  for (const QuestionAnswer& q : resp.answers) {
    Answer a;
    a.id = q.id;
    a.type = question_type_name(q.type);
    a.option_ids = q.option_ids;
    a.probabilities = q.probabilities;
    a.logits = q.logits;
    a.logit_option_ids = q.scored_option_ids;
    a.choice = q.choice;
    a.value = q.value;
    a.confidence = q.confidence;
    out.answers.push_back(std::move(a));
  }
  out.timings.total_ms = ms_since(p.t0);
  return std::move(out);
}

Decision decide_one(const Engine::Impl& m, const DecisionRequest& request, const DecideOptions& options) {
  throw_if_cancelled(options);
  Prepared p = prepare(m, request, options);
  throw_if_cancelled(options);
  // 3. Backbone prefill, then the joint head.
  const auto tb = Clock::now();
  if (m.coalescer) {  // packed with the decisions that queued during the previous prefill
    const BackboneSequence one{p.enc.input_ids, p.positions, p.overrides};
    const PrefillCoalescer::Result r = m.coalescer->run(one);
    p.out.timings.backbone_ms = ms_since(tb);
    HiddenRows rows(r.hidden.data());
    rows.device = r.device;
    return finish(m, request, p, rows, options);
  }
  if (m.device_backbone) {
    const BackboneSequence one{p.enc.input_ids, p.positions, p.overrides};
    const LentHiddenStates lent = (*m.device_backbone)(std::span(&one, 1));
    p.out.timings.backbone_ms = ms_since(tb);
    return finish(m, request, p, lent.rows(0), options);
  }
  // Backbone::forward() step by step, so a cancelled decision stops between layers.
  Backbone::Sequence seq = m.backbone->start(p.enc.input_ids, p.positions, p.overrides);
  for (int64_t l = 0; l < m.backbone->num_layers(); ++l) {
    throw_if_cancelled(options);
    m.backbone->run_layer(l, seq);
  }
  const std::vector<float> hidden = m.backbone->finish(seq);
  p.out.timings.backbone_ms = ms_since(tb);
  throw_if_cancelled(options);
  return finish(m, request, p, hidden.data(), options);
}

}  // namespace

Decision Engine::decide(std::string_view request_json, const DecideOptions& options) const {
  const auto t0 = Clock::now();
  check_decide_options(impl_->info, options);  // option errors come before request errors
  const DecisionRequest request = parse_decision_request(request_json);
  const double parse_ms = ms_since(t0);
  Decision out = decide_one(*impl_, request, options);
  out.timings.encode_ms += parse_ms;
  out.timings.total_ms += parse_ms;
  return out;
}

Decision Engine::decide(const Request& request, const DecideOptions& options) const {
  return decide_one(*impl_, decision_request(request), options);
}

std::string Engine::encode(const Request& request, const DecideOptions& options) const {
  const Impl& m = *impl_;
  // As `stave encode` (the reference's encode_record): no check against the model's positions.
  if (options.max_length <= 0)
    throw Error(ErrorKind::kInvalidRequest, "max_length must be positive, got " + std::to_string(options.max_length));
  const DecisionRequest& r = decision_request(request);
  std::unique_ptr<PreparedMedia> media;
  if (!r.images.empty()) {
    if (!m.info.vision)
      throw Error(ErrorKind::kUnsupported, "this model has no vision tower or processor config; images are not accepted");
    media = std::make_unique<PreparedMedia>(r.images, m.release->image_processor, m.media_ids);
  }
  EncodeOptions eo;
  eo.max_length = options.max_length;
  eo.max_state_tokens = options.max_state_tokens;
  return encoded_request_json(encode_request(r, *m.tokenizer, eo, media.get()));
}

std::vector<Decision> Engine::decide_batch(std::span<const Request> requests, const DecideOptions& options) const {
  const Impl& m = *impl_;
  std::vector<Prepared> prepared;
  prepared.reserve(requests.size());
  for (const Request& r : requests) prepared.push_back(prepare(m, decision_request(r), options));
  std::vector<std::vector<float>> owned;  // CPU backbone
  LentHiddenStates lent;                  // device backbone
  std::vector<HiddenRows> hidden;
  const auto tb = Clock::now();
  if (m.device_backbone) {
    std::vector<BackboneSequence> seqs;
    for (const Prepared& p : prepared) seqs.push_back({p.enc.input_ids, p.positions, p.overrides});
    lent = (*m.device_backbone)(seqs);
    for (size_t b = 0; b < lent.sequences.size(); ++b) hidden.push_back(lent.rows(b));
  } else {
    // The CPU backbone already spreads one sequence over every core: one after another.
    for (const Prepared& p : prepared) {
      owned.push_back(m.backbone->forward(p.enc.input_ids, p.positions, p.overrides));
      hidden.push_back(owned.back().data());
    }
  }
  const double backbone_ms = ms_since(tb);
  std::vector<Decision> out;
  out.reserve(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    prepared[i].out.timings.backbone_ms = backbone_ms;  // the batch's shared prefill
    out.push_back(finish(m, decision_request(requests[i]), prepared[i], hidden[i], options));
  }
  return out;
}

}  // namespace stave
