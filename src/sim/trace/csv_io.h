// Shared plumbing of the CSV trace readers (fast-cpp-csv-parser): the reader policies, and the
// translation of the parser's exceptions into "file:line: ..." Status messages.
// REQUIRES: include <csv.h> before this header (the readers compile it with CSV_IO_NO_THREAD).
#pragma once

#include <string>

#include "common/status.h"

namespace estuary::csvio {

using Quote = io::double_quote_escape<',', '"'>;
using Trim = io::trim_chars<' ', '\t', '\r'>;
using Comment = io::empty_line_comment;  // blank lines (e.g. a trailing one) are skipped

// Fails for a directory (the parser would report it as an empty file).
Status CheckReadableFile(const std::string& path);
// A parser exception as a Status naming the file, the line and the column where known. Errors in
// the header row (a missing, duplicate or unexpected column) name `header_line`, which is 1 unless
// comment lines come before the header.
Status CsvError(const std::string& path, const io::error::base& e, unsigned header_line = 1);

}  // namespace estuary::csvio
