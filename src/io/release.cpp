#include "io/release.h"

#include <cstdlib>
#include <filesystem>
#include <regex>

#include "stave/errors.h"
#include "util/mapped_file.h"

namespace stave {
namespace fs = std::filesystem;

std::string resolve_model_path(const std::string& dir_or_repo) {
  if (fs::is_directory(dir_or_repo)) return dir_or_repo;
  static const std::regex repo_id(R"(^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$)");
  if (!std::regex_match(dir_or_repo, repo_id))
    throw Error(ErrorKind::kInvalidModel, "model folder " + dir_or_repo + " does not exist");
  fs::path home;
  if (const char* hf = std::getenv("HF_HOME"); hf && *hf) home = hf;
  else if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) home = fs::path(xdg) / "huggingface";
  else if (const char* h = std::getenv("HOME"); h && *h) home = fs::path(h) / ".cache" / "huggingface";
  fs::path hub = home / "hub";
  if (const char* hc = std::getenv("HF_HUB_CACHE"); hc && *hc) hub = hc;
  auto slash = dir_or_repo.find('/');
  fs::path repo = hub / ("models--" + dir_or_repo.substr(0, slash) + "--" + dir_or_repo.substr(slash + 1));
  std::string how = "download it with `huggingface-cli download " + dir_or_repo + "` (or `hf download " +
                    dir_or_repo + "`), or pass --model with the folder that holds its files";
  fs::path ref = repo / "refs" / "main";
  if (!fs::exists(ref))
    throw Error(ErrorKind::kInvalidModel,
                dir_or_repo + " is not in the Hugging Face cache (" + repo.string() + "); " + how);
  std::string rev = read_file(ref.string());
  while (!rev.empty() && (rev.back() == '\n' || rev.back() == '\r' || rev.back() == ' ')) rev.pop_back();
  if (rev.empty() || rev.find('/') != std::string::npos || rev.find("..") != std::string::npos)
    throw Error(ErrorKind::kInvalidModel, ref.string() + " does not hold a revision hash");
  fs::path snap = repo / "snapshots" / rev;
  if (!fs::is_directory(snap))
    throw Error(ErrorKind::kInvalidModel, "the Hugging Face cache has no snapshot " + rev + " for " + dir_or_repo +
                                              " (" + snap.string() + "); " + how);
  return snap.string();
}

std::unique_ptr<Release> open_release(const std::string& dir_or_repo) {
  auto r = std::make_unique<Release>();
  r->dir = resolve_model_path(dir_or_repo);
  fs::path d(r->dir);
  auto need = [&](const char* name) {
    fs::path p = d / name;
    if (!fs::exists(p)) throw Error(ErrorKind::kInvalidModel, "model folder " + r->dir + " has no " + name);
    return p.string();
  };
  std::string config_path = need("config.json");
  r->config = parse_model_config(read_file(config_path, kMaxConfigBytes), config_path);
  std::string head_cfg = need("joint_head_config.json");
  r->head_config = parse_joint_head_config(read_file(head_cfg, kMaxConfigBytes), head_cfg);
  if (r->head_config.hidden_size != r->config.text.hidden_size)
    throw Error(ErrorKind::kInvalidModel, head_cfg + ": hidden_size " + std::to_string(r->head_config.hidden_size) +
                                              " does not match the backbone's " +
                                              std::to_string(r->config.text.hidden_size));
  r->weights = TensorStore::open_checkpoint(r->dir);
  r->head = TensorStore::open_file(need("joint_head.safetensors"));
  r->tokenizer_path = need("tokenizer.json");
  for (const char* name : {"preprocessor_config.json", "processor_config.json"}) {
    fs::path p = d / name;
    if (fs::exists(p)) {
      r->image_processor = parse_image_processor_config(read_file(p.string(), kMaxConfigBytes), p.string());
      break;
    }
  }
  return r;
}

}  // namespace stave
