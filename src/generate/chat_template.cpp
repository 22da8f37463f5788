#include "generate/chat_template.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "stave/errors.h"

namespace stave {
namespace {

using Json = nlohmann::ordered_json;

std::string read_text(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  if (!f) throw Error(ErrorKind::kIo, "cannot read " + p.string());
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

// tokenizer_config.json's special tokens: strings, or AddedToken objects {"content": ...}.
Json special_tokens_of(const Json& config) {
  Json out = Json::object();
  for (const char* key : {"bos_token", "eos_token", "unk_token", "pad_token", "sep_token", "cls_token", "mask_token"}) {
    const auto it = config.find(key);
    if (it == config.end()) continue;
    if (it->is_string()) out[key] = *it;
    else if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) out[key] = (*it)["content"];
  }
  return out;
}

std::string template_from_config(const Json& config, const std::string& where) {
  const auto it = config.find("chat_template");
  if (it == config.end()) return {};
  if (it->is_string()) return it->get<std::string>();
  if (it->is_array()) {  // [{"name": "default", "template": ...}, ...]
    for (const Json& t : *it)
      if (t.is_object() && t.value("name", "") == "default" && t.contains("template") && t["template"].is_string())
        return t["template"].get<std::string>();
  }
  throw Error(ErrorKind::kInvalidModel, where + ": chat_template is neither a string nor a list with a \"default\" entry");
}

}  // namespace

ChatTemplate ChatTemplate::from_release(const std::string& dir) {
  const std::filesystem::path root(dir);
  Json config = Json::object();
  const auto config_path = root / "tokenizer_config.json";
  if (std::filesystem::exists(config_path)) {
    config = Json::parse(read_text(config_path), nullptr, false);
    if (config.is_discarded() || !config.is_object())
      throw Error(ErrorKind::kInvalidModel, config_path.string() + " is not a JSON object");
  }
  std::string source;
  if (std::filesystem::exists(root / "chat_template.jinja")) source = read_text(root / "chat_template.jinja");
  else source = template_from_config(config, config_path.string());
  if (source.empty())
    throw Error(ErrorKind::kInvalidModel, dir + " has no chat template (chat_template.jinja or tokenizer_config.json "
                                                "\"chat_template\")");
  return ChatTemplate(source, special_tokens_of(config));
}

ChatTemplate::ChatTemplate(std::string_view source, Json special_tokens)
    : template_(std::make_shared<const jinja::Template>(source)), special_tokens_(std::move(special_tokens)) {}

std::string ChatTemplate::render(const Json& request) const {
  if (!request.is_object()) throw Error(ErrorKind::kInvalidRequest, "the chat request must be a JSON object");
  const auto messages = request.find("messages");
  if (messages == request.end() || !messages->is_array() || messages->empty())
    throw Error(ErrorKind::kInvalidRequest, "\"messages\" must be a non-empty array");
  for (size_t i = 0; i < messages->size(); ++i) {
    const Json& m = (*messages)[i];
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string())
      throw Error(ErrorKind::kInvalidRequest, "messages[" + std::to_string(i) + "] must be an object with a string \"role\"");
  }
  Json ctx = special_tokens_;
  ctx["messages"] = *messages;
  ctx["tools"] = request.contains("tools") ? request["tools"] : Json(nullptr);
  ctx["documents"] = request.contains("documents") ? request["documents"] : Json(nullptr);
  bool add_generation_prompt = true;
  if (const auto it = request.find("add_generation_prompt"); it != request.end()) {
    if (!it->is_boolean()) throw Error(ErrorKind::kInvalidRequest, "\"add_generation_prompt\" must be a boolean");
    add_generation_prompt = it->get<bool>();
  }
  ctx["add_generation_prompt"] = add_generation_prompt;
  if (const auto it = request.find("chat_template_kwargs"); it != request.end()) {
    if (!it->is_object()) throw Error(ErrorKind::kInvalidRequest, "\"chat_template_kwargs\" must be an object");
    for (auto kv = it->begin(); kv != it->end(); ++kv) ctx[kv.key()] = kv.value();
  }
  return template_->render(ctx);
}

}  // namespace stave
