// The `stave eval --report report.html` page: self-contained (inline CSS and SVG, no script, no
// network), with the comparison table in the Clef card's layout, a reliability diagram per model,
// histograms of the per-question KL and |Δp|, and the worst disagreements with their questions.
// The charts sit at fixed positions (report_chart_boxes) so that a test can look at them in a
// screenshot.
#pragma once
#include <string>
#include <vector>

#include "eval/label_scoring.h"

namespace stave::eval {

struct ReportInfo {
  std::string task;                         // e.g. the data file's name
  std::string model, against;               // display names (against empty: no baseline)
  std::string precision, against_precision;
  size_t sampled_of = 0;                    // records in the file (the table says "n of N" when sampled)
};

struct ChartBox {
  std::string id;
  int x = 0, y = 0, width = 0, height = 0;  // CSS pixels from the page's top left corner
};

inline constexpr int kReportPageWidth = 1000;

// The charts the page draws and where: the model's reliability diagram always; with a baseline
// also its reliability diagram and the KL and |Δp| histograms.
std::vector<ChartBox> report_chart_boxes(bool has_against);

std::string render_report_html(const std::vector<RecordResult>& results, const EvalSummary& summary,
                               const ReportInfo& info);

}  // namespace stave::eval
