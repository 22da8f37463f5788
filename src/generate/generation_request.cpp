// The sampling fields of an OpenAI chat / completions body, read onto GenerationOptions.
#include <string>

#include <nlohmann/json.hpp>

#include "stave/language_model.h"

namespace stave {
namespace {

using Json = nlohmann::ordered_json;

[[noreturn]] void bad(const std::string& field, const std::string& want) {
  throw Error(ErrorKind::kInvalidRequest, "\"" + field + "\" must be " + want);
}

const Json* field(const Json& j, const char* name) {
  const auto it = j.find(name);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

double number(const Json& v, const char* name) {
  if (!v.is_number()) bad(name, "a number");
  return v.get<double>();
}

int64_t integer(const Json& v, const char* name) {
  if (!v.is_number_integer()) bad(name, "an integer");
  return v.get<int64_t>();
}

}  // namespace

GenerationOptions generation_options_from_request(std::string_view request_json, GenerationOptions o) {
  const Json j = Json::parse(request_json, nullptr, false);
  if (j.is_discarded() || !j.is_object()) throw Error(ErrorKind::kInvalidRequest, "the request must be a JSON object");
  if (const Json* v = field(j, "max_completion_tokens")) o.max_tokens = integer(*v, "max_completion_tokens");
  else if (const Json* v2 = field(j, "max_tokens")) o.max_tokens = integer(*v2, "max_tokens");
  if (o.max_tokens < 0) bad("max_tokens", "≥ 0");
  SamplingOptions& s = o.sampling;
  if (const Json* v = field(j, "temperature")) s.temperature = number(*v, "temperature");
  if (const Json* v = field(j, "top_p")) s.top_p = number(*v, "top_p");
  if (const Json* v = field(j, "top_k")) {
    s.top_k = integer(*v, "top_k");
    if (s.top_k == -1) s.top_k = 0;  // vLLM's spelling of "off"
  }
  if (const Json* v = field(j, "min_p")) s.min_p = number(*v, "min_p");
  if (const Json* v = field(j, "repetition_penalty")) s.repetition_penalty = number(*v, "repetition_penalty");
  if (const Json* v = field(j, "presence_penalty")) s.presence_penalty = number(*v, "presence_penalty");
  if (const Json* v = field(j, "frequency_penalty")) s.frequency_penalty = number(*v, "frequency_penalty");
  if (const Json* v = field(j, "seed")) {
    if (!v->is_number_integer()) bad("seed", "an integer");
    s.seed = v->is_number_unsigned() ? v->get<uint64_t>() : static_cast<uint64_t>(v->get<int64_t>());
  }
  if (const Json* v = field(j, "stop")) {
    o.stop.clear();
    if (v->is_string()) o.stop.push_back(v->get<std::string>());
    else if (v->is_array()) {
      for (const Json& e : *v) {
        if (!e.is_string()) bad("stop", "a string or a list of strings");
        o.stop.push_back(e.get<std::string>());
      }
    } else bad("stop", "a string or a list of strings");
  }
  if (const Json* v = field(j, "stop_token_ids")) {
    if (!v->is_array()) bad("stop_token_ids", "a list of integers");
    for (const Json& e : *v) o.stop_token_ids.push_back(static_cast<int32_t>(integer(e, "stop_token_ids")));
  }
  if (const Json* v = field(j, "ignore_eos")) {
    if (!v->is_boolean()) bad("ignore_eos", "a boolean");
    o.ignore_eos = v->get<bool>();
  }
  if (const Json* v = field(j, "n"); v && !(v->is_number_integer() && v->get<int64_t>() == 1))
    throw Error(ErrorKind::kUnsupported, "\"n\" other than 1 is not supported");
  return o;
}

}  // namespace stave
