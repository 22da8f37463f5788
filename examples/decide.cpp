// The C++ API in a few lines: load a Clef release once, answer requests from many threads.
//   example_decide MODEL_DIR REQUEST.json
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>
#include <vector>

#include "stave/stave.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: example_decide MODEL_DIR REQUEST.json\n";
    return 2;
  }
  std::ifstream in(argv[2]);
  std::stringstream body;
  body << in.rdbuf();
  try {
    auto engine = stave::Engine::load({.model = argv[1], .precision = stave::Precision::kExact});
    // decide() is thread-safe: two threads share the loaded model.
    std::vector<std::string> out(2);
    std::vector<std::thread> threads;
    for (int i = 0; i < 2; ++i)
      threads.emplace_back([&, i] { out[i] = engine->decide(body.str()).json; });
    for (auto& t : threads) t.join();
    std::cout << out[0] << "\n" << (out[0] == out[1] ? "both threads agree" : "THREADS DISAGREE") << "\n";
    stave::Decision d = engine->decide(body.str());
    for (const auto& a : d.answers) std::cout << a.id << ": " << a.type << " " << a.value << "\n";
    return out[0] == out[1] ? 0 : 1;
  } catch (const stave::Error& e) {
    std::cerr << "error (" << stave::to_string(e.kind()) << "): " << e.what() << "\n";
    return 2;
  }
}
