// SqliteStore against the Store contract (store.h) and its own (sqlite_store.h): reads and writes,
// all-or-nothing batches, ordered prefix scans, binary values, reopening, bad files and
// directories, several threads, and a writer process killed with SIGKILL mid-stream.
#include "store/sqlite_store.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace estuary {
namespace {

using KeyValues = std::vector<std::pair<std::string, std::string>>;

// A fresh directory under /tmp, removed with everything in it when the test ends.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/estuary-store-test-XXXXXX";
    const char* p = ::mkdtemp(tmpl);
    if (p == nullptr) {
      std::perror("mkdtemp");
      std::abort();
    }
    path_ = p;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string Sub(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

StoreBatch Puts(const KeyValues& kvs) {
  StoreBatch b;
  for (const auto& [k, v] : kvs) b.Put(k, v);
  return b;
}

// Runs `sql` on the database file through a connection of the test's own, beside the store's.
void RawExec(const std::string& db_path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(db_path.c_str(), &db), SQLITE_OK) << db_path;
  sqlite3_busy_timeout(db, 5000);
  char* err = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
  const std::string msg = err != nullptr ? err : "";
  sqlite3_free(err);
  sqlite3_close(db);
  ASSERT_EQ(rc, SQLITE_OK) << sql << ": " << msg;
}

// The first column of the first row of `sql`, read through the test's own connection.
std::string RawQuery(const std::string& db_path, const std::string& sql) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open(db_path.c_str(), &db), SQLITE_OK) << db_path;
  sqlite3_stmt* stmt = nullptr;
  std::string out = "<no row>";
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr) == SQLITE_OK && sqlite3_step(stmt) == SQLITE_ROW) {
    out = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
  }
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  return out;
}

class SqliteStoreTest : public ::testing::Test {
 protected:
  std::string StoreDir() const { return tmp_.Sub("state"); }
  std::string DbPath() const { return StoreDir() + "/estuary.db"; }

  // Opens (or reopens) the store in StoreDir(); the previous handle, if any, is closed first.
  SqliteStore& Reopen(SqliteOptions options = {}) {
    store_.reset();
    auto opened = SqliteStore::Open(StoreDir(), options);
    if (!opened.ok()) {
      ADD_FAILURE() << opened.status().ToString();
      std::abort();
    }
    store_ = std::move(opened).value();
    return *store_;
  }
  SqliteStore& store() {
    if (store_ == nullptr) Reopen();
    return *store_;
  }
  void Close() { store_.reset(); }

  void Apply(const StoreBatch& batch) {
    const Status st = store().Apply(batch);
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  std::optional<std::string> Get(const std::string& key) {
    auto got = store().Get(key);
    EXPECT_TRUE(got.ok()) << got.status().ToString();
    return got.ok() ? *got : std::nullopt;
  }
  // Every (key, value) the scan of `prefix` visits, in visiting order; at most `limit` of them
  // (the callback returns false on the limit-th).
  KeyValues Scan(const std::string& prefix, size_t limit = SIZE_MAX) {
    KeyValues out;
    const Status st = store().Scan(prefix, [&](std::string_view k, std::string_view v) {
      out.emplace_back(std::string(k), std::string(v));
      return out.size() < limit;
    });
    EXPECT_TRUE(st.ok()) << st.ToString();
    return out;
  }

  TempDir tmp_;
  std::unique_ptr<SqliteStore> store_;
};

// --- Reads and writes --------------------------------------------------------------------------

TEST_F(SqliteStoreTest, APutIsReadBackAndADeleteRemovesIt) {
  Apply(Puts({{"job/1", "{\"gpus\":8}"}, {"job/2", "{}"}}));
  EXPECT_EQ(Get("job/1"), "{\"gpus\":8}");
  EXPECT_EQ(Get("job/2"), "{}");

  StoreBatch del;
  del.Delete("job/1");
  Apply(del);
  EXPECT_EQ(Get("job/1"), std::nullopt);
  EXPECT_EQ(Get("job/2"), "{}");
}

TEST_F(SqliteStoreTest, APutOverwritesTheOldValue) {
  Apply(Puts({{"k", "old"}}));
  Apply(Puts({{"k", "new"}}));
  EXPECT_EQ(Get("k"), "new");
}

TEST_F(SqliteStoreTest, GettingAnAbsentKeyIsNulloptNotAnError) {
  EXPECT_EQ(Get("never/written"), std::nullopt);
}

TEST_F(SqliteStoreTest, DeletingAnAbsentKeyAndApplyingAnEmptyBatchAreFine) {
  StoreBatch del;
  del.Delete("absent");
  Apply(del);
  Apply(StoreBatch{});
  EXPECT_TRUE(Scan("").empty());
}

TEST_F(SqliteStoreTest, ALaterChangeInABatchWinsOverAnEarlierOneToTheSameKey) {
  StoreBatch b;
  b.Put("rewritten", "1");
  b.Delete("rewritten");
  b.Put("rewritten", "2");
  b.Put("put-then-deleted", "x");
  b.Delete("put-then-deleted");
  Apply(b);
  EXPECT_EQ(Get("rewritten"), "2");
  EXPECT_EQ(Get("put-then-deleted"), std::nullopt);
}

TEST_F(SqliteStoreTest, ValuesAreArbitraryBytesIncludingNul) {
  std::string every_byte;
  for (int i = 0; i < 256; ++i) every_byte.push_back(static_cast<char>(i));
  const std::string nul_inside("a\0b\0\0c", 6);
  const std::string only_nul(3, '\0');
  Apply(Puts({{"every-byte", every_byte}, {"nul-inside", nul_inside}, {"only-nul", only_nul}}));

  EXPECT_EQ(Get("every-byte"), every_byte);
  EXPECT_EQ(Get("nul-inside"), nul_inside);
  EXPECT_EQ(Get("only-nul"), only_nul);
  EXPECT_EQ(Scan(""), (KeyValues{{"every-byte", every_byte}, {"nul-inside", nul_inside}, {"only-nul", only_nul}}));
}

TEST_F(SqliteStoreTest, AnEmptyValueIsStoredAndIsNotADelete) {
  Apply(Puts({{"empty", ""}}));
  EXPECT_EQ(Get("empty"), std::string());
  EXPECT_EQ(Scan(""), (KeyValues{{"empty", ""}}));
}

TEST_F(SqliteStoreTest, ABatchWithAKeyContainingNulIsRejectedAndChangesNothing) {
  StoreBatch b;
  b.Put("fine", "1");
  b.Put(std::string("bad\0key", 7), "2");
  const Status st = store().Apply(b);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  EXPECT_NE(st.message().find("NUL"), std::string::npos) << st.ToString();
  EXPECT_TRUE(Scan("").empty());
  // Such a key can never be stored, so reading it finds nothing.
  EXPECT_EQ(Get(std::string("bad\0key", 7)), std::nullopt);
  EXPECT_TRUE(Scan(std::string("bad\0", 4)).empty());
}

// --- Scans -------------------------------------------------------------------------------------

TEST_F(SqliteStoreTest, AScanVisitsExactlyTheKeysWithThePrefixInBytewiseOrder) {
  // Written out of order; "job0" and "jo" share bytes with the prefix but do not start with it.
  Apply(Puts({{"job/b", "2"},
              {"node/1", "n"},
              {"job/a", "1"},
              {"job/\xc3\xa9", "e-acute"},  // UTF-8 "é": 0xC3 sorts after '~' (0x7E)
              {"job/~", "tilde"},
              {"job/B", "upper"},
              {"job0", "x"},
              {"jo", "y"}}));
  EXPECT_EQ(Scan("job/"), (KeyValues{{"job/B", "upper"},
                                     {"job/a", "1"},
                                     {"job/b", "2"},
                                     {"job/~", "tilde"},
                                     {"job/\xc3\xa9", "e-acute"}}));
  EXPECT_EQ(Scan("node/"), (KeyValues{{"node/1", "n"}}));
  EXPECT_TRUE(Scan("pod/").empty());
}

TEST_F(SqliteStoreTest, AScanWithTheEmptyPrefixVisitsEveryKeyInOrder) {
  Apply(Puts({{"b", "2"}, {"\xff", "ff"}, {"a", "1"}, {"\x01", "one"}}));
  EXPECT_EQ(Scan(""), (KeyValues{{"\x01", "one"}, {"a", "1"}, {"b", "2"}, {"\xff", "ff"}}));
}

TEST_F(SqliteStoreTest, AScanStopsAsSoonAsTheCallbackReturnsFalse) {
  Apply(Puts({{"k/1", "1"}, {"k/2", "2"}, {"k/3", "3"}, {"k/4", "4"}}));
  EXPECT_EQ(Scan("k/", 2), (KeyValues{{"k/1", "1"}, {"k/2", "2"}}));
  // The stopped scan left nothing open: writes and full scans still work.
  Apply(Puts({{"k/5", "5"}}));
  EXPECT_EQ(Scan("k/").size(), 5u);
}

TEST_F(SqliteStoreTest, AScanWithAPrefixEndingIn0xFFBytesFindsItsKeysAndNoOthers) {
  Apply(Puts({{"a\xfe", "before"},
              {"a\xff", "p"},
              {"a\xff\x01", "p1"},
              {"a\xff\xff", "pff"},
              {"a\xff\xff\xff", "pfff"},
              {"b", "after"},
              {"\xff\xff", "top"},
              {"\xff\xff\x7f", "top7f"}}));
  EXPECT_EQ(Scan("a\xff"),
            (KeyValues{{"a\xff", "p"}, {"a\xff\x01", "p1"}, {"a\xff\xff", "pff"}, {"a\xff\xff\xff", "pfff"}}));
  EXPECT_EQ(Scan("a\xff\xff"), (KeyValues{{"a\xff\xff", "pff"}, {"a\xff\xff\xff", "pfff"}}));
  // A prefix of only 0xFF bytes has no successor: the scan runs to the end of the key space.
  EXPECT_EQ(Scan("\xff\xff"), (KeyValues{{"\xff\xff", "top"}, {"\xff\xff\x7f", "top7f"}}));
}

// --- All-or-nothing batches --------------------------------------------------------------------

// A trigger planted through a second connection makes a chosen statement of a batch fail
// (SQLite's documented RAISE mechanism): ABORT fails the statement and leaves the transaction to
// the store, ROLLBACK makes SQLite roll the transaction back itself.
TEST_F(SqliteStoreTest, ABatchWhoseLaterChangeFailsLeavesNothingBehind) {
  struct Case {
    const char* name;
    const char* trigger;
    bool poison_is_delete;
  };
  const Case kCases[] = {
      {"a put failing with RAISE(ABORT) rolls back the changes before it",
       "CREATE TRIGGER poison BEFORE INSERT ON kv WHEN NEW.key = 'poison' BEGIN SELECT RAISE(ABORT, 'poisoned'); END",
       false},
      {"a put failing with RAISE(ROLLBACK) (SQLite rolls back itself) leaves nothing either",
       "CREATE TRIGGER poison BEFORE INSERT ON kv WHEN NEW.key = 'poison' BEGIN SELECT RAISE(ROLLBACK, 'poisoned'); "
       "END",
       false},
      {"a failing delete rolls back the puts before it",
       "CREATE TRIGGER poison BEFORE DELETE ON kv WHEN OLD.key = 'poison' BEGIN SELECT RAISE(ABORT, 'poisoned'); END",
       true},
  };
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.name);
    Reopen();
    RawExec(DbPath(), "DROP TRIGGER IF EXISTS poison; DELETE FROM kv;");
    Apply(Puts({{"kept", "before"}, {"poison", "p"}}));
    RawExec(DbPath(), c.trigger);

    StoreBatch b;
    b.Put("new/1", "1");
    b.Put("kept", "overwritten");
    b.Delete("new/1");
    b.Put("new/2", "2");
    if (c.poison_is_delete) {
      b.Delete("poison");
    } else {
      b.Put("poison", "again");
    }
    b.Put("new/3", "never reached");
    const Status st = store().Apply(b);
    EXPECT_EQ(st.code(), StatusCode::kInternal) << st.ToString();
    EXPECT_NE(st.message().find("poisoned"), std::string::npos) << st.ToString();
    EXPECT_NE(st.message().find(DbPath()), std::string::npos) << st.ToString();
    EXPECT_EQ(Scan(""), (KeyValues{{"kept", "before"}, {"poison", "p"}}));

    // The store is still usable: the next batch commits.
    Apply(Puts({{"after", "ok"}}));
    EXPECT_EQ(Get("after"), "ok");
    RawExec(DbPath(), "DROP TRIGGER poison");
  }
}

// --- Reopening and bad files -------------------------------------------------------------------

TEST_F(SqliteStoreTest, AReopenedStoreSeesEveryCommittedChange) {
  KeyValues expected;
  for (int i = 0; i < 100; ++i) {
    char key[32];
    std::snprintf(key, sizeof key, "job/%04d", i);
    StoreBatch b;
    b.Put(key, std::string(static_cast<size_t>(i), '\0') + std::to_string(i));
    if (i % 3 == 0) b.Delete(key);
    Apply(b);
    if (i % 3 != 0) expected.emplace_back(key, std::string(static_cast<size_t>(i), '\0') + std::to_string(i));
  }
  Close();
  Reopen();
  EXPECT_EQ(Scan(""), expected);
  Reopen(SqliteOptions{.synchronous_normal = true});
  EXPECT_EQ(Scan(""), expected);
}

TEST_F(SqliteStoreTest, ANewDatabaseIsInWalModeWithSchemaVersion1) {
  Apply(Puts({{"k", "v"}}));
  EXPECT_EQ(RawQuery(DbPath(), "PRAGMA journal_mode"), "wal");
  EXPECT_EQ(RawQuery(DbPath(), "SELECT value FROM meta WHERE name = 'schema_version'"), "1");
  EXPECT_EQ(store().path(), DbPath());
}

TEST_F(SqliteStoreTest, OpenCreatesTheDirectoryAndItsMissingParents) {
  const std::string dir = tmp_.Sub("a/b/c");
  auto opened = SqliteStore::Open(dir);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  EXPECT_TRUE(std::filesystem::is_regular_file(dir + "/estuary.db"));
}

TEST_F(SqliteStoreTest, OpeningAFileThatIsNotADatabaseFailsNamingThePath) {
  std::filesystem::create_directories(StoreDir());
  {
    std::ofstream junk(DbPath(), std::ios::binary);
    for (int i = 0; i < 200; ++i) junk << "this is a scheduler log, not a database\n";
  }
  auto opened = SqliteStore::Open(StoreDir());
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().code(), StatusCode::kInvalidArgument) << opened.status().ToString();
  EXPECT_NE(opened.status().message().find(DbPath()), std::string::npos) << opened.status().ToString();
  EXPECT_NE(opened.status().message().find("not an SQLite database"), std::string::npos)
      << opened.status().ToString();
}

TEST_F(SqliteStoreTest, OpeningAnotherProgramsSqliteDatabaseFailsNamingThePath) {
  std::filesystem::create_directories(StoreDir());
  RawExec(DbPath(), "CREATE TABLE users(id INTEGER PRIMARY KEY)");
  auto opened = SqliteStore::Open(StoreDir());
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().code(), StatusCode::kInvalidArgument) << opened.status().ToString();
  EXPECT_NE(opened.status().message().find(DbPath()), std::string::npos) << opened.status().ToString();
  EXPECT_NE(opened.status().message().find("not an estuary database"), std::string::npos)
      << opened.status().ToString();
}

TEST_F(SqliteStoreTest, OpeningADatabaseWithAnUnknownSchemaVersionFailsNamingPathAndVersion) {
  Apply(Puts({{"k", "v"}}));
  Close();
  RawExec(DbPath(), "UPDATE meta SET value = '2' WHERE name = 'schema_version'");
  auto opened = SqliteStore::Open(StoreDir());
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().code(), StatusCode::kInvalidArgument) << opened.status().ToString();
  EXPECT_NE(opened.status().message().find(DbPath()), std::string::npos) << opened.status().ToString();
  EXPECT_NE(opened.status().message().find("unknown schema version '2'"), std::string::npos)
      << opened.status().ToString();
}

TEST_F(SqliteStoreTest, OpeningADirectoryUnderARegularFileFailsNamingIt) {
  const std::string file = tmp_.Sub("plain-file");
  std::ofstream(file) << "x";
  const std::string dir = file + "/state";
  auto opened = SqliteStore::Open(dir);
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().code(), StatusCode::kInvalidArgument) << opened.status().ToString();
  EXPECT_NE(opened.status().message().find(dir), std::string::npos) << opened.status().ToString();

  // The directory itself being a regular file fails the same way.
  auto on_file = SqliteStore::Open(file);
  ASSERT_FALSE(on_file.ok());
  EXPECT_EQ(on_file.status().code(), StatusCode::kInvalidArgument) << on_file.status().ToString();
  EXPECT_NE(on_file.status().message().find(file), std::string::npos) << on_file.status().ToString();
}

// --- Threads -----------------------------------------------------------------------------------

TEST_F(SqliteStoreTest, BatchesFromSeveralThreadsAllLandWhole) {
  Reopen(SqliteOptions{.synchronous_normal = true});
  constexpr int kThreads = 4;
  constexpr int kBatchesPerThread = 50;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([this, t] {
      for (int i = 0; i < kBatchesPerThread; ++i) {
        const std::string n = std::to_string(t) + "/" + std::to_string(i);
        EXPECT_TRUE(store().Apply(Puts({{"x/" + n, n}, {"y/" + n, n}})).ok());
        EXPECT_EQ(*store().Get("x/" + n), n);
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(Scan("x/").size(), size_t{kThreads * kBatchesPerThread});
  EXPECT_EQ(Scan("y/").size(), size_t{kThreads * kBatchesPerThread});
}

// --- Crashes -----------------------------------------------------------------------------------

std::string BatchNumber(uint64_t n) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%010llu", static_cast<unsigned long long>(n));
  return buf;
}

// The child side of the crash test: applies batches first, first+1, ... (each puts "a/N", "b/N",
// "c/N" = N) and writes N to `ack_fd` after each one that returned OK, until it is killed.
[[noreturn]] void WriteBatchesUntilKilled(const std::string& dir, SqliteOptions options, uint64_t first,
                                          int ack_fd) {
  auto opened = SqliteStore::Open(dir, options);
  if (!opened.ok()) ::_exit(3);
  SqliteStore& store = **opened;
  for (uint64_t n = first;; ++n) {
    const std::string num = BatchNumber(n);
    if (!store.Apply(Puts({{"a/" + num, num}, {"b/" + num, num}, {"c/" + num, num}})).ok()) ::_exit(4);
    if (::write(ack_fd, &n, sizeof n) != static_cast<ssize_t>(sizeof n)) ::_exit(5);
  }
}

// How long a crash round lets the writer run before killing it.
struct CrashRoundLength {
  size_t min_acks = 500;                    // kill once this many batches were acknowledged
  std::chrono::milliseconds min_run{300};   // ... and at least this much time passed,
  std::chrono::milliseconds max_run{2000};  // or once this much passed (fsync speed varies a lot)
  size_t required_acks = 50;                // fewer acknowledgements by then fail the test
};

// One crash round: forks a writer from batch `first` on, reads its acknowledgements for as long as
// `length` says, kills it with SIGKILL, then reopens the store and checks the durability contract.
// Returns the highest batch present (the next round's first - 1).
uint64_t CrashRound(const std::string& dir, SqliteOptions options, uint64_t first, const CrashRoundLength& length) {
  int fds[2];
  if (::pipe(fds) != 0) {
    ADD_FAILURE() << "pipe: " << std::strerror(errno);
    return 0;
  }
  std::fflush(nullptr);
  const pid_t child = ::fork();
  if (child < 0) {
    ADD_FAILURE() << "fork: " << std::strerror(errno);
    return 0;
  }
  if (child == 0) {
    ::close(fds[0]);
    WriteBatchesUntilKilled(dir, options, first, fds[1]);
  }
  ::close(fds[1]);

  // Acknowledgements, in order; an 8-byte write to a pipe is atomic, but reads may split them.
  std::vector<uint64_t> acks;
  std::string pending;
  auto consume = [&](const char* data, size_t len) {
    pending.append(data, len);
    size_t off = 0;
    for (; pending.size() - off >= sizeof(uint64_t); off += sizeof(uint64_t)) {
      uint64_t n;
      std::memcpy(&n, pending.data() + off, sizeof n);
      acks.push_back(n);
    }
    pending.erase(0, off);
  };
  const auto start = std::chrono::steady_clock::now();
  char buf[4096];
  while (true) {
    const auto ran = std::chrono::steady_clock::now() - start;
    if ((acks.size() >= length.min_acks && ran >= length.min_run) || ran >= length.max_run) break;
    pollfd pfd{fds[0], POLLIN, 0};
    if (::poll(&pfd, 1, 50) <= 0) continue;
    const ssize_t got = ::read(fds[0], buf, sizeof buf);
    if (got <= 0) break;  // the writer died by itself; waitpid below reports how
    consume(buf, static_cast<size_t>(got));
  }
  ::kill(child, SIGKILL);
  int wstatus = 0;
  EXPECT_EQ(::waitpid(child, &wstatus, 0), child);
  EXPECT_TRUE(WIFSIGNALED(wstatus) && WTERMSIG(wstatus) == SIGKILL)
      << "the writer ended by itself, exit code " << (WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1);
  // Acknowledgements still in the pipe count too: each was written after its Apply returned OK.
  for (ssize_t got; (got = ::read(fds[0], buf, sizeof buf)) > 0;) consume(buf, static_cast<size_t>(got));
  ::close(fds[0]);
  EXPECT_TRUE(pending.empty());
  EXPECT_GE(acks.size(), length.required_acks) << "the writer barely progressed before it was killed";
  for (size_t i = 0; i < acks.size(); ++i) EXPECT_EQ(acks[i], first + i) << "acknowledgement " << i;
  const uint64_t last_ack = acks.empty() ? first - 1 : acks.back();

  // What survived: batch number -> which of its three keys are present.
  auto reopened = SqliteStore::Open(dir, options);
  if (!reopened.ok()) {
    ADD_FAILURE() << reopened.status().ToString();
    return 0;
  }
  std::map<uint64_t, std::string> present;
  const Status st = (*reopened)->Scan("", [&](std::string_view key, std::string_view value) {
    const std::string_view num = key.substr(2);
    EXPECT_EQ(value, num) << key;
    present[std::stoull(std::string(num))].push_back(key[0]);
    return true;
  });
  EXPECT_TRUE(st.ok()) << st.ToString();
  for (uint64_t n = 1; n <= last_ack; ++n) {
    auto it = present.find(n);
    EXPECT_TRUE(it != present.end() && it->second == "abc") << "acknowledged batch " << n << " is missing or torn";
  }
  for (const auto& [n, keys] : present) {
    EXPECT_EQ(keys, "abc") << "batch " << n << " is torn";
    EXPECT_LE(n, last_ack + 1) << "batch " << n << " is present but more than one past the last acknowledged";
  }
  return present.empty() ? 0 : present.rbegin()->first;
}

// Four rounds, each resuming from what the previous one left, so recovery from a crash is also
// crashed into.
void ExpectKilledWritersLoseNothingAcknowledgedAndTearNothing(SqliteOptions options) {
  TempDir tmp;
  const std::string dir = tmp.Sub("state");
  uint64_t last = 0;
  for (int round = 0; round < 4; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    last = CrashRound(dir, options, last + 1, CrashRoundLength{});
    if (::testing::Test::HasFailure()) return;
  }
  std::printf("[          ] %s: %llu batches survived four kills\n",
              options.synchronous_normal ? "synchronous=NORMAL" : "synchronous=FULL",
              static_cast<unsigned long long>(last));
}

TEST(SqliteStoreCrash, AWriterKilledWithSigkillLosesNoAcknowledgedBatchAndTearsNoneWithSynchronousFull) {
  ExpectKilledWritersLoseNothingAcknowledgedAndTearNothing(SqliteOptions{.synchronous_normal = false});
}

TEST(SqliteStoreCrash, AWriterKilledWithSigkillLosesNoAcknowledgedBatchAndTearsNoneWithSynchronousNormal) {
  ExpectKilledWritersLoseNothingAcknowledgedAndTearNothing(SqliteOptions{.synchronous_normal = true});
}

}  // namespace
}  // namespace estuary
