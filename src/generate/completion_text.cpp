#include "generate/completion_text.h"

#include <algorithm>

namespace stave {
namespace {

constexpr char kReplacement[] = "\xEF\xBF\xBD";  // U+FFFD, what an unfinished character decodes to

bool ends_with(const std::string& s, size_t end, const std::string& suffix) {
  return end >= suffix.size() && s.compare(end - suffix.size(), suffix.size(), suffix) == 0;
}

bool is_continuation(unsigned char c) { return (c & 0xC0) == 0x80; }

}  // namespace

CompletionText::CompletionText(std::vector<std::string> stop_strings) : stops_(std::move(stop_strings)) {
  std::erase_if(stops_, [](const std::string& s) { return s.empty(); });
}

bool CompletionText::update(std::string full) {
  if (stopped_) return true;
  text_ = std::move(full);
  size_t cut = std::string::npos;
  for (const std::string& s : stops_) {
    const size_t at = text_.find(s);
    if (at != std::string::npos) cut = std::min(cut, at);
  }
  if (cut != std::string::npos) {
    text_.resize(cut);
    stopped_ = true;
  }
  return stopped_;
}

std::string CompletionText::take_ready(bool final) {
  size_t end = text_.size();
  if (!final && !stopped_) {
    // An unfinished character at the end decodes as U+FFFD: wait for its next bytes.
    while (ends_with(text_, end, kReplacement)) end -= 3;
    // A tail that is a proper prefix of a stop string may still become one.
    size_t hold = 0;
    for (const std::string& s : stops_)
      for (size_t k = std::min(s.size() - 1, end); k > hold; --k)
        if (text_.compare(end - k, k, s, 0, k) == 0) {
          hold = k;
          break;
        }
    end -= hold;
    while (end > emitted_ && end < text_.size() && is_continuation(static_cast<unsigned char>(text_[end]))) --end;
  }
  if (end <= emitted_) return {};
  std::string piece = text_.substr(emitted_, end - emitted_);
  emitted_ = end;
  return piece;
}

}  // namespace stave
