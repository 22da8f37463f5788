#include "eval/report_html.h"

#include <algorithm>

#include <fmt/format.h>

#include "eval/report_charts.h"

namespace stave::eval {

namespace {

constexpr int kChartTop = 230, kChartW = 470, kChartH = 320, kChartGap = 20;
constexpr const char* kModelColor = "#2f6db3";
constexpr const char* kAgainstColor = "#e07b2a";
constexpr const char* kKlColor = "#3f9e64";
constexpr const char* kDpColor = "#8a55c0";
constexpr size_t kWorst = 12;

struct QuestionRef {
  const RecordResult* record;
  const QuestionResult* question;
};

std::string pct(std::optional<double> v) { return v ? fmt::format("{:.1f}%", *v * 100) : "—"; }

std::string table(const EvalSummary& s, const ReportInfo& info) {
  const std::string n = info.sampled_of && info.sampled_of != static_cast<size_t>(s.records + s.bad_records)
                            ? fmt::format("{} of {}", s.records, info.sampled_of)
                            : fmt::format("{}", s.records);
  std::string h = "<table class=\"card\"><thead><tr><th>task</th><th>records</th><th>questions</th>";
  std::string r = fmt::format("<tbody><tr><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>",
                              html_escape(info.task), n, s.questions);
  if (s.has_against) {
    h += fmt::format("<th>{} accuracy</th>", html_escape(info.against));
    r += fmt::format("<td class=\"num\">{}</td>", pct(s.against_accuracy()));
  }
  h += fmt::format("<th>{} accuracy</th>", html_escape(info.model));
  r += fmt::format("<td class=\"num\">{}</td>", pct(s.model_accuracy()));
  if (s.has_against) {
    h += "<th>top-1 agreement</th><th>mean KL</th><th>max |Δp|</th>";
    r += fmt::format("<td class=\"num\">{:.1f}%</td><td class=\"num\">{:.4g}</td><td class=\"num\">{:.4f}</td>",
                     s.top1_agreement() * 100, s.mean_kl(), s.max_abs_dp);
  }
  return h + "</tr></thead>" + r + "</tr></tbody></table>";
}

std::string header(const EvalSummary& s, const ReportInfo& info) {
  std::string who = fmt::format("<b>{}</b> ({})", html_escape(info.model), html_escape(info.precision));
  if (s.has_against)
    who += fmt::format(" against <b>{}</b> ({})", html_escape(info.against), html_escape(info.against_precision));
  std::string note = fmt::format("{} labelled questions", s.labelled);
  if (s.bad_records) note += fmt::format(", {} records refused (see the run's stderr or --out)", s.bad_records);
  if (s.has_against) note += "; KL is KL(p<sub>against</sub> ‖ p<sub>model</sub>) in nats, mean over questions";
  return fmt::format("<h1>stave eval</h1><p class=\"who\">{}</p>{}<p class=\"note\">{}.</p>", who, table(s, info), note);
}

std::vector<ReliabilityPoint> reliability(const std::vector<RecordResult>& results, bool against) {
  std::vector<ReliabilityPoint> pts;
  for (const auto& r : results)
    for (const auto& q : r.questions) {
      if (!q.label || (against && q.p_against.empty())) continue;
      const auto& p = against ? q.p_against : q.p_model;
      const std::string& top = against ? q.top_against : q.top_model;
      pts.push_back({*std::max_element(p.begin(), p.end()), top == *q.label});
    }
  return pts;
}

std::string chart_div(const ChartBox& b, const std::string& svg) {
  return fmt::format("<div class=\"chart\" id=\"{}\" style=\"left:{}px;top:{}px;width:{}px;height:{}px\">{}</div>",
                     b.id, b.x, b.y, b.width, b.height, svg);
}

std::string charts(const std::vector<RecordResult>& results, const EvalSummary& s, const ReportInfo& info) {
  std::string out;
  std::vector<double> kl, dp;
  for (const auto& r : results)
    for (const auto& q : r.questions)
      if (!q.p_against.empty()) {
        kl.push_back(q.kl);
        dp.push_back(q.max_abs_dp);
      }
  for (const ChartBox& b : report_chart_boxes(s.has_against)) {
    std::string svg;
    if (b.id == "reliability-model")
      svg = reliability_svg(reliability(results, false), "Reliability: " + info.model, kModelColor, b.width, b.height);
    else if (b.id == "reliability-against")
      svg = reliability_svg(reliability(results, true), "Reliability: " + info.against, kAgainstColor, b.width, b.height);
    else if (b.id == "hist-kl")
      svg = histogram_svg(kl, "Per-question KL(against ‖ model)", "KL (nats)", kKlColor, b.width, b.height);
    else
      svg = histogram_svg(dp, "Per-question max |Δp|", "max |Δp| over the options", kDpColor, b.width, b.height);
    out += chart_div(b, svg);
  }
  return out;
}

std::string option_cell(const QuestionResult& q, const std::string& top, const std::vector<double>& p) {
  const auto it = std::find(q.option_ids.begin(), q.option_ids.end(), top);
  const double pv = it == q.option_ids.end() ? 0.0 : p[static_cast<size_t>(it - q.option_ids.begin())];
  const bool ok = q.label && *q.label == top;
  return fmt::format("<td class=\"{}\">{} <span class=\"p\">{:.3f}</span></td>", q.label ? (ok ? "ok" : "bad") : "",
                     html_escape(top), pv);
}

// With a baseline: questions whose top options differ first, then by KL. Without: the model's
// most confident wrong answers.
std::string worst(const std::vector<RecordResult>& results, const EvalSummary& s) {
  std::vector<QuestionRef> refs;
  for (const auto& r : results)
    for (const auto& q : r.questions) {
      if (s.has_against ? (q.kl > 0 || q.top_model != q.top_against) : (q.label && *q.label != q.top_model))
        refs.push_back({&r, &q});
    }
  auto conf = [](const QuestionResult& q) { return *std::max_element(q.p_model.begin(), q.p_model.end()); };
  std::stable_sort(refs.begin(), refs.end(), [&](const QuestionRef& a, const QuestionRef& b) {
    if (!s.has_against) return conf(*a.question) > conf(*b.question);
    const bool da = a.question->top_model != a.question->top_against;
    const bool db = b.question->top_model != b.question->top_against;
    if (da != db) return da;
    return a.question->kl > b.question->kl;
  });
  if (refs.size() > kWorst) refs.resize(kWorst);
  std::string out = s.has_against ? "<h2>Worst disagreements</h2>" : "<h2>Most confident mistakes</h2>";
  if (refs.empty()) return out + "<p class=\"note\">None.</p>";
  out += "<table class=\"worst\"><thead><tr><th>line</th><th>question</th><th>state</th><th>label</th><th>model</th>";
  out += s.has_against ? "<th>against</th><th>KL</th><th>max |Δp|</th></tr></thead><tbody>" : "</tr></thead><tbody>";
  for (const auto& [r, q] : refs) {
    out += fmt::format("<tr><td class=\"num\">{}</td><td><b>{}</b> <span class=\"type\">{}</span><br>{}</td><td class=\"state\">{}</td><td>{}</td>",
                       r->line, html_escape(q->id), html_escape(q->type), html_escape(q->instructions),
                       html_escape(r->state_excerpt), q->label ? html_escape(*q->label) : "—");
    out += option_cell(*q, q->top_model, q->p_model);
    if (s.has_against)
      out += option_cell(*q, q->top_against, q->p_against) +
             fmt::format("<td class=\"num\">{:.4g}</td><td class=\"num\">{:.4f}</td>", q->kl, q->max_abs_dp);
    out += "</tr>";
  }
  return out + "</tbody></table>";
}

constexpr const char* kStyle = R"(
*{box-sizing:border-box}
body{margin:0;background:#f6f7f9;color:#1d1f23;font:14px/1.45 sans-serif}
#page{position:relative;width:1000px;margin:0}
#head{position:absolute;left:20px;top:0;width:960px;height:215px;overflow:hidden}
h1{font-size:22px;margin:18px 0 4px}
h2{font-size:17px;margin:8px 0 10px}
.who{margin:0 0 12px;color:#444;word-break:break-all}
.note{color:#666;font-size:12px}
table{border-collapse:collapse;background:#fff}
table.card{width:100%;box-shadow:0 1px 3px rgba(0,0,0,.12)}
table.card th{background:#eef1f5;font-weight:600}
th,td{border:1px solid #dde1e6;padding:6px 9px;text-align:left;vertical-align:top}
td.num{text-align:right;font-variant-numeric:tabular-nums}
.chart{position:absolute;background:#fff;box-shadow:0 1px 3px rgba(0,0,0,.12);overflow:hidden}
#rest{width:960px;margin:0 20px 40px}
table.worst{width:100%;font-size:12px}
td.state{max-width:280px;color:#444}
td.ok{background:#eaf6ee}
td.bad{background:#fbeaea}
.p{color:#666;font-variant-numeric:tabular-nums}
.type{color:#888;font-size:11px}
)";

}  // namespace

std::vector<ChartBox> report_chart_boxes(bool has_against) {
  const int x0 = 20, x1 = 20 + kChartW + kChartGap, y0 = kChartTop, y1 = kChartTop + kChartH + kChartGap;
  std::vector<ChartBox> boxes{{"reliability-model", x0, y0, kChartW, kChartH}};
  if (has_against) {
    boxes.push_back({"reliability-against", x1, y0, kChartW, kChartH});
    boxes.push_back({"hist-kl", x0, y1, kChartW, kChartH});
    boxes.push_back({"hist-dp", x1, y1, kChartW, kChartH});
  }
  return boxes;
}

std::string render_report_html(const std::vector<RecordResult>& results, const EvalSummary& summary,
                               const ReportInfo& info) {
  std::string page = "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>stave eval: " +
                     html_escape(info.task) + "</title><style>" + kStyle + "</style></head><body>";
  int height = 0;
  for (const ChartBox& b : report_chart_boxes(summary.has_against)) height = std::max(height, b.y + b.height + kChartGap);
  page += fmt::format("<div id=\"page\" style=\"height:{}px\"><div id=\"head\">", height) + header(summary, info) + "</div>";
  page += charts(results, summary, info) + "</div>";
  page += "<div id=\"rest\">" + worst(results, summary) + "</div></body></html>\n";
  return page;
}

}  // namespace stave::eval
