// Options of stave's public API.
#pragma once
#include <atomic>
#include <cstdint>
#include <optional>
#include <string>

namespace stave {

// kExact: fp32 everywhere, the reference's numerics (matches the fixtures to 1e-4).
// kFast: bf16/MXFP4 weights on vectorized kernels; same top choice, |Δp| ≤ 0.005 vs exact.
enum class Precision { kExact, kFast };

// How `confidence` is computed (implementations disagree: Cloudflare's release code, Workers AI
// and the Jev SDKs each use their own formula).
enum class ConfidenceMode {
  kReference,  // max_k p_k (Cloudflare's release code)
  kWorkersAi,  // (n·Σp² − 1)/(n − 1)
  kJev,        // (n·p_max − 1)/(n − 1), clipped to [0, 1]
};

// What happens when the state does not fit max_length.
enum class TruncationPolicy {
  kTruncate,  // keep the head of the state, as the reference does (reported in usage)
  kRefuse,    // refuse the request (stave::Error kRequestTooLarge)
};

struct EngineOptions {
  std::string model;                 // release folder or Hugging Face repo id ("EliovpAI/clef-MXFP4")
  std::string revision;              // with a repo id: branch, tag or commit hash in the cache ("": main)
  Precision precision = Precision::kFast;
  int threads = 0;                   // 0: all cores
  bool verify_checksums = false;     // check SHA256SUMS before loading
  std::string device = "cpu";        // where the backbone runs: "cpu", or "cuda" (builds with STAVE_CUDA)
  // On a GPU device: decisions that arrive while a prefill runs are packed into the next one,
  // up to this many tokens (decide() from several threads, e.g. `stave serve --max-running N`).
  // 0: off, each decision prefills alone. Ignored on the CPU.
  int64_t batch_tokens = 0;
  // On a GPU device in fast precision: GiB of device memory for E4M3 copies of the MXFP4
  // weights, made once at load, so that each product reads its weight's copy instead of first
  // expanding the packed weight (N·K bytes written and read again per product). Weights are kept
  // in load order while the copies fit; the rest expand per product. The whole set is about 1
  // byte per weight: 23 GiB for Clef (27B) beside its 12.3 GiB of MXFP4, 7 GiB for Clef-flash.
  // 0 (the default): none, the weights stay at 4.25 bits. Must be finite and ≥ 0; > 0 needs
  // device "cuda" and fast precision.
  double fp8_cache_gib = 0;
};

struct DecideOptions {
  int64_t max_length = 16384;        // the reference's default
  std::optional<int64_t> max_state_tokens;
  // When set and it turns true, decide() stops at the next check (before the backbone, between
  // its layers, before the head) and throws stave::DecisionCancelled. The server sets it when the
  // client goes away or the request's deadline passes. Not owned; must outlive the call.
  const std::atomic<bool>* cancel = nullptr;
  ConfidenceMode confidence = ConfidenceMode::kReference;
  TruncationPolicy truncation = TruncationPolicy::kTruncate;
  bool include_logits = false;       // adds "logits": {id: [...]} to the JSON response
};

const char* to_string(Precision p);
const char* to_string(ConfidenceMode m);
std::optional<Precision> parse_precision(const std::string& s);
std::optional<ConfidenceMode> parse_confidence_mode(const std::string& s);

}  // namespace stave
