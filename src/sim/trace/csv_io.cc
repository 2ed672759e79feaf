#include <csv.h>

#include "sim/trace/csv_io.h"

#include <filesystem>

namespace estuary::csvio {

Status CheckReadableFile(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return InvalidArgument(path + ": is a directory, not a CSV file");
  return Status::Ok();
}

Status CsvError(const std::string& path, const io::error::base& e, unsigned header_line) {
  const std::string at_header = path + ":" + std::to_string(header_line) + ": ";
  std::string where = path;
  if (auto* l = dynamic_cast<const io::error::with_file_line*>(&e); l && l->file_line >= 0) {
    where += ":" + std::to_string(l->file_line);
  }
  std::string col;
  if (auto* c = dynamic_cast<const io::error::with_column_name*>(&e); c && c->column_name[0]) {
    col = std::string(" column '") + c->column_name + "':";
  }
  if (dynamic_cast<const io::error::can_not_open_file*>(&e)) {
    return InvalidArgument(path + ": cannot open file");
  }
  if (auto* m = dynamic_cast<const io::error::missing_column_in_header*>(&e)) {
    return InvalidArgument(at_header + "missing column '" + m->column_name + "'");
  }
  if (auto* d = dynamic_cast<const io::error::duplicated_column_in_header*>(&e)) {
    return InvalidArgument(at_header + "duplicate column '" + d->column_name + "'");
  }
  if (auto* x = dynamic_cast<const io::error::extra_column_in_header*>(&e)) {
    return InvalidArgument(at_header + "unexpected column '" + x->column_name + "'");
  }
  if (dynamic_cast<const io::error::header_missing*>(&e)) {
    return InvalidArgument(path + ":1: empty file (no header row)");
  }
  if (dynamic_cast<const io::error::too_few_columns*>(&e)) {
    return InvalidArgument(where + ": malformed row: too few columns");
  }
  if (dynamic_cast<const io::error::too_many_columns*>(&e)) {
    return InvalidArgument(where + ": malformed row: too many columns");
  }
  std::string what = e.what();
  return InvalidArgument(where + ":" + col + " malformed CSV (" + what + ")");
}

}  // namespace estuary::csvio
