// Perplexity of a text with a Clef release used as a language model, through the public API
// only: tokenize, cut into the model card's windows, score.
//   example_perplexity MODEL TEXT_FILE [CTX] [WINDOWS]
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include <stave/stave.h>

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: " << argv[0] << " MODEL TEXT_FILE [CTX] [WINDOWS]\n";
    return 2;
  }
  try {
    std::ifstream f(argv[2]);
    if (!f) throw std::runtime_error(std::string("cannot read ") + argv[2]);
    std::ostringstream text;
    text << f.rdbuf();
    auto lm = stave::LanguageModel::load({.model = argv[1], .precision = stave::Precision::kFast});
    const auto windows = stave::LanguageModel::split_windows(lm->tokenize(text.str()), argc > 3 ? std::stoll(argv[3]) : 1024,
                                                             argc > 4 ? std::stoll(argv[4]) : 64);
    if (windows.empty()) throw std::runtime_error("the text is shorter than one window");
    const stave::Perplexity p = lm->perplexity(windows);
    std::cout << windows.size() << " windows, mean NLL " << p.mean_nll << ", perplexity " << p.ppl << "\n";
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
