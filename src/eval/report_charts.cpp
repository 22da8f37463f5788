#include "eval/report_charts.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace stave::eval {

namespace {

struct Frame {
  int width, height;
  int left = 56, right = 28, top = 34, bottom = 46;
  double x0() const { return left; }
  double x1() const { return width - right; }
  double y0() const { return height - bottom; }  // the axis (value 0)
  double y1() const { return top; }
  double px(double f) const { return x0() + f * (x1() - x0()); }  // f in [0, 1]
  double py(double f) const { return y0() - f * (y0() - y1()); }
};

std::string open_svg(const Frame& f, const std::string& title) {
  return fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"sans-serif\" font-size=\"11\">"
      "<rect x=\"0\" y=\"0\" width=\"{0}\" height=\"{1}\" fill=\"#ffffff\"/>"
      "<text x=\"{2}\" y=\"20\" font-size=\"13\" font-weight=\"600\" fill=\"#222\">{3}</text>",
      f.width, f.height, f.left, html_escape(title));
}

// Axes with ticks at 0, ¼, ½, ¾, 1 of each range, labelled by the given formatters.
template <class FX, class FY>
std::string axes(const Frame& f, FX xlabel, FY ylabel, const std::string& xname, const std::string& yname) {
  std::string s;
  for (int i = 0; i <= 4; ++i) {
    const double t = i / 4.0;
    s += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{2:.1f}\" y2=\"{1:.1f}\" stroke=\"#e4e4e4\"/>", f.x0(),
                     f.py(t), f.x1());
    s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\" fill=\"#555\">{}</text>", f.x0() - 6,
                     f.py(t) + 4, ylabel(t));
    s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" fill=\"#555\">{}</text>", f.px(t),
                     f.y0() + 15, xlabel(t));
  }
  s += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{2:.1f}\" y2=\"{1:.1f}\" stroke=\"#444\"/>", f.x0(), f.y0(),
                   f.x1());
  s += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" stroke=\"#444\"/>", f.x0(), f.y0(),
                   f.y1());
  s += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\" fill=\"#333\">{}</text>", (f.x0() + f.x1()) / 2,
                   f.height - 8, html_escape(xname));
  s += fmt::format(
      "<text transform=\"translate(14 {:.1f}) rotate(-90)\" text-anchor=\"middle\" fill=\"#333\">{}</text>",
      (f.y0() + f.y1()) / 2, html_escape(yname));
  return s;
}

std::string compact(double v) {
  if (v == 0) return "0";
  if (std::abs(v) >= 0.01 && std::abs(v) < 1000) return fmt::format("{:.3g}", v);
  return fmt::format("{:.1e}", v);
}

}  // namespace

std::string html_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string reliability_svg(const std::vector<ReliabilityPoint>& points, const std::string& title,
                            const std::string& color, int width, int height) {
  constexpr int kBins = 10;
  Frame f{width, height};
  std::vector<int> n(kBins, 0), correct(kBins, 0);
  for (const auto& p : points) {
    const int b = std::clamp(static_cast<int>(p.confidence * kBins), 0, kBins - 1);
    ++n[b];
    correct[b] += p.correct ? 1 : 0;
  }
  std::string s = open_svg(f, title);
  s += axes(f, [](double t) { return fmt::format("{:.2g}", t); }, [](double t) { return fmt::format("{:.2g}", t); },
            "confidence (p of the top option)", "accuracy");
  const double bw = (f.x1() - f.x0()) / kBins;
  for (int b = 0; b < kBins; ++b) {
    if (!n[b]) continue;
    const double acc = static_cast<double>(correct[b]) / n[b];
    const double top = f.py(acc);
    s += fmt::format(
        "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\" fill-opacity=\"0.85\">"
        "<title>{}–{}: {} of {} correct</title></rect>",
        f.x0() + b * bw + 2, std::min(top, f.y0() - 2), bw - 4, std::max(f.y0() - top, 2.0), color, b / 10.0,
        (b + 1) / 10.0, correct[b], n[b]);
    s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" fill=\"#333\" font-size=\"10\">{}</text>",
                     f.x0() + (b + 0.5) * bw, std::min(top, f.y0() - 2) - 4, n[b]);
  }
  s += fmt::format(
      "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#888\" stroke-dasharray=\"5 4\"/>",
      f.px(0), f.py(0), f.px(1), f.py(1));
  if (points.empty())
    s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" fill=\"#999\">no labelled questions</text>",
                     (f.x0() + f.x1()) / 2, (f.y0() + f.y1()) / 2);
  return s + "</svg>";
}

std::string histogram_svg(const std::vector<double>& values, const std::string& title, const std::string& x_label,
                          const std::string& color, int width, int height, int bins) {
  Frame f{width, height};
  const double vmax = values.empty() ? 0.0 : *std::max_element(values.begin(), values.end());
  const int nb = vmax > 0 ? bins : 1;
  std::vector<int> count(nb, 0);
  for (double v : values) {
    const int b = vmax > 0 ? std::clamp(static_cast<int>(v / vmax * nb), 0, nb - 1) : 0;
    ++count[b];
  }
  const int cmax = std::max(1, *std::max_element(count.begin(), count.end()));
  std::string s = open_svg(f, title);
  const double range = vmax > 0 ? vmax : 1.0;
  s += axes(f, [&](double t) { return compact(t * range); },
            [&](double t) { return compact(std::round(t * cmax * 10) / 10); }, x_label, "questions");
  const double bw = (f.x1() - f.x0()) / nb;
  for (int b = 0; b < nb; ++b) {
    if (!count[b]) continue;
    const double top = f.py(static_cast<double>(count[b]) / cmax);
    s += fmt::format(
        "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\" fill-opacity=\"0.85\">"
        "<title>{} – {}: {} questions</title></rect>",
        f.x0() + b * bw + 1, std::min(top, f.y0() - 2), std::max(bw - 2, 1.0), std::max(f.y0() - top, 2.0), color,
        compact(range * b / nb), compact(range * (b + 1) / nb), count[b]);
  }
  if (values.empty())
    s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" fill=\"#999\">no questions</text>",
                     (f.x0() + f.x1()) / 2, (f.y0() + f.y1()) / 2);
  return s + "</svg>";
}

}  // namespace stave::eval
