// CSV files (RFC 4180: comma-separated, double-quoted fields with "" for a quote, CRLF or LF,
// line breaks inside quoted fields) through Debian's libcsv in strict mode. Spaces around
// unquoted fields are kept (RFC 4180 says they are part of the field); a UTF-8 byte order mark
// is skipped.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace stave {

struct CsvTable {
  std::vector<std::string> header;             // the first record
  std::vector<std::vector<std::string>> rows;  // the other records, as many fields as each has
};

// Throws stave::Error(kInvalidRequest) naming the record where the text stops being CSV (a
// stray quote inside an unquoted field, an unterminated quoted field) or when there is no header.
CsvTable parse_csv(std::string_view text);
CsvTable read_csv_file(const std::string& path);  // kIo when the file cannot be read

}  // namespace stave
