// The text of a completion as it grows token by token: cut at the first stop string, and
// handed out in pieces that are safe to show — whole UTF-8 characters only (byte-level tokens
// may end inside a character; the detokenizer shows those bytes as U+FFFD until the character
// completes) and never a tail that could still turn into a stop string.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace stave {

class CompletionText {
 public:
  explicit CompletionText(std::vector<std::string> stop_strings = {});

  // `full`: the detokenized completion so far. Returns true when it contains a stop string:
  // the text is then cut before the earliest one and generation should end.
  bool update(std::string full);

  // The text not handed out yet that is ready now; `final` releases everything left.
  std::string take_ready(bool final);

  const std::string& text() const { return text_; }
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string text_;
  size_t emitted_ = 0;
  bool stopped_ = false;
};

}  // namespace stave
