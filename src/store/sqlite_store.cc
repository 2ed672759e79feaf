// SqliteStore (see sqlite_store.h for the contract).
//
// Open, in order:
//   1. create DIR (and its missing ancestors), fsyncing each new directory's parent so the new
//      entries survive a machine crash;
//   2. open DIR/estuary.db and set busy_timeout;
//   3. inspect the schema read-only (a file that is not SQLite fails here, before any write);
//   4. switch to WAL and set `synchronous`;
//   5. in one BEGIN IMMEDIATE transaction: inspect the schema again (another process may have
//      created it meanwhile) and create the tables and the version row when the file is empty;
//   6. prepare every statement the store runs, once (SQLITE_PREPARE_PERSISTENT).
#include "store/sqlite_store.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>
#include <vector>

namespace estuary {
namespace {

constexpr const char* kDbFileName = "estuary.db";
constexpr const char* kSchemaVersion = "1";
constexpr int kBusyTimeoutMs = 5000;

// Resets a statement (ending its implicit read transaction, if any) when the scope ends.
class ResetOnExit {
 public:
  explicit ResetOnExit(sqlite3_stmt* stmt) : stmt_(stmt) {}
  ~ResetOnExit() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }
  ResetOnExit(const ResetOnExit&) = delete;
  ResetOnExit& operator=(const ResetOnExit&) = delete;

 private:
  sqlite3_stmt* stmt_;
};

// Binds `text` (not copied: it must outlive the step) as TEXT parameter `index`.
int BindText(sqlite3_stmt* stmt, int index, std::string_view text) {
  return sqlite3_bind_text64(stmt, index, text.data(), text.size(), SQLITE_STATIC, SQLITE_UTF8);
}

// Column `col` of the current row as bytes. The view is valid until the next step or reset.
std::string_view ColumnText(sqlite3_stmt* stmt, int col) {
  const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt, col));
  const int n = sqlite3_column_bytes(stmt, col);
  return p == nullptr ? std::string_view() : std::string_view(p, static_cast<size_t>(n));
}
std::string_view ColumnBlob(sqlite3_stmt* stmt, int col) {
  const auto* p = static_cast<const char*>(sqlite3_column_blob(stmt, col));
  const int n = sqlite3_column_bytes(stmt, col);
  return p == nullptr ? std::string_view() : std::string_view(p, static_cast<size_t>(n));
}

// The smallest string greater than every string starting with `prefix`, or nullopt when there is
// none (the prefix is empty or all 0xFF bytes): drop trailing 0xFF bytes, then add one to the last.
std::optional<std::string> PrefixSuccessor(std::string_view prefix) {
  std::string s(prefix);
  while (!s.empty() && static_cast<unsigned char>(s.back()) == 0xFF) s.pop_back();
  if (s.empty()) return std::nullopt;
  s.back() = static_cast<char>(static_cast<unsigned char>(s.back()) + 1);
  return s;
}

// fsync()s directory `dir` so that entries just created in it are durable.
Status SyncDirectory(const std::filesystem::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Internal(dir.string() + ": cannot open directory to sync: " + std::strerror(errno));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) return Internal(dir.string() + ": fsync: " + std::strerror(err));
  return Status::Ok();
}

// Step 1 of Open: makes `dir` exist as a directory, creating missing ancestors one at a time.
Status EnsureDirectory(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path target = fs::absolute(fs::path(dir), ec);
  if (ec) return InvalidArgument(dir + ": cannot resolve directory: " + ec.message());
  // The missing components, deepest first.
  std::vector<fs::path> missing;
  fs::path p = target;
  while (!p.empty()) {
    const fs::file_status st = fs::status(p, ec);
    if (st.type() == fs::file_type::not_found) {
      missing.push_back(p);
      if (p == p.parent_path()) break;
      p = p.parent_path();
      continue;
    }
    if (ec) return InvalidArgument(dir + ": cannot create directory: " + p.string() + ": " + ec.message());
    if (!fs::is_directory(st)) {
      return InvalidArgument(dir + ": cannot create directory: " + p.string() + " is not a directory");
    }
    break;
  }
  for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
    fs::create_directory(*it, ec);
    if (ec) return InvalidArgument(dir + ": cannot create directory: " + it->string() + ": " + ec.message());
    ESTUARY_RETURN_IF_ERROR(SyncDirectory(it->parent_path()));
  }
  return Status::Ok();
}

}  // namespace

struct SqliteStore::Statements {
  sqlite3_stmt* begin = nullptr;
  sqlite3_stmt* commit = nullptr;
  sqlite3_stmt* rollback = nullptr;
  sqlite3_stmt* put = nullptr;
  sqlite3_stmt* del = nullptr;
  sqlite3_stmt* get = nullptr;
  sqlite3_stmt* scan_range = nullptr;  // prefix <= key < successor
  sqlite3_stmt* scan_from = nullptr;   // prefix <= key (no successor exists)

  Statements() = default;
  Statements(const Statements&) = delete;
  Statements& operator=(const Statements&) = delete;
  ~Statements() {
    for (sqlite3_stmt* s : {begin, commit, rollback, put, del, get, scan_range, scan_from}) {
      sqlite3_finalize(s);  // a no-op on nullptr
    }
  }
};

namespace {

// Internal naming the database file and the failed step, or InvalidArgument when the file is not
// a database at all.
Status SqliteError(const std::string& path, sqlite3* db, int rc, std::string_view what) {
  const std::string detail = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  if ((rc & 0xFF) == SQLITE_NOTADB) return InvalidArgument(path + ": not an SQLite database (" + detail + ")");
  return Internal(path + ": " + std::string(what) + ": " + detail);
}

// Runs `sql` (no parameters) to completion, discarding any rows.
Status Exec(const std::string& path, sqlite3* db, const char* sql) {
  char* err = nullptr;
  const int rc = sqlite3_exec(db, sql, nullptr, nullptr, &err);
  if (rc == SQLITE_OK) return Status::Ok();
  std::string msg = err != nullptr ? err : sqlite3_errstr(rc);
  sqlite3_free(err);
  if ((rc & 0xFF) == SQLITE_NOTADB) return InvalidArgument(path + ": not an SQLite database (" + msg + ")");
  return Internal(path + ": '" + sql + "': " + msg);
}

// Runs a one-row, one-column query and returns its text (nullopt when there is no row).
StatusOr<std::optional<std::string>> QueryText(const std::string& path, sqlite3* db, const char* sql,
                                               std::string_view param = {}) {
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v2(db, sql, -1, &stmt, nullptr);
  if (rc != SQLITE_OK) return SqliteError(path, db, rc, sql);
  std::optional<std::string> out;
  if (sqlite3_bind_parameter_count(stmt) > 0) BindText(stmt, 1, param);
  rc = sqlite3_step(stmt);
  if (rc == SQLITE_ROW) {
    out = std::string(ColumnText(stmt, 0));
    rc = SQLITE_DONE;
  }
  if (rc != SQLITE_DONE) {
    Status st = SqliteError(path, db, rc, sql);
    sqlite3_finalize(stmt);
    return st;
  }
  sqlite3_finalize(stmt);
  return out;
}

// What the file holds: nothing yet (a new database), or estuary's tables at the current version.
// Anything else is InvalidArgument naming the path.
enum class SchemaState { kEmpty, kCurrent };
StatusOr<SchemaState> InspectSchema(const std::string& path, sqlite3* db) {
  std::optional<std::string> any_object;
  ESTUARY_ASSIGN_OR_RETURN(any_object, QueryText(path, db, "SELECT name FROM sqlite_schema LIMIT 1"));
  if (!any_object) return SchemaState::kEmpty;
  const char* kHasTable = "SELECT name FROM sqlite_schema WHERE type = 'table' AND name = ?1";
  std::optional<std::string> meta;
  ESTUARY_ASSIGN_OR_RETURN(meta, QueryText(path, db, kHasTable, "meta"));
  if (!meta) return InvalidArgument(path + ": not an estuary database (an SQLite database without a 'meta' table)");
  std::optional<std::string> version;
  ESTUARY_ASSIGN_OR_RETURN(version,
                           QueryText(path, db, "SELECT value FROM meta WHERE name = 'schema_version'"));
  if (!version) return InvalidArgument(path + ": not an estuary database (no schema_version in 'meta')");
  if (*version != kSchemaVersion) {
    return InvalidArgument(path + ": unknown schema version '" + *version + "' (this build reads version " +
                           kSchemaVersion + ")");
  }
  std::optional<std::string> kv;
  ESTUARY_ASSIGN_OR_RETURN(kv, QueryText(path, db, kHasTable, "kv"));
  if (!kv) return InvalidArgument(path + ": not an estuary database (schema version 1 without a 'kv' table)");
  return SchemaState::kCurrent;
}

}  // namespace

StatusOr<std::unique_ptr<SqliteStore>> SqliteStore::Open(const std::string& dir, SqliteOptions options) {
  // 1. The directory.
  ESTUARY_RETURN_IF_ERROR(EnsureDirectory(dir));
  std::unique_ptr<SqliteStore> store(new SqliteStore());
  store->path_ = (std::filesystem::path(dir) / kDbFileName).string();
  const std::string& path = store->path_;

  // 2. The connection. NOMUTEX: the store's own mutex serializes every use of it.
  int rc = sqlite3_open_v2(path.c_str(), &store->db_,
                           SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) return SqliteError(path, store->db_, rc, "cannot open");
  sqlite3* db = store->db_;
  sqlite3_extended_result_codes(db, 1);
  sqlite3_busy_timeout(db, kBusyTimeoutMs);

  // 3. A read-only look first, so a foreign file is rejected before anything writes to it.
  StatusOr<SchemaState> state = InspectSchema(path, db);
  if (!state.ok()) return state.status();

  // 4. Journal and durability.
  std::optional<std::string> mode;
  ESTUARY_ASSIGN_OR_RETURN(mode, QueryText(path, db, "PRAGMA journal_mode=WAL"));
  if (mode != "wal") return Internal(path + ": cannot switch to WAL (journal_mode is '" + mode.value_or("") + "')");
  ESTUARY_RETURN_IF_ERROR(
      Exec(path, db, options.synchronous_normal ? "PRAGMA synchronous=NORMAL" : "PRAGMA synchronous=FULL"));

  // 5. The schema, created at most once even with several processes opening a new file at once.
  if (*state == SchemaState::kEmpty) {
    ESTUARY_RETURN_IF_ERROR(Exec(path, db, "BEGIN IMMEDIATE"));
    Status st = [&]() -> Status {
      StatusOr<SchemaState> again = InspectSchema(path, db);
      if (!again.ok()) return again.status();
      if (*again == SchemaState::kCurrent) return Status::Ok();
      const std::string create =
          std::string("CREATE TABLE kv(key TEXT PRIMARY KEY, value BLOB NOT NULL) WITHOUT ROWID;"
                      "CREATE TABLE meta(name TEXT PRIMARY KEY, value TEXT);"
                      "INSERT INTO meta(name, value) VALUES('schema_version', '") +
          kSchemaVersion + "');";
      ESTUARY_RETURN_IF_ERROR(Exec(path, db, create.c_str()));
      return Status::Ok();
    }();
    if (st.ok()) st = Exec(path, db, "COMMIT");
    if (!st.ok()) {
      if (sqlite3_get_autocommit(db) == 0) (void)Exec(path, db, "ROLLBACK");
      return st;
    }
  }

  // 6. The statements.
  store->stmts_ = std::make_unique<Statements>();
  Statements& s = *store->stmts_;
  const std::pair<sqlite3_stmt**, const char*> kSql[] = {
      {&s.begin, "BEGIN IMMEDIATE"},
      {&s.commit, "COMMIT"},
      {&s.rollback, "ROLLBACK"},
      {&s.put, "INSERT OR REPLACE INTO kv(key, value) VALUES(?1, ?2)"},
      {&s.del, "DELETE FROM kv WHERE key = ?1"},
      {&s.get, "SELECT value FROM kv WHERE key = ?1"},
      {&s.scan_range, "SELECT key, value FROM kv WHERE key >= ?1 AND key < ?2 ORDER BY key"},
      {&s.scan_from, "SELECT key, value FROM kv WHERE key >= ?1 ORDER BY key"},
  };
  for (const auto& [stmt, sql] : kSql) {
    rc = sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, stmt, nullptr);
    if (rc != SQLITE_OK) return SqliteError(path, db, rc, std::string("prepare '") + sql + "'");
  }
  return store;
}

SqliteStore::~SqliteStore() {
  stmts_.reset();  // every statement is finalized before the connection closes
  if (db_ != nullptr) sqlite3_close(db_);
}

Status SqliteStore::Apply(const StoreBatch& batch) {
  if (batch.empty()) return Status::Ok();
  for (const StoreBatch::Change& c : batch.changes) {
    if (c.key.find('\0') != std::string::npos) {
      return InvalidArgument(path_ + ": apply: a key contains a NUL byte (keys are text)");
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  Statements& s = *stmts_;
  // Every step below builds its error before its statement is reset (the reset would replace the
  // connection's error message), then rolls back unless SQLite already did (RAISE(ROLLBACK), some
  // I/O errors).
  auto rollback = [&](Status st) {
    if (sqlite3_get_autocommit(db_) == 0) {
      ResetOnExit reset(s.rollback);
      sqlite3_step(s.rollback);
    }
    return st;
  };
  Status st = Status::Ok();
  {
    ResetOnExit reset(s.begin);
    const int rc = sqlite3_step(s.begin);
    if (rc != SQLITE_DONE) st = SqliteError(path_, db_, rc, "apply: BEGIN IMMEDIATE");
  }
  if (!st.ok()) return rollback(std::move(st));
  for (const StoreBatch::Change& c : batch.changes) {
    sqlite3_stmt* stmt = c.value ? s.put : s.del;
    {
      ResetOnExit reset(stmt);
      BindText(stmt, 1, c.key);
      // data() is never null, so an empty value binds as a zero-length blob, not as NULL.
      if (c.value) sqlite3_bind_blob64(stmt, 2, c.value->data(), c.value->size(), SQLITE_STATIC);
      const int rc = sqlite3_step(stmt);
      if (rc != SQLITE_DONE) {
        st = SqliteError(path_, db_, rc, std::string("apply: ") + (c.value ? "put '" : "delete '") + c.key + "'");
      }
    }
    if (!st.ok()) return rollback(std::move(st));
  }
  {
    ResetOnExit reset(s.commit);
    const int rc = sqlite3_step(s.commit);
    if (rc != SQLITE_DONE) st = SqliteError(path_, db_, rc, "apply: COMMIT");
  }
  if (!st.ok()) return rollback(std::move(st));
  return Status::Ok();
}

StatusOr<std::optional<std::string>> SqliteStore::Get(std::string_view key) {
  if (key.find('\0') != std::string_view::npos) return std::optional<std::string>();  // never stored
  std::lock_guard<std::mutex> lock(mu_);
  sqlite3_stmt* stmt = stmts_->get;
  ResetOnExit reset(stmt);
  BindText(stmt, 1, key);
  const int rc = sqlite3_step(stmt);
  if (rc == SQLITE_ROW) return std::optional<std::string>(std::string(ColumnBlob(stmt, 0)));
  if (rc == SQLITE_DONE) return std::optional<std::string>();
  return SqliteError(path_, db_, rc, "get");
}

Status SqliteStore::Scan(std::string_view prefix,
                         const std::function<bool(std::string_view key, std::string_view value)>& fn) {
  if (prefix.find('\0') != std::string_view::npos) return Status::Ok();  // no stored key has a NUL
  std::lock_guard<std::mutex> lock(mu_);
  const std::optional<std::string> end = PrefixSuccessor(prefix);
  sqlite3_stmt* stmt = end ? stmts_->scan_range : stmts_->scan_from;
  ResetOnExit reset(stmt);
  BindText(stmt, 1, prefix);
  if (end) BindText(stmt, 2, *end);
  while (true) {
    const int rc = sqlite3_step(stmt);
    if (rc == SQLITE_DONE) return Status::Ok();
    if (rc != SQLITE_ROW) return SqliteError(path_, db_, rc, "scan");
    if (!fn(ColumnText(stmt, 0), ColumnBlob(stmt, 1))) return Status::Ok();
  }
}

}  // namespace estuary
