// SqliteStore: the Store on an embedded SQLite database (issue 7's default backend), one file
// `DIR/estuary.db` in WAL mode. One table:
//   kv(key TEXT PRIMARY KEY, value BLOB NOT NULL) WITHOUT ROWID
// plus `meta(name TEXT PRIMARY KEY, value TEXT)` holding the row ('schema_version', '1'). Every
// Apply is one transaction (BEGIN IMMEDIATE ... COMMIT); a failed statement rolls the whole batch back.
//
// Durability: journal_mode=WAL with synchronous=FULL by default (a committed batch survives a
// crash of the process and of the machine); SqliteOptions::synchronous_normal trades the machine-
// crash guarantee for speed (still safe against kill -9 of the process: the WAL is in the OS's
// page cache). busy_timeout 5 s (another process holding the write lock longer makes Apply fail
// with Internal). Opening a database whose schema version is unknown fails.
// Keys are bound as SQLite TEXT and compared bytewise (BINARY collation), so any bytes but NUL
// are fine; a batch with a key containing NUL fails with InvalidArgument and changes nothing
// (so Get of such a key is nullopt and Scan of such a prefix visits nothing).
// Values are BLOBs: any bytes, NUL included; an empty value is stored (it is not a delete).
// Thread-safety: one connection guarded by a mutex; every call is atomic. NOTE: Scan calls fn
// with that mutex held, so fn must not call back into the same store.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "store/store.h"

struct sqlite3;

namespace estuary {

struct SqliteOptions {
  // Default false: synchronous=FULL. True: synchronous=NORMAL (see the header comment).
  bool synchronous_normal = false;
};

class SqliteStore final : public Store {
 public:
  // Opens (creating when absent) DIR/estuary.db; creates DIR when it does not exist.
  // Errors: InvalidArgument naming the path when DIR cannot be created (e.g. under a regular file)
  // or the file is not an estuary database (not SQLite, foreign tables, unknown schema version);
  // Internal naming the path for other SQLite failures.
  static StatusOr<std::unique_ptr<SqliteStore>> Open(const std::string& dir, SqliteOptions options = {});
  ~SqliteStore() override;
  SqliteStore(const SqliteStore&) = delete;
  SqliteStore& operator=(const SqliteStore&) = delete;

  Status Apply(const StoreBatch& batch) override;
  StatusOr<std::optional<std::string>> Get(std::string_view key) override;
  Status Scan(std::string_view prefix,
              const std::function<bool(std::string_view key, std::string_view value)>& fn) override;

  // The database file's path.
  const std::string& path() const { return path_; }

 private:
  SqliteStore() = default;
  std::mutex mu_;
  sqlite3* db_ = nullptr;
  std::string path_;
  // Prepared statements (owned; finalized in the destructor).
  struct Statements;
  std::unique_ptr<Statements> stmts_;
};

}  // namespace estuary
