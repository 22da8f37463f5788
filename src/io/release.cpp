#include "io/release.h"

#include <cstdlib>
#include <filesystem>
#include <regex>

#include "stave/errors.h"
#include "util/mapped_file.h"

namespace stave {
namespace fs = std::filesystem;

namespace {

fs::path hub_cache_dir() {
  if (const char* hc = std::getenv("HF_HUB_CACHE"); hc && *hc) return hc;
  if (const char* hf = std::getenv("HF_HOME"); hf && *hf) return fs::path(hf) / "hub";
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return fs::path(xdg) / "huggingface" / "hub";
  if (const char* h = std::getenv("HOME"); h && *h) return fs::path(h) / ".cache" / "huggingface" / "hub";
  throw Error(ErrorKind::kInvalidModel, "cannot locate the Hugging Face cache: none of HF_HUB_CACHE, HF_HOME, "
                                        "XDG_CACHE_HOME or HOME is set");
}

bool is_commit_hash(const std::string& s) {
  static const std::regex hash("^[0-9a-f]{40}$");
  return std::regex_match(s, hash);
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace

std::string resolve_model_path(const std::string& dir_or_repo, const std::string& revision) {
  if (fs::is_directory(dir_or_repo)) {
    if (!revision.empty())
      throw Error(ErrorKind::kInvalidModel, "a revision (" + revision + ") applies to a Hugging Face repo id, not to the folder " +
                                                dir_or_repo);
    return dir_or_repo;
  }
  static const std::regex repo_id(R"(^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$)");
  if (!std::regex_match(dir_or_repo, repo_id))
    throw Error(ErrorKind::kInvalidModel, "model folder " + dir_or_repo + " does not exist");
  // Branch and tag names as git allows them under refs/ (pr/1 included), never a way out.
  static const std::regex ref_name(R"(^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*$)");
  const std::string rev = revision.empty() ? "main" : revision;
  if (!std::regex_match(rev, ref_name) || rev.find("..") != std::string::npos)
    throw Error(ErrorKind::kInvalidModel, "revision \"" + rev + "\" is not a branch, tag or commit hash");
  const fs::path hub = hub_cache_dir();
  const auto slash = dir_or_repo.find('/');
  const fs::path repo = hub / ("models--" + dir_or_repo.substr(0, slash) + "--" + dir_or_repo.substr(slash + 1));
  const std::string download = "huggingface-cli download " + dir_or_repo + (revision.empty() ? "" : " --revision " + revision);
  const std::string how = "download it with `" + download + "` (or `hf " + download.substr(16) +
                          "`), or pass --model with the folder that holds its files";
  std::string commit;
  const fs::path ref = repo / "refs" / rev;
  if (fs::is_regular_file(ref)) {
    commit = trim(read_file(ref.string()));
    if (!is_commit_hash(commit))
      throw Error(ErrorKind::kInvalidModel, ref.string() + " does not hold a commit hash");
  } else if (is_commit_hash(rev)) {
    commit = rev;
  } else if (!fs::is_directory(repo)) {
    throw Error(ErrorKind::kInvalidModel, dir_or_repo + " is not in the Hugging Face cache (" + repo.string() + "); " + how);
  } else {
    throw Error(ErrorKind::kInvalidModel, "the Hugging Face cache has no revision " + rev + " of " + dir_or_repo + " (no " +
                                              ref.string() + "); " + how);
  }
  const fs::path snap = repo / "snapshots" / commit;
  if (!fs::is_directory(snap))
    throw Error(ErrorKind::kInvalidModel, "the Hugging Face cache has no snapshot " + commit + " for " + dir_or_repo +
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
  r->video_processor = default_video_processor_config(r->image_processor);
  for (const char* name : {"video_preprocessor_config.json", "processor_config.json"}) {
    fs::path p = d / name;
    if (!fs::exists(p)) continue;
    VideoProcessorConfig v = parse_video_processor_config(read_file(p.string(), kMaxConfigBytes), p.string());
    if (v.present) {
      r->video_processor = v;
      break;
    }
  }
  return r;
}

}  // namespace stave
