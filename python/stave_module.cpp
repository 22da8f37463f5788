// The Python module `stave`: the C++ engine behind the model card's API.
//
//   import stave
//   clef = stave.load("EliovpAI/clef-MXFP4", device="cpu", precision="fast")
//   clef.systemone({"model": "clef", "state": "...", "questions": {...}})  # -> dict
//   clef.chat([{"role": "user", "content": "Hi"}], temperature=0)      # -> {text, ...}
//   clef.perplexity(open("wiki.test.raw").read())                       # -> {ppl, ...}
//
// Requests are dicts (or JSON text); answers are the SystemOne response as a dict, the same
// object `stave decide` prints. Errors are stave.Error subclasses carrying the C++ messages.
// Every computation runs with the GIL released, so Python threads decide in parallel.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cmath>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "stave/stave.h"

namespace py = pybind11;

namespace {

// Exception classes, made once at import and kept for the life of the interpreter.
struct ErrorClasses {
  PyObject* base = nullptr;
  PyObject* by_kind[6] = {};
};
ErrorClasses g_errors;

PyObject* error_class(stave::ErrorKind kind) {
  const int i = static_cast<int>(kind);
  return i >= 0 && i < 6 && g_errors.by_kind[i] ? g_errors.by_kind[i] : g_errors.base;
}

void make_error_classes(py::module_& m) {
  g_errors.base = PyErr_NewExceptionWithDoc(
      "stave.Error", "A stave error: the message names what is wrong; `kind` says which kind.", PyExc_Exception, nullptr);
  if (!g_errors.base) throw py::error_already_set();
  py::setattr(g_errors.base, "kind", py::none());
  m.add_object("Error", py::handle(g_errors.base));
  struct Kind {
    stave::ErrorKind kind;
    const char* name;
    const char* doc;
  };
  const Kind kinds[] = {
      {stave::ErrorKind::kInvalidRequest, "InvalidRequestError", "The request breaks the protocol (HTTP 400/422)."},
      {stave::ErrorKind::kRequestTooLarge, "RequestTooLargeError", "Over a size limit (HTTP 413)."},
      {stave::ErrorKind::kInvalidModel, "InvalidModelError", "A model folder or file is missing, corrupt or inconsistent."},
      {stave::ErrorKind::kUnsupported, "UnsupportedError", "Well-formed, but not implemented by stave."},
      {stave::ErrorKind::kIo, "IoError", "The operating system refused a read or write."},
      {stave::ErrorKind::kInternal, "InternalError", "A bug in stave."},
  };
  for (const Kind& k : kinds) {
    PyObject* cls = PyErr_NewExceptionWithDoc((std::string("stave.") + k.name).c_str(), k.doc, g_errors.base, nullptr);
    if (!cls) throw py::error_already_set();
    py::setattr(cls, "kind", py::str(stave::to_string(k.kind)));
    g_errors.by_kind[static_cast<int>(k.kind)] = cls;
    m.add_object(k.name, py::handle(cls));
  }
}

// A request as the engine reads it: JSON text as given, or a dict spelled by Python's json
// module (floats as repr, key order kept), so the engine sees what the reference would.
std::string request_text(const py::handle& request) {
  if (py::isinstance<py::str>(request)) return request.cast<std::string>();
  if (py::isinstance<py::bytes>(request)) return request.cast<std::string>();
  if (!py::isinstance<py::dict>(request))
    throw py::type_error("a request is a dict (or its JSON text), not " +
                         std::string(py::str(py::type::of(request).attr("__name__"))));
  static py::handle dumps = py::object(py::module_::import("json").attr("dumps")).release();  // kept to exit
  return dumps(request, py::arg("ensure_ascii") = false).cast<std::string>();
}

py::object json_to_python(const std::string& text) {
  static py::handle loads = py::object(py::module_::import("json").attr("loads")).release();  // kept to exit
  return loads(py::str(text));
}

stave::DecideOptions decide_options(int64_t max_length, std::optional<int64_t> max_state_tokens,
                                    const std::string& confidence, const std::string& truncate, bool logits) {
  stave::DecideOptions d;
  if (max_length < 1) throw py::value_error("max_length must be at least 1, not " + std::to_string(max_length));
  d.max_length = max_length;
  if (max_state_tokens) {
    if (*max_state_tokens < 0)
      throw py::value_error("max_state_tokens must be at least 0, not " + std::to_string(*max_state_tokens));
    d.max_state_tokens = *max_state_tokens;
  }
  auto c = stave::parse_confidence_mode(confidence);
  if (!c) throw py::value_error("confidence must be reference, workers-ai or jev, not \"" + confidence + "\"");
  d.confidence = *c;
  if (truncate != "keep" && truncate != "refuse")
    throw py::value_error("truncate must be keep or refuse, not \"" + truncate + "\"");
  d.truncation = truncate == "refuse" ? stave::TruncationPolicy::kRefuse : stave::TruncationPolicy::kTruncate;
  d.include_logits = logits;
  return d;
}

// A loaded release: the engine, and (made on the first chat or perplexity) the language model.
class Clef {
 public:
  explicit Clef(const stave::EngineOptions& options) : options_(options) {
    py::gil_scoped_release free;
    engine_ = stave::Engine::load(options);
  }

  // The release as a language model (`stave chat`): `messages` is a list of chat messages or a
  // whole OpenAI chat body; `sampling` holds the body's sampling fields (max_tokens,
  // temperature, top_p, top_k, min_p, seed, stop, presence_penalty, frequency_penalty,
  // repetition_penalty). Returns what `stave chat --json` prints.
  py::dict chat(const py::handle& messages, const py::kwargs& sampling) const {
    py::dict body;
    if (py::isinstance<py::dict>(messages)) {
      for (auto item : messages.cast<py::dict>()) body[item.first] = item.second;
    } else if (py::isinstance<py::list>(messages) || py::isinstance<py::tuple>(messages)) {
      body["messages"] = py::reinterpret_borrow<py::object>(messages);
    } else {
      throw py::type_error("chat takes a list of messages or an OpenAI chat body (dict)");
    }
    for (auto item : sampling) body[item.first] = item.second;
    const std::string text = request_text(body);
    stave::Generation g;
    {
      py::gil_scoped_release free;
      const stave::GenerationOptions o = stave::generation_options_from_request(text);
      g = lm().chat(text, o);
    }
    py::dict out;
    out["prompt_token_ids"] = g.prompt_token_ids;
    out["completion_token_ids"] = g.completion_token_ids;
    out["text"] = g.text;
    out["finish_reason"] = g.finish_reason;
    return out;
  }

  // The card's perplexity (`stave perplexity`): `text` is tokenized and cut into non-overlapping
  // windows of `ctx` tokens (the first `windows`), or `ids` gives the windows as token-id lists.
  py::dict perplexity(const std::optional<std::string>& text, const std::optional<std::vector<std::vector<int32_t>>>& ids,
                      int64_t ctx, int64_t windows, bool per_token) const {
    if (text.has_value() == ids.has_value()) throw py::value_error("give either text or ids");
    if (ctx < 2) throw py::value_error("ctx must be at least 2, not " + std::to_string(ctx));
    if (windows < 1) throw py::value_error("windows must be at least 1, not " + std::to_string(windows));
    stave::Perplexity r;
    {
      py::gil_scoped_release free;
      std::vector<std::vector<int32_t>> w;
      if (ids) {
        w = *ids;
      } else {
        const std::vector<int32_t> all = lm().tokenize(*text);
        w = stave::LanguageModel::split_windows(all, ctx, windows);
        if (w.empty())
          throw stave::Error(stave::ErrorKind::kInvalidRequest, "the text has " + std::to_string(all.size()) +
                                                                   " tokens: not one window of " + std::to_string(ctx));
      }
      r = lm().perplexity(w);
    }
    auto num = [](double v) { return std::isfinite(v) ? py::object(py::float_(v)) : py::object(py::none()); };
    py::list ws;
    for (const stave::PerplexityWindow& pw : r.windows) {
      py::dict d;
      d["tokens"] = pw.tokens;
      d["mean_nll"] = num(pw.mean_nll);
      d["ppl"] = num(pw.ppl);
      if (per_token) d["nll"] = pw.nll;
      ws.append(d);
    }
    py::dict out;
    out["windows"] = ws;
    out["mean_nll"] = num(r.mean_nll);
    out["ppl"] = num(r.ppl);
    return out;
  }

  py::object systemone(const py::handle& request, int64_t max_length, std::optional<int64_t> max_state_tokens,
                       const std::string& confidence, const std::string& truncate, bool logits) const {
    const stave::DecideOptions d = decide_options(max_length, max_state_tokens, confidence, truncate, logits);
    const std::string text = request_text(request);
    std::string answer;
    {
      py::gil_scoped_release free;
      answer = engine_->decide(text, d).json;
    }
    return json_to_python(answer);
  }

  py::list decide_batch(const py::iterable& requests, int64_t max_length, std::optional<int64_t> max_state_tokens,
                        const std::string& confidence, const std::string& truncate, bool logits) const {
    const stave::DecideOptions d = decide_options(max_length, max_state_tokens, confidence, truncate, logits);
    std::vector<std::string> texts;
    for (const py::handle& r : requests) texts.push_back(request_text(r));
    std::vector<std::string> answers;
    {
      py::gil_scoped_release free;
      std::vector<stave::Request> parsed;
      parsed.reserve(texts.size());
      for (const std::string& t : texts) parsed.push_back(stave::Request::parse(t));
      for (const stave::Decision& dec : engine_->decide_batch(parsed, d)) answers.push_back(dec.json);
    }
    py::list out;
    for (const std::string& a : answers) out.append(json_to_python(a));
    return out;
  }

  py::object encode(const py::handle& request, int64_t max_length) const {
    if (max_length < 1) throw py::value_error("max_length must be at least 1, not " + std::to_string(max_length));
    const std::string text = request_text(request);
    std::string json;
    {
      py::gil_scoped_release free;
      stave::DecideOptions o;
      o.max_length = max_length;
      json = engine_->encode(stave::Request::parse(text), o);
    }
    return json_to_python(json);
  }

  py::dict info() const {
    const stave::ModelInfo& i = engine_->info();
    py::dict d;
    d["path"] = i.path;
    d["weight_format"] = i.weight_format;
    d["hidden_size"] = i.hidden_size;
    d["num_layers"] = i.num_layers;
    d["vocab_size"] = i.vocab_size;
    d["vision"] = i.vision;
    d["precision"] = std::string(stave::to_string(i.precision));
    d["max_position_embeddings"] = i.max_position_embeddings;
    d["weight_bytes"] = i.weight_bytes;
  d["synthetic"] = i.synthetic;
    return d;
  }

  std::string repr() const {
    const stave::ModelInfo& i = engine_->info();
    return "<stave.Clef " + i.path + " (" + i.weight_format + ", " + stave::to_string(i.precision) + ")>";
  }

 private:
  // Loaded on the first chat / perplexity (the weights are memory-mapped: little is copied).
  const stave::LanguageModel& lm() const {
    std::call_once(lm_once_, [&] { lm_ = stave::LanguageModel::load(options_); });
    return *lm_;
  }

  stave::EngineOptions options_;
  std::unique_ptr<stave::Engine> engine_;
  mutable std::once_flag lm_once_;
  mutable std::unique_ptr<stave::LanguageModel> lm_;
};

std::shared_ptr<Clef> load(const std::string& model, const std::string& device, const std::string& precision,
                           int threads, bool verify, const std::string& revision, int64_t batch_tokens,
                           double fp8_cache_gib) {
  stave::EngineOptions o;
  o.model = model;
  o.revision = revision;
  auto p = stave::parse_precision(precision);
  if (!p) throw py::value_error("precision must be exact or fast, not \"" + precision + "\"");
  o.precision = *p;
  if (device != "cpu" && device != "cuda") throw py::value_error("device must be cpu or cuda, not \"" + device + "\"");
  o.device = device;
  if (threads < 0) throw py::value_error("threads must be at least 0, not " + std::to_string(threads));
  o.threads = threads;
  if (batch_tokens < 0) throw py::value_error("batch_tokens must be at least 0, not " + std::to_string(batch_tokens));
  o.batch_tokens = batch_tokens;
  if (!std::isfinite(fp8_cache_gib) || fp8_cache_gib < 0)
    throw py::value_error("fp8_cache_gib must be a size in GiB of at least 0, not " + std::to_string(fp8_cache_gib));
  o.fp8_cache_gib = fp8_cache_gib;  // device and precision checked by Engine::load
  o.verify_checksums = verify;
  auto clef = std::make_shared<Clef>(o);
  const std::string path = clef->info()["path"].cast<std::string>();
  if (clef->info()["synthetic"].cast<bool>()) {
    const std::string note = path + " was made by `stave synth`: its weights are RANDOM, so the answers are meaningless";
    if (PyErr_WarnEx(PyExc_UserWarning, note.c_str(), 1) < 0) throw py::error_already_set();
  }
  return clef;
}

}  // namespace

PYBIND11_MODULE(stave, m) {
  m.doc() = "stave: Cloudflare's Clef decision models on a native C++ engine (SystemOne requests)";
  m.attr("__version__") = STAVE_VERSION_STRING;
  make_error_classes(m);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const stave::Error& e) {
      PyErr_SetString(error_class(e.kind()), e.what());
    }
  });

  py::class_<Clef, std::shared_ptr<Clef>>(m, "Clef", "A loaded Clef release (stave.load makes one); thread-safe.")
      .def("systemone", &Clef::systemone, py::arg("request"), py::kw_only(), py::arg("max_length") = 16384,
           py::arg("max_state_tokens") = py::none(), py::arg("confidence") = "reference", py::arg("truncate") = "keep",
           py::arg("logits") = false,
           "Answer one SystemOne request (a dict, or its JSON text); returns the response dict, as `stave decide` "
           "prints it.")
      .def("decide_batch", &Clef::decide_batch, py::arg("requests"), py::kw_only(), py::arg("max_length") = 16384,
           py::arg("max_state_tokens") = py::none(), py::arg("confidence") = "reference", py::arg("truncate") = "keep",
           py::arg("logits") = false,
           "Answer several requests (one packed prefill on cuda); a list of response dicts in order. The first "
           "request that fails raises, and none is answered.")
      .def("encode", &Clef::encode, py::arg("request"), py::kw_only(), py::arg("max_length") = 16384,
           "The reference's encode_record: {input_ids, questions: [{id, type, question_span, option_spans, "
           "option_ids}], media?}, as `stave encode` prints it.")
      .def("chat", &Clef::chat, py::arg("messages"),
           "Generate a chat reply (the release as a language model; cpu): messages is a list of {role, content} "
           "or an OpenAI chat body; keyword arguments are its sampling fields (max_tokens, temperature (0: "
           "greedy), top_p, top_k, min_p, seed, stop, ...). Returns {prompt_token_ids, completion_token_ids, "
           "text, finish_reason}, as `stave chat --json` prints it.")
      .def("perplexity", &Clef::perplexity, py::arg("text") = py::none(), py::kw_only(), py::arg("ids") = py::none(),
           py::arg("ctx") = 1024, py::arg("windows") = 64, py::arg("per_token") = false,
           "Perplexity as the card measures it: text tokenized into non-overlapping windows of ctx tokens (the "
           "first `windows`), or ids: a list of token-id windows. Returns {windows: [{tokens, mean_nll, ppl[, "
           "nll]}], mean_nll, ppl}, as `stave perplexity` prints it.")
      .def_property_readonly("info", &Clef::info, "the release: path, weight format, shapes, precision")
      .def("__repr__", &Clef::repr);

  m.def("load", &load, py::arg("model"), py::kw_only(), py::arg("device") = "cpu", py::arg("precision") = "fast",
        py::arg("threads") = 0, py::arg("verify") = false, py::arg("revision") = "", py::arg("batch_tokens") = 0,
        py::arg("fp8_cache_gib") = 0.0,
        "Load a Clef release: a folder, or a Hugging Face repo id from the local cache (revision: branch, tag or "
        "commit). device: cpu or cuda; precision: fast or exact. fp8_cache_gib (cuda, fast): GiB of GPU memory "
        "for FP8 copies of the MXFP4 weights, which skip the per-product expansion (0: none).");
}
