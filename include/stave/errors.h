// Errors that stave reports to callers. Every failure a user can cause (a bad request, a broken
// model folder) is a stave::Error with a kind and a message that names what is wrong.
#pragma once
#include <stdexcept>
#include <string>

namespace stave {

enum class ErrorKind {
  kInvalidRequest,   // the request breaks the protocol or the reference's rules (HTTP 400/422)
  kRequestTooLarge,  // over a configured size limit (HTTP 413)
  kInvalidModel,     // a model folder or file is missing, corrupt or inconsistent
  kUnsupported,      // well-formed, but a feature or format stave does not implement
  kIo,               // the operating system refused a read or write
  kInternal,         // a bug in stave
};

const char* to_string(ErrorKind kind);

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

// Thrown by Engine::decide when DecideOptions::cancel turned true; nobody waits for the answer.
class DecisionCancelled : public Error {
 public:
  DecisionCancelled() : Error(ErrorKind::kInternal, "the decision was cancelled") {}
};

}  // namespace stave
