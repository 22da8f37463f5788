#include "server/model_names.h"

#include <algorithm>
#include <filesystem>

namespace stave::server {
namespace {

std::string last_component(std::string s) {
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  const size_t slash = s.find_last_of('/');
  return slash == std::string::npos ? s : s.substr(slash + 1);
}

}  // namespace

ModelNames::ModelNames(const std::string& model_arg, const std::string& model_name,
                       const std::vector<std::string>& aliases, bool default_aliases) {
  const std::string base = last_component(model_arg);
  // A repo id ("owner/name") is not a path that exists; the folder name is the id otherwise.
  std::string trimmed = model_arg;
  while (trimmed.size() > 1 && trimmed.back() == '/') trimmed.pop_back();
  std::error_code ec;
  const bool looks_like_repo = !std::filesystem::is_directory(trimmed, ec) && !trimmed.empty() && trimmed.front() != '/' &&
                               trimmed.front() != '.' && std::count(trimmed.begin(), trimmed.end(), '/') == 1;
  id_ = !model_name.empty() ? model_name : (looks_like_repo ? trimmed : base);
  auto add = [this](const std::string& n) {
    if (!n.empty() && std::find(names_.begin(), names_.end(), n) == names_.end()) names_.push_back(n);
  };
  add(id_);
  add(trimmed);
  add(base);
  if (default_aliases) add("clef");
  for (const auto& a : aliases) add(a);
}

bool ModelNames::serves(const std::string& name) const {
  return std::find(names_.begin(), names_.end(), name) != names_.end();
}

}  // namespace stave::server
