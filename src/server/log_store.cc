#include "server/log_store.h"

#include <filesystem>
#include <fstream>

namespace estuary {

namespace fs = std::filesystem;

namespace {

int64_t SizeOf(const std::string& path) {
  std::error_code ec;
  const auto n = fs::file_size(path, ec);
  return ec ? 0 : static_cast<int64_t>(n);
}

}  // namespace

LogStore::LogStore(std::string dir, int64_t max_bytes) : dir_(std::move(dir)), max_bytes_(max_bytes) {
  std::error_code ec;
  fs::create_directories(dir_, ec);
}

std::string LogStore::Path(uint64_t job, int32_t replica) const {
  return dir_ + "/" + std::to_string(job) + "/" + std::to_string(replica) + ".log";
}

Status LogStore::Append(uint64_t job, int32_t replica, const std::string& node, int64_t run, int64_t offset,
                        std::string_view data) {
  if (offset < 0) return InvalidArgument("field 'offset': " + std::to_string(offset) + " is below 0");
  std::lock_guard lk(mu_);
  const auto key = std::make_tuple(job, replica, node, run);
  auto [it, fresh] = next_.try_emplace(key, 0);
  const int64_t skip = std::max<int64_t>(0, it->second - offset);
  if (skip >= static_cast<int64_t>(data.size()) && !fresh) return Status::Ok();  // seen already
  const std::string path = Path(job, replica);
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  if (SizeOf(path) + static_cast<int64_t>(data.size()) > max_bytes_ && SizeOf(path) > 0) {
    fs::rename(path, path + ".1", ec);
  }
  std::ofstream out(path, std::ios::binary | std::ios::app);
  if (!out) return Internal("log " + path + ": cannot open");
  if (fresh) out << "[estuary] replica " << replica << " on " << node << " (run " << run << ")\n";
  if (skip < static_cast<int64_t>(data.size())) out.write(data.data() + skip, static_cast<std::streamsize>(data.size() - skip));
  it->second = std::max(it->second, offset + static_cast<int64_t>(data.size()));
  if (!out) return Internal("log " + path + ": cannot write");
  return Status::Ok();
}

LogStore::Chunk LogStore::Read(uint64_t job, int32_t replica, int64_t from, int64_t max) const {
  std::lock_guard lk(mu_);
  const std::string path = Path(job, replica);
  const int64_t old_size = SizeOf(path + ".1"), size = old_size + SizeOf(path);
  Chunk c;
  if (from > size || from < 0) from = 0;
  int64_t at = from;
  for (const auto& [file, base] : {std::pair{path + ".1", int64_t{0}}, std::pair{path, old_size}}) {
    const int64_t len = SizeOf(file);
    if (at >= base + len || static_cast<int64_t>(c.data.size()) >= max) continue;
    std::ifstream in(file, std::ios::binary);
    in.seekg(at - base);
    std::string part(static_cast<size_t>(std::min(base + len - at, max - static_cast<int64_t>(c.data.size()))), '\0');
    in.read(part.data(), static_cast<std::streamsize>(part.size()));
    part.resize(static_cast<size_t>(in.gcount()));
    at += static_cast<int64_t>(part.size());
    c.data += part;
  }
  c.next = at;
  return c;
}

void LogStore::RemoveJob(uint64_t job) {
  std::lock_guard lk(mu_);
  std::error_code ec;
  fs::remove_all(dir_ + "/" + std::to_string(job), ec);
  std::erase_if(next_, [&](const auto& e) { return std::get<0>(e.first) == job; });
}

}  // namespace estuary
