// Tokenizer throughput on one core: mixed text (English, code, JSON, CJK, emoji) with the real
// Qwen3 tokenizer.json. The text is generated from fixed seeds; code identifiers, JSON keys and
// CJK runs are mostly new words, so the word cache helps only as much as real text lets it.
//   ninja -C build bench_tokenizer && ./build/bench/bench_tokenizer
#include <benchmark/benchmark.h>

#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "text/tokenizer.h"
#include "util/mapped_file.h"

namespace {

std::string fixtures_dir() {
  if (const char* env = std::getenv("STAVE_FIXTURES"); env && *env) return env;
  return STAVE_DEFAULT_FIXTURES;
}

const stave::Tokenizer& tokenizer() {
  static const std::unique_ptr<stave::Tokenizer> t =
      stave::Tokenizer::from_file(fixtures_dir() + "/public/model-bf16/tokenizer.json");
  return *t;
}

void append_cp(char32_t cp, std::string& out) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

// Appends every argument (GCC 12 warns falsely on chains of `"literal" + std::string`).
template <typename... Parts>
void append(std::string& out, const Parts&... parts) {
  (out.append(parts), ...);
}

class MixedText {
 public:
  explicit MixedText(uint32_t seed) : rng_(seed) {}

  std::string make(size_t bytes) {
    std::string out;
    while (out.size() < bytes) {
      switch (rng_() % 5) {
        case 0: english(out); break;
        case 1: code(out); break;
        case 2: json(out); break;
        case 3: cjk(out); break;
        default: emoji(out); break;
      }
    }
    return out;
  }

 private:
  size_t pick(size_t n) { return rng_() % n; }

  std::string identifier() {
    static const char* syllables[] = {"get", "set", "user", "data", "ka", "zu", "lor", "vex", "tim", "qua",
                                      "node", "map", "xy", "ptr", "id", "cnt", "buf", "ro", "ne", "mal"};
    std::string s;
    const size_t parts = 1 + pick(3);
    for (size_t i = 0; i < parts; ++i) {
      if (i > 0) s += pick(2) ? "_" : "";
      s += syllables[pick(20)];
    }
    if (pick(3) == 0) s += std::to_string(pick(100));
    return s;
  }

  void english(std::string& out) {
    static const char* words[] = {
        "the", "of", "and", "to", "in", "is", "that", "for", "it", "as", "was", "with", "be", "by", "on",
        "not", "he", "this", "are", "or", "his", "from", "at", "which", "but", "have", "an", "had", "they",
        "you", "were", "their", "one", "all", "we", "can", "her", "has", "there", "been", "if", "more",
        "when", "will", "would", "who", "so", "no", "model", "decision", "question", "answer", "score",
        "tokenizer", "request", "server", "quickly", "probability", "schema", "however", "although",
        "customer", "support", "refund", "policy", "weather", "forecast", "Monday", "London", "Paris"};
    const size_t n = 8 + pick(20);
    for (size_t i = 0; i < n; ++i) {
      std::string w = words[pick(sizeof(words) / sizeof(words[0]))];
      if (i == 0) w[0] = char(std::toupper(w[0]));
      append(out, i == 0 ? "" : " ", w);
      if (pick(12) == 0) out += ",";
      if (pick(30) == 0) append(out, " ", std::to_string(pick(10000)));
    }
    out += pick(4) ? ". " : "?\n";
  }

  void code(std::string& out) {
    const std::string f = identifier(), a = identifier(), b = identifier();
    append(out, "def ", f, "(", a, ", ", b, "=None):\n");
    append(out, "    if ", b, " is None:\n        ", b, " = {}\n");
    append(out, "    return [", a, "[i] * ", std::to_string(pick(1000)), " for i in range(len(", a, "))]\n\n");
    append(out, "for (int i = 0; i < ", a, ".size(); ++i) { ", b, "[i] += ", f, "(i); }\n");
  }

  void json(std::string& out) {
    append(out, "{\"", identifier(), "\": ", std::to_string(pick(100000)), ", \"", identifier(), "\": \"");
    append(out, identifier(), " ", identifier(), "\", \"values\": [", std::to_string(pick(100)), ".");
    append(out, std::to_string(pick(1000)), ", null, true], \"nested\": {\"", identifier(), "\": false}}\n");
  }

  void cjk(std::string& out) {
    const size_t n = 10 + pick(40);
    for (size_t i = 0; i < n; ++i) {
      const size_t kind = pick(10);
      if (kind < 6)
        append_cp(char32_t(0x4E00 + pick(3500)), out);  // CJK ideographs
      else if (kind < 8)
        append_cp(char32_t(0x3041 + pick(86)), out);  // hiragana
      else if (kind < 9)
        append_cp(char32_t(0xAC00 + pick(2000)), out);  // Hangul syllables
      else
        append_cp(pick(2) ? U'\u3002' : U'\uFF0C', out);  // 。，
    }
    out += "\n";
  }

  void emoji(std::string& out) {
    const size_t n = 2 + pick(8);
    for (size_t i = 0; i < n; ++i) {
      append_cp(char32_t(0x1F600 + pick(80)), out);
      if (pick(5) == 0) {  // a ZWJ sequence
        append_cp(0x200D, out);
        append_cp(char32_t(0x1F466 + pick(4)), out);
      }
      if (pick(3) == 0) out += " ";
    }
    out += pick(2) ? " great!\n" : " ok ";
  }

  std::mt19937 rng_;
};

constexpr size_t kTextBytes = 256 * 1024;

// New text every iteration (generated outside the timed region): rare words miss the word
// cache as they would in a server's traffic. This is the headline figure.
void BM_EncodeMixed(benchmark::State& state) {
  const stave::Tokenizer& t = tokenizer();
  uint32_t seed = 1;
  std::string text = MixedText(seed).make(kTextBytes);
  size_t bytes = 0, tokens = 0;
  for (auto _ : state) {
    std::vector<int32_t> ids = t.encode(text);
    benchmark::DoNotOptimize(ids.data());
    bytes += text.size();
    tokens += ids.size();
    state.PauseTiming();
    text = MixedText(++seed).make(kTextBytes);
    state.ResumeTiming();
  }
  state.SetBytesProcessed(int64_t(bytes));
  state.counters["bytes_per_token"] = double(bytes) / double(std::max<size_t>(tokens, 1));
}
BENCHMARK(BM_EncodeMixed)->Unit(benchmark::kMillisecond)->MinTime(2.0);

// The same text every iteration: a repeated prompt, where the word cache answers most words.
void BM_EncodeRepeatedText(benchmark::State& state) {
  const stave::Tokenizer& t = tokenizer();
  const std::string text = MixedText(12345).make(kTextBytes);
  for (auto _ : state) benchmark::DoNotOptimize(t.encode(text).data());
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(text.size()));
}
BENCHMARK(BM_EncodeRepeatedText)->Unit(benchmark::kMillisecond);

// The 300 hard fixture strings (special tokens, marks, scripts), one encode call each.
void BM_EncodeFixtureStrings(benchmark::State& state) {
  const stave::Tokenizer& t = tokenizer();
  const auto cases =
      nlohmann::json::parse(stave::read_file(fixtures_dir() + "/public/tokenizer/strings.json"));
  std::vector<std::string> texts;
  size_t total = 0;
  for (const auto& c : cases) {
    texts.push_back(c["text"].get<std::string>());
    total += texts.back().size();
  }
  for (auto _ : state)
    for (const std::string& s : texts) benchmark::DoNotOptimize(t.encode(s).data());
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(total));
}
BENCHMARK(BM_EncodeFixtureStrings)->Unit(benchmark::kMicrosecond);

void BM_Decode(benchmark::State& state) {
  const stave::Tokenizer& t = tokenizer();
  const std::string text = MixedText(99).make(kTextBytes);
  const std::vector<int32_t> ids = t.encode(text);
  for (auto _ : state) benchmark::DoNotOptimize(t.decode(ids).data());
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(text.size()));
}
BENCHMARK(BM_Decode)->Unit(benchmark::kMillisecond);

}  // namespace
