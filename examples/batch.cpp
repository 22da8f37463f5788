// Requests checked, parsed and answered in one batch, through the public API only:
// stave::validate_request lists what is wrong with a request, stave::Request::parse keeps a
// checked request, Engine::decide_batch answers them together (one packed prefill on cuda).
//   example_batch MODEL_DIR REQUESTS.jsonl [cpu|cuda]
// Prints one SystemOne response per valid line, in order; invalid lines are reported on stderr
// (every issue, with the field it concerns) and skipped.
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <stave/stave.h>

int main(int argc, char** argv) {
  if (argc < 3 || argc > 4) {
    std::cerr << "usage: example_batch MODEL_DIR REQUESTS.jsonl [cpu|cuda]\n";
    return 2;
  }
  std::ifstream in(argv[2]);
  if (!in) {
    std::cerr << "error: cannot read " << argv[2] << "\n";
    return 2;
  }
  try {
    // Workers AI's published limits on top of the protocol's own checks.
    const stave::RequestLimits limits = stave::RequestLimits::workers_ai();
    std::vector<stave::Request> requests;
    std::string line;
    for (int number = 1; std::getline(in, line); ++number) {
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      const std::vector<stave::RequestIssue> issues = stave::validate_request(line, limits);
      if (!issues.empty()) {
        for (const stave::RequestIssue& issue : issues) {
          std::string field;
          for (const std::string& p : issue.path) field += (field.empty() ? "" : ".") + p;
          std::cerr << "line " << number << ": " << field << ": " << issue.message << " (" << issue.type << ")\n";
        }
        continue;
      }
      requests.push_back(stave::Request::parse(line, limits));
      for (const stave::RequestQuestion& q : requests.back().questions())
        std::cerr << "line " << number << ": question " << q.id << " (" << q.type << ", " << q.option_ids.size()
                  << " options)\n";
    }
    stave::EngineOptions options{.model = argv[1], .precision = stave::Precision::kExact};
    if (argc == 4) options.device = argv[3];
    auto engine = stave::Engine::load(options);
    for (const stave::Decision& d : engine->decide_batch(requests)) std::cout << d.json << "\n";
    return 0;
  } catch (const stave::Error& e) {
    std::cerr << "error (" << stave::to_string(e.kind()) << "): " << e.what() << "\n";
    return 2;
  }
}
