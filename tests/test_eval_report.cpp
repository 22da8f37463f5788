// The `stave eval --report` page in a real browser: headless Chromium (Debian's `chromium`,
// scripts/install-deps.sh) takes a screenshot, and each chart's box must hold its bars in its
// own colour, with nothing drawn in the gutter between charts. $STAVE_CHROMIUM names another
// browser binary.
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

#include <gtest/gtest.h>

#include "test_temp.h"
#include "eval/label_scoring.h"
#include "eval/report_html.h"
#include "util/mapped_file.h"
#include "vision/image_decode.h"

namespace stave::eval {
namespace {

namespace fs = std::filesystem;

std::string chromium() {
  if (const char* env = std::getenv("STAVE_CHROMIUM"); env && *env) return env;
  for (const char* dir : {"/usr/bin", "/usr/local/bin", "/snap/bin"})
    for (const char* name : {"chromium", "chromium-browser", "google-chrome"})
      if (fs::exists(fs::path(dir) / name)) return (fs::path(dir) / name).string();
  return {};
}

// A deterministic run of 40 records: the model is right 3 times in 4, sure of itself on most.
std::vector<RecordResult> results() {
  std::vector<RecordResult> out;
  for (int i = 0; i < 40; ++i) {
    RecordResult r;
    r.line = i + 1;
    r.key = std::to_string(i + 1) + ":k";
    r.state_excerpt = "Customer " + std::to_string(i) + " writes: my card <b>was</b> declined & I am stuck";
    QuestionResult q;
    q.id = "intent";
    q.type = "choice";
    q.instructions = "Which intent is this?";
    q.option_ids = {"card_declined", "refund", "top_up"};
    const double conf = 0.4 + 0.015 * i;
    q.p_model = {conf, (1 - conf) * 0.7, (1 - conf) * 0.3};
    q.p_against = {conf - 0.02 * (i % 5), (1 - conf) * 0.7 + 0.02 * (i % 5), (1 - conf) * 0.3};
    q.top_model = "card_declined";
    q.top_against = i % 7 == 0 ? "refund" : "card_declined";
    q.label = i % 4 == 0 ? "refund" : "card_declined";
    q.kl = 0.001 * (i % 9) + 0.0005;
    q.max_abs_dp = 0.02 * (i % 5) + 0.001;
    r.questions.push_back(q);
    out.push_back(r);
  }
  return out;
}

struct Rgb {
  int r, g, b;
};
// #rrggbb at fill-opacity 0.85 over white, as the page draws bars.
const std::map<std::string, Rgb> kBarColour = {
    {"reliability-model", {78, 131, 190}},
    {"reliability-against", {229, 143, 74}},
    {"hist-kl", {92, 173, 124}},
    {"hist-dp", {156, 111, 202}},
};

bool near(const uint8_t* p, Rgb c) {
  return std::abs(p[0] - c.r) <= 14 && std::abs(p[1] - c.g) <= 14 && std::abs(p[2] - c.b) <= 14;
}
bool saturated(const uint8_t* p) { return std::max({p[0], p[1], p[2]}) - std::min({p[0], p[1], p[2]}) > 50; }

TEST(EvalReport, RendersInHeadlessChromium) {
  const std::string browser = chromium();
  ASSERT_FALSE(browser.empty()) << "no chromium: install it (scripts/install-deps.sh) or set STAVE_CHROMIUM";
  const std::string dir = stave::test::temp_dir() + "/eval_report";
  fs::remove_all(dir);
  fs::create_directories(dir + "/profile");
  const auto rs = results();
  const EvalSummary s = summarize_records(rs, true);
  const ReportInfo info{.task = "banking77.jsonl", .model = "clef-MXFP4", .against = "clef-BF16",
                        .precision = "exact", .against_precision = "exact", .sampled_of = 3080};
  const std::string html = render_report_html(rs, s, info);
  for (const char* fetch : {"<script", "<link", "<img", "<iframe", "src=", "url(", "@import"})
    EXPECT_EQ(html.find(fetch), std::string::npos) << "the page must not load anything: " << fetch;
  EXPECT_EQ(html.find("<b>was</b>"), std::string::npos) << "state text must be escaped";
  std::ofstream(dir + "/report.html") << html;

  const int width = kReportPageWidth, height = 1100;
  const std::string cmd = "'" + browser +
                          "' --headless --no-sandbox --disable-gpu --disable-quic --no-first-run "
                          "--disable-background-networking --disable-component-update --disable-sync "
                          "--hide-scrollbars --force-device-scale-factor=1 --user-data-dir='" +
                          dir + "/profile' --screenshot='" + dir + "/shot.png' --window-size=" + std::to_string(width) +
                          "," + std::to_string(height) + " 'file://" + dir + "/report.html' >'" + dir +
                          "/chromium.log' 2>&1";
  const int raw = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(raw) && WEXITSTATUS(raw) == 0) << read_file(dir + "/chromium.log");
  ASSERT_TRUE(fs::exists(dir + "/shot.png")) << read_file(dir + "/chromium.log");
  const RgbImage img = decode_image("image/png", read_file(dir + "/shot.png"), "screenshot");
  ASSERT_EQ(img.width, width);
  ASSERT_GE(img.height, 1000);

  const auto boxes = report_chart_boxes(true);
  ASSERT_EQ(boxes.size(), 4u);
  for (const ChartBox& b : boxes) {
    SCOPED_TRACE(b.id);
    int64_t bar = 0, dark = 0;
    for (int y = b.y; y < b.y + b.height; ++y)
      for (int x = b.x; x < b.x + b.width; ++x) {
        const uint8_t* p = img.pixel(y, x);
        bar += near(p, kBarColour.at(b.id));
        dark += std::max({p[0], p[1], p[2]}) < 110;  // axes and labels
      }
    EXPECT_GT(bar, 1500) << "bars of the chart's colour";
    EXPECT_GT(dark, 300) << "axes and labels";
  }
  // The gutter between the two columns of charts is page background only.
  for (int y = boxes[0].y; y < boxes[2].y + boxes[2].height; ++y)
    for (int x = boxes[0].x + boxes[0].width + 3; x < boxes[1].x - 3; ++x)
      ASSERT_FALSE(saturated(img.pixel(y, x))) << "drawn outside a chart box at " << x << "," << y;
  // The table at the top: dark text on the page.
  int64_t text = 0;
  for (int y = 40; y < 200; ++y)
    for (int x = 20; x < 980; ++x) text += std::max({img.pixel(y, x)[0], img.pixel(y, x)[1], img.pixel(y, x)[2]}) < 90;
  EXPECT_GT(text, 1000) << "the header and table";
}

}  // namespace
}  // namespace stave::eval
