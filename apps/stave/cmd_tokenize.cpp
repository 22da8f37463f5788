// stave tokenize --tokenizer PATH: reads a JSON array of strings on stdin and prints, on one
// line, the JSON array of their id arrays (as `tokenizer(text, add_special_tokens=False)`).
// Errors print {"error": {"message": ...}} and exit with status 2.
#include <iostream>
#include <iterator>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "command.h"
#include "stave/errors.h"
#include "text/tokenizer.h"

namespace stave::cli {
namespace {

int run_tokenize(const std::string& tokenizer_path) {
  // The input is checked before the tokenizer is loaded, so a bad request fails at once.
  const std::string input{std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>()};
  nlohmann::json texts;
  try {
    texts = nlohmann::json::parse(input);
  } catch (const nlohmann::json::exception& e) {
    return print_error_json(std::string("stdin is not valid JSON: ") + e.what());
  }
  if (!texts.is_array()) return print_error_json("stdin must be a JSON array of strings");
  for (size_t i = 0; i < texts.size(); ++i)
    if (!texts[i].is_string()) return print_error_json("stdin item " + std::to_string(i) + " is not a string");

  std::unique_ptr<Tokenizer> tokenizer;
  try {
    tokenizer = Tokenizer::from_file(tokenizer_path);
  } catch (const Error& e) {
    return print_error_json(e.what());
  }
  nlohmann::json out = nlohmann::json::array();
  for (size_t i = 0; i < texts.size(); ++i) {
    try {
      out.push_back(tokenizer->encode(texts[i].get_ref<const std::string&>()));
    } catch (const Error& e) {
      return print_error_json("stdin item " + std::to_string(i) + ": " + e.what());
    }
  }
  std::cout << out.dump() << std::endl;
  return 0;
}

Register reg{{"tokenize", "Token ids of a JSON array of strings (stdin), as HF tokenizer(text, add_special_tokens=False)",
              [](CLI::App& sub) {
                auto path = std::make_shared<std::string>();
                sub.add_option("--tokenizer", *path, "tokenizer.json, or a folder holding one")->required();
                return std::function<int()>([path]() -> int { return run_tokenize(*path); });
              },
              60}};

}  // namespace
}  // namespace stave::cli
