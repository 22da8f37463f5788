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
  // A folder's path is accepted as a name but never shown (replies go to strangers).
  if (!looks_like_repo && trimmed != base) {
    paths_.push_back(trimmed);
    const std::string absolute = std::filesystem::absolute(trimmed, ec).lexically_normal().string();
    if (!ec && absolute != trimmed) paths_.push_back(absolute);
    const std::string canonical = std::filesystem::weakly_canonical(trimmed, ec).string();
    if (!ec && canonical != trimmed && canonical != absolute) paths_.push_back(canonical);
  }
  for (const auto& n : names_)
    if (std::find(paths_.begin(), paths_.end(), n) == paths_.end()) public_names_.push_back(n);
}

std::string ModelNames::redact(std::string text) const {
  // Longest first, so a path is not half-replaced by a shorter one it contains.
  std::vector<std::string> paths = paths_;
  std::sort(paths.begin(), paths.end(), [](const auto& a, const auto& b) { return a.size() > b.size(); });
  for (const auto& p : paths) {
    if (p.size() < 2) continue;
    for (size_t at = text.find(p); at != std::string::npos; at = text.find(p, at + id_.size()))
      text.replace(at, p.size(), id_);
  }
  return text;
}

bool ModelNames::serves(const std::string& name) const {
  return std::find(names_.begin(), names_.end(), name) != names_.end();
}

}  // namespace stave::server
