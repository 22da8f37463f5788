// Inline SVG charts for the `stave eval --report` page: a reliability diagram (confidence of the
// top option vs how often it is the label) and histograms. Each returns one <svg> element of the
// given size; `color` fills the bars.
#pragma once
#include <string>
#include <vector>

namespace stave::eval {

struct ReliabilityPoint {
  double confidence = 0;  // p of the top option
  bool correct = false;   // the top option is the label
};

// Ten equal confidence bins: a bar per bin at the bin's accuracy, its count above it, the
// diagonal (perfect calibration) dashed.
std::string reliability_svg(const std::vector<ReliabilityPoint>& points, const std::string& title,
                            const std::string& color, int width, int height);

// `bins` equal bins from 0 to the largest value (a single bin when all are 0), counts on a
// linear axis.
std::string histogram_svg(const std::vector<double>& values, const std::string& title, const std::string& x_label,
                          const std::string& color, int width, int height, int bins = 20);

std::string html_escape(const std::string& s);

}  // namespace stave::eval
