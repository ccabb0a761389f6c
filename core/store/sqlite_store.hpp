// SqliteStore: the embedded default Store, one SQLite file through SQLiteCpp.
//
// WAL journal, synchronous=FULL (a committed transaction survives power loss), foreign keys on,
// a busy timeout; the log is copied back into the database on a thread of its own (WalCheckpointer)
// so that commits do not stop to do it. The schema is versioned with PRAGMA user_version and
// migrated forward on open; a file from a newer gpupool is refused rather than damaged. The file is
// created 0600 (so are its -wal and -shm files). Opened with `lock`, it holds `<path>.lock` for as
// long as it is open, so one process at a time uses the file (the coordinator, or its admin-token
// recovery while it is stopped); the lock goes with the process, however it ends. Not thread-safe:
// one owner thread. It groups writes (GroupCommit): inside a group each write call is a savepoint
// of one transaction.
#pragma once

#include "core/store/group_commit.hpp"
#include "core/store/store.hpp"
#include "core/store/wal_checkpointer.hpp"
#include "core/util/files.hpp"

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>

namespace SQLite {
class Database;
}

namespace gpupool::store {

inline constexpr int k_schema_version = 12;

// SQLite keeps a blob under 1e9 bytes (SQLITE_MAX_LENGTH); the store takes no more than this.
inline constexpr std::int64_t k_sqlite_max_blob_bytes = 950'000'000;

struct SqliteOptions {
    bool lock = false;   // hold `<path>.lock` while open (lock_database); held elsewhere: ErrorCode::unavailable
    bool create = true;  // false: a missing file is not_found instead of a new pool
    std::int64_t max_blob_bytes = k_sqlite_max_blob_bytes; // lower only (tests of the cap)
    // How long after a commit the background checkpoint runs (wal_checkpointer.hpp); zero: none, SQLite's
    // own automatic checkpoint on the committing thread.
    std::chrono::milliseconds checkpoint_delay = k_checkpoint_delay;
};

class SqliteStore final : public Store, public GroupCommit {
public:
    // Opens (creating if needed) and migrates the database at `path`.
    static Result<std::unique_ptr<SqliteStore>> open(const std::filesystem::path& path,
                                                     const SqliteOptions& options = {});
    ~SqliteStore() override;

    Result<Snapshot> load() override;
    Status apply(const Changes& changes) override;
    Result<std::int64_t> reserve_ids(IdKind kind, std::int64_t count) override;
    Result<LogAppend> append_log(AttemptId attempt, std::int64_t offset, std::string_view data) override;
    Result<std::string> read_log(AttemptId attempt, std::int64_t offset, std::int64_t max_bytes) override;
    Result<std::int64_t> log_length(AttemptId attempt) override;
    Status drop_log_range(AttemptId attempt, std::int64_t from, std::int64_t to) override;
    Result<std::optional<std::int64_t>> log_resume_offset(AttemptId attempt, std::int64_t offset) override;
    Result<std::vector<LogRange>> log_ranges(AttemptId attempt) override;
    Status put_output(AttemptId attempt, const std::filesystem::path& file, std::string_view sha256_hex) override;
    Result<std::optional<std::string>> get_output(AttemptId attempt) override;
    Status put_input_blob(TeamId team, std::string_view sha256_hex, const std::filesystem::path& file,
                          std::int64_t now) override;
    Result<std::optional<std::int64_t>> input_blob_size(TeamId team, std::string_view sha256_hex) override;
    Result<std::optional<std::string>> get_input_blob(TeamId team, std::string_view sha256_hex) override;
    std::int64_t max_blob_bytes() const override;
    Result<std::vector<AuditRecord>> read_audit(const AuditQuery& query) override;
    Result<std::vector<Sample>> read_samples(std::int64_t since_ms, std::int64_t limit) override;
    Result<std::vector<EvidenceRecord>> read_evidence(AttemptId attempt) override;
    Result<std::int64_t> prune_samples(std::int64_t before_ms) override;
    Status backup(const std::filesystem::path& to) override;
    Result<std::vector<InputBlobRef>> list_input_blobs() override;
    bool shared() const override { return false; }
    Result<LeaseState> acquire_lease(const LeaseClaim& claim) override;
    Status renew_lease(std::int64_t ttl_ms) override;
    Status release_lease() override;
    Result<LeaseState> read_lease() override;

    Status begin_group() override;
    Status end_group() override;
    void abandon_group() override;
    bool group_open() const override { return m_group; }

    int schema_version() const;
    // The background checkpointer's counts (all zero when it is off).
    WalCheckpointer::Stats checkpoint_stats() const;

private:
    SqliteStore(std::unique_ptr<SQLite::Database> db, std::filesystem::path path, std::int64_t max_blob_bytes);

    std::optional<util::FileLock> m_lock{}; // declared first: released after m_db has closed
    std::unique_ptr<SQLite::Database> m_db;
    std::filesystem::path m_path; // backup() opens its own connection to it
    std::int64_t m_max_blob_bytes = k_sqlite_max_blob_bytes;
    LeaseState m_lease{}; // in memory: the file's lock makes this process the only writer
    std::chrono::steady_clock::time_point m_lease_renewed{};
    bool m_group = false; // begin_group() .. end_group(): every write call is a savepoint
    std::unique_ptr<WalCheckpointer> m_checkpointer; // the destructor removes m_db's hook first
};

// The lock that lets one process at a time use a SQLite pool database (`<db>.lock`): the
// coordinator holds it while it runs; `coordinator --new-admin-token` needs it too, so it runs only
// while the coordinator is stopped. Held by another process, it is ErrorCode::unavailable (busy: it
// works once that process stops), never conflict, which the CLI reads as a refusal a flag overrides.
Result<util::FileLock> lock_database(const std::filesystem::path& db_path);

} // namespace gpupool::store
