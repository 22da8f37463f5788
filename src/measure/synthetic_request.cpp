#include "measure/synthetic_request.h"

#include <openssl/evp.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include <nlohmann/json.hpp>

#include "stave/errors.h"

#define STB_IMAGE_WRITE_STATIC
#define STB_IMAGE_WRITE_IMPLEMENTATION
#include <stb/stb_image_write.h>

namespace stave::measure {
namespace {

using ojson = nlohmann::ordered_json;

// Common words, each one token after a space in the Qwen3 vocabulary, so that the state grows
// by about one token per word and the search below settles in a step or two.
constexpr const char* kWords[] = {
    "the",   "customer", "reports", "that",  "checkout", "fails",  "with",   "an",     "error",  "after",
    "the",   "payment",  "step",    "and",   "the",      "order",  "is",     "not",    "saved",  "since",
    "this",  "morning",  "we",      "have",  "checked",  "the",    "logs",   "for",    "each",   "request",
    "but",   "no",       "clear",   "cause", "was",      "found",  "yet",    "other",  "users",  "say",
    "the",   "page",     "loads",   "very",  "slowly",   "on",     "mobile", "while",  "support", "tickets",
    "keep",  "coming",   "in",      "from",  "several",  "regions", "so",    "please", "look",   "into",
    "it",    "as",       "soon",    "as",    "you",      "can"};
constexpr size_t kWordCount = sizeof(kWords) / sizeof(kWords[0]);

std::string base64(const std::vector<unsigned char>& bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), bytes.data(), static_cast<int>(bytes.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

// A smooth gradient with a few edges (compresses like a screenshot, decodes like any PNG).
std::string png_data_url(ImageSize size) {
  std::vector<unsigned char> rgb(static_cast<size_t>(size.width) * size.height * 3);
  for (int y = 0; y < size.height; ++y)
    for (int x = 0; x < size.width; ++x) {
      unsigned char* p = &rgb[(static_cast<size_t>(y) * size.width + x) * 3];
      p[0] = static_cast<unsigned char>(x * 255 / std::max(1, size.width - 1));
      p[1] = static_cast<unsigned char>(y * 255 / std::max(1, size.height - 1));
      p[2] = static_cast<unsigned char>(((x / 32) + (y / 32)) % 2 ? 200 : 40);
    }
  std::vector<unsigned char> png;
  stbi_write_png_to_func(
      [](void* ctx, void* data, int n) {
        auto* v = static_cast<std::vector<unsigned char>*>(ctx);
        v->insert(v->end(), static_cast<unsigned char*>(data), static_cast<unsigned char*>(data) + n);
      },
      &png, size.width, size.height, 3, rgb.data(), size.width * 3);
  if (png.empty()) throw Error(ErrorKind::kInternal, "could not encode the synthetic PNG");
  return "data:image/png;base64," + base64(png);
}

}  // namespace

ImageSize parse_image_size(const std::string& text) {
  int w = 0, h = 0;
  char x = 0, extra = 0;
  if (std::sscanf(text.c_str(), "%d%c%d%c", &w, &x, &h, &extra) != 3 || (x != 'x' && x != 'X') || w < 1 || h < 1 ||
      w > 16384 || h > 16384)
    throw Error(ErrorKind::kInvalidRequest, "--image must be WxH with sides 1..16384 (like 640x480), not \"" + text + "\"");
  return {w, h};
}

std::string state_text(int64_t words) {
  std::string s;
  s.reserve(static_cast<size_t>(words) * 7);
  for (int64_t i = 0; i < words; ++i) {
    if (i) s += ' ';
    s += kWords[static_cast<size_t>(i) % kWordCount];
  }
  return s;
}

std::string request_json(const SyntheticRequestSpec& spec, const std::string& state) {
  ojson questions = ojson::object();
  for (int i = 0; i < spec.questions; ++i) {
    std::string id = "q";
    id += std::to_string(i + 1);  // (not "q" + ...: a GCC 12 -Wrestrict false positive)
    switch (i % 3) {
      case 0:
        questions[id] = {{"type", "noul"}, {"instructions", "Is this request urgent?"}};
        break;
      case 1:
        questions[id] = {{"type", "choice"},
                         {"instructions", "Which team should handle this request?"},
                         {"criteria",
                          {{"billing", "Payments, invoices, and refunds"},
                           {"technical", "Outages, errors, and configuration"},
                           {"sales", "Plans and upgrades"}}}};
        break;
      default:
        questions[id] = {{"type", "score"},
                         {"instructions", "How severe is the customer impact?"},
                         {"criteria", {"No impact", "Minor", "Major", "Critical"}}};
    }
  }
  ojson body = {{"model", "clef"}, {"state", state}, {"questions", questions}};
  if (spec.image) body["images"] = {png_data_url(*spec.image)};
  return body.dump();
}

SyntheticRequest synthesize_request(const SyntheticRequestSpec& spec, const EncodedLength& measure) {
  if (spec.questions < 1) throw Error(ErrorKind::kInvalidRequest, "--questions must be at least 1");
  SyntheticRequest out;
  out.fixed_tokens = measure(request_json(spec, ""));
  if (spec.tokens < out.fixed_tokens)
    throw Error(ErrorKind::kInvalidRequest,
                "--prompt-tokens " + std::to_string(spec.tokens) + " is below the " + std::to_string(out.fixed_tokens) +
                    " tokens that the Clef prompt with " + std::to_string(spec.questions) + " question(s)" +
                    (spec.image ? " and the image" : "") + " takes with an empty state");
  const int64_t want = spec.tokens - out.fixed_tokens;
  // The state is tokenized on its own (as encode_record does), so lengths add up: grow or cut the
  // word count by the remaining difference; if a step overshoots both ways, fall back to +1/-1.
  int64_t words = want, step_limit = 64;
  std::string json;
  int64_t got = -1, prev_diff = 0;
  for (int iter = 0; iter < 400; ++iter) {
    json = request_json(spec, want == 0 ? "" : state_text(std::max<int64_t>(words, 1)));
    got = measure(json) - out.fixed_tokens;
    const int64_t diff = want - got;
    if (diff == 0) break;
    int64_t step = diff;
    if (prev_diff != 0 && ((prev_diff > 0) != (diff > 0))) step_limit = std::max<int64_t>(1, step_limit / 2);
    step = std::clamp<int64_t>(step, -step_limit, step_limit);
    words = std::max<int64_t>(1, words + step);
    prev_diff = diff;
  }
  if (got != want) {
    // Word granularity cannot hit it (a word worth 2 tokens at the end): finish with ".".
    for (int extra = 1; extra <= 8 && got != want; ++extra) {
      std::string s = state_text(std::max<int64_t>(words - 1, 1)) + std::string(static_cast<size_t>(extra), '.');
      json = request_json(spec, s);
      got = measure(json) - out.fixed_tokens;
    }
  }
  if (got != want)
    throw Error(ErrorKind::kInternal, "could not build a request of exactly " + std::to_string(spec.tokens) +
                                          " tokens (closest state: " + std::to_string(got) + " of " +
                                          std::to_string(want) + ")");
  out.json = std::move(json);
  out.state_tokens = got;
  out.tokens = out.fixed_tokens + got;
  return out;
}

}  // namespace stave::measure
