// stave::Request, the public face of a parsed DecisionRequest.
#include "decide/request_handle.h"

#include "text/json_value.h"

namespace stave {

Request::Request(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {
  if (!impl_) throw Error(ErrorKind::kInternal, "stave::Request made without a parsed request");
}

Request make_request(DecisionRequest request) {
  return Request(std::make_shared<const Request::Impl>(Request::Impl{std::move(request)}));
}

Request Request::parse(std::string_view json_text, const RequestLimits& limits) {
  return make_request(parse_decision_request(json_text, limits));
}

const std::string& Request::model() const { return impl_->request.model; }

std::vector<RequestQuestion> Request::questions() const {
  std::vector<RequestQuestion> out;
  out.reserve(impl_->request.questions.size());
  for (const QuestionSpec& q : impl_->request.questions) {
    RequestQuestion rq;
    rq.id = q.id;
    rq.type = question_type_name(q.type);
    for (size_t i : q.request_order) rq.option_ids.push_back(q.options[i].id);
    out.push_back(std::move(rq));
  }
  return out;
}

size_t Request::image_count() const { return impl_->request.images.size(); }

std::vector<RequestIssue> validate_request(std::string_view json_text, const RequestLimits& limits) {
  return validate_decision_request(parse_json(json_text, json_parse_limits(limits.json)), limits);
}

}  // namespace stave
