#include "io/csv_reader.h"

#include <csv.h>

#include <fstream>
#include <sstream>

#include "stave/errors.h"

namespace stave {

namespace {

struct Builder {
  std::vector<std::vector<std::string>> records;
  std::vector<std::string> current;
};

void on_field(void* data, size_t len, void* user) {
  auto* b = static_cast<Builder*>(user);
  b->current.emplace_back(data ? static_cast<const char*>(data) : "", data ? len : 0);
}

void on_record(int, void* user) {
  auto* b = static_cast<Builder*>(user);
  b->records.push_back(std::move(b->current));
  b->current.clear();
}

int no_space(unsigned char) { return 0; }  // keep spaces: they belong to the field (RFC 4180)

struct Parser {
  csv_parser p{};
  Parser() {
    if (csv_init(&p, CSV_STRICT | CSV_STRICT_FINI) != 0) throw Error(ErrorKind::kInternal, "libcsv: csv_init failed");
    csv_set_space_func(&p, no_space);
  }
  ~Parser() { csv_free(&p); }
  Parser(const Parser&) = delete;
  Parser& operator=(const Parser&) = delete;
};

}  // namespace

CsvTable parse_csv(std::string_view text) {
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);
  Parser parser;
  Builder b;
  const size_t used = csv_parse(&parser.p, text.data(), text.size(), on_field, on_record, &b);
  auto fail = [&](const char* what) {
    throw Error(ErrorKind::kInvalidRequest, "CSV record " + std::to_string(b.records.size() + 1) + ": " + what);
  };
  if (used != text.size()) fail(csv_strerror(csv_error(&parser.p)));
  if (csv_fini(&parser.p, on_field, on_record, &b) != 0) fail("unterminated quoted field at the end of the file");
  if (b.records.empty()) throw Error(ErrorKind::kInvalidRequest, "CSV file has no header record");
  CsvTable t;
  t.header = std::move(b.records.front());
  t.rows.assign(std::make_move_iterator(b.records.begin() + 1), std::make_move_iterator(b.records.end()));
  return t;
}

CsvTable read_csv_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorKind::kIo, "cannot read CSV file \"" + path + "\"");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_csv(ss.str());
}

}  // namespace stave
