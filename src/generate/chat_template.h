// A release's chat template, rendered as Hugging Face's apply_chat_template does: the
// template text from chat_template.jinja (else tokenizer_config.json's "chat_template"), the
// tokenizer config's special tokens (bos_token, eos_token, …) as variables, and the request's
// messages, tools, documents, add_generation_prompt and chat_template_kwargs.
#pragma once
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "text/jinja/template.h"

namespace stave {

class ChatTemplate {
 public:
  // Reads the template of the release folder `dir`; Error kInvalidModel when it has none.
  static ChatTemplate from_release(const std::string& dir);
  // A template given as text, with the special-token variables of `special_tokens` (an object).
  ChatTemplate(std::string_view source, nlohmann::ordered_json special_tokens = nlohmann::ordered_json::object());

  // request: {"messages": [...], "tools"?, "documents"?, "add_generation_prompt"? (default
  // true), "chat_template_kwargs"? {...}} — an OpenAI chat body is such an object. Errors name
  // the field (kInvalidRequest) or the template construct (kUnsupported).
  std::string render(const nlohmann::ordered_json& request) const;

 private:
  std::shared_ptr<const jinja::Template> template_;
  nlohmann::ordered_json special_tokens_;
};

}  // namespace stave
