// Everything `stave serve` can be told: the model and its names, the protocol limits, the
// admission policy and the HTTP front. Defaults are the safe production ones (loopback only,
// Workers AI's published limits on, bounded queue, 30 s per request).
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "decide/request.h"
#include "server/http_limits.h"
#include "stave/options.h"

namespace stave::server {

inline constexpr size_t kMaxJsonValues = 65536;

struct ServeOptions {
  EngineOptions engine;                 // engine.model: release folder or Hugging Face repo id

  // Names a request's "model" may carry (server/model_names.h says how they are matched).
  std::string model_name;               // the id /v1/models reports; default: derived from --model
  std::vector<std::string> aliases;     // extra accepted names
  bool default_aliases = true;          // also accept "clef", the name every SystemOne example uses

  // Protocol: limits, truncation, confidence, token budget.
  RequestLimits limits = default_limits();
  DecideOptions decide;                 // include_logits is never set by the server
  // POST /v1/systemone bodies; larger: 413 before the body is read. The default holds a
  // request at the context length with Workers AI's image limits: 8 MiB of images in all,
  // base64 in JSON (× 4/3 = 10.67 MiB), plus 1 MiB for 16,384 tokens of JSON-escaped text
  // (up to 64 bytes a token) and the questions, rounded up to 12 MiB (docs/serve.md).
  size_t max_body_bytes = size_t{12} << 20;


  // Admission: `max_running` decisions at once, `max_queue` more waiting; beyond that 503.
  int max_running = 1;
  int max_queue = 16;
  int timeout_ms = 30000;               // from arrival to answer, queue wait included; then 504
  // Generation: sequences one decode step advances together (continuous batching). Generation
  // requests have their own admission: `max_decode_batch` admitted at once, `max_queue` more
  // waiting, beyond that 503; they never take one of the `max_running` decision workers.
  int max_decode_batch = 32;

  // HTTP front: connections, deadlines, header limits (server/http_limits.h).
  HttpLimits http;
  std::string host = "127.0.0.1";
  int port = 8080;                      // 0: any free port (tests)
  std::string api_key;                  // non-empty: /v1/* need "Authorization: Bearer <key>"
  bool workers_ai_envelope = false;     // wrap replies in {result, success, errors, messages}
  bool access_log = true;               // one JSON line per request on stderr (events print either way)

  // Workers AI's published limits (64 questions, 2–255 options, 2–10 levels, ids ≤ 100 chars of
  // letters, digits, _ . -, 4 images of ≤ 4 MiB, 8 MiB in all); instructions stay optional and
  // unknown fields allowed unless --strict.
  static RequestLimits default_limits() {
    RequestLimits l = RequestLimits::workers_ai();
    l.require_instructions = false;
    l.reject_unknown_fields = false;
    l.json.max_bytes = size_t{12} << 20;
    // JSON values per body (strings, numbers, literals, arrays, objects); more: 413
    // too_many_values, refused as the tree is built, so a body of millions of zeros never
    // becomes millions of nodes. 64 questions of 255 options are about 33,000 values.
    l.json.max_values = kMaxJsonValues;
    // Videos (a stave extension; the hosted schema has none): 2 per request, 8 MiB decoded each
    // (the 12 MiB body bounds them anyway), a frame list of at most 64 images. Duration, frame
    // count and frame size are checked when decoding (413; src/vision/video_decode.h).
    l.allow_videos = true;
    l.max_videos = 2;
    l.max_video_bytes = size_t{8} << 20;
    l.max_video_frames = 64;
    return l;
  }
};

}  // namespace stave::server
