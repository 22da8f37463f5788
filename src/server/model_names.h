// Which `model` values a server answers. A request for a model this server does not serve is
// refused (404 model_not_found), never answered by another model.
//
// Matching is exact (case-sensitive) against this list:
//   - the primary id: --model-name, else the repo id (when --model is one), else the folder name;
//   - the --model argument as given, and the last path component of it (folder or repo name);
//   - "clef", unless default aliases are turned off (--no-default-aliases);
//   - every --alias.
#pragma once
#include <string>
#include <vector>

namespace stave::server {

class ModelNames {
 public:
  ModelNames(const std::string& model_arg, const std::string& model_name, const std::vector<std::string>& aliases,
             bool default_aliases);

  const std::string& id() const { return id_; }
  const std::vector<std::string>& names() const { return names_; }  // id first, no duplicates
  // The names a client may be shown: names() without the --model folder's path.
  const std::vector<std::string>& public_names() const { return public_names_; }
  bool serves(const std::string& name) const;
  // `text` with the model folder's path (as given, absolute, canonical) replaced by id().
  std::string redact(std::string text) const;

 private:
  std::string id_;
  std::vector<std::string> names_;
  std::vector<std::string> public_names_;
  std::vector<std::string> paths_;
};

}  // namespace stave::server
