// PostgresStore: the Store on a PostgreSQL database (libpq), for pools that outgrow one coordinator
// machine: several coordinators open the same database, and the one holding the lease writes.
//
// Rules:
// - The schema is versioned in `gpupool_schema(version)` and migrated forward on open, in one
//   transaction under a transaction-scoped advisory lock (two coordinators opening a fresh database
//   at once create it once); a database from a newer gpupool is refused rather than damaged.
// - Every call is one transaction; every write transaction first runs gpupool_fence(epoch), which
//   takes the lease row FOR SHARE and raises when the lease has moved on: a fenced write is
//   ErrorCode::conflict with the field "lease" (store::is_fenced) and commits nothing. A store that
//   never took the lease writes only while nobody holds it (tools run while no coordinator does).
//   Taking the lease updates that row, so it waits for the writes in flight of the old epoch.
// - The lease's times are the database's clock (clock_timestamp()), never a coordinator's.
// - Blobs go in and out in pieces of about a MiB (chunk tables), never whole on the way in.
// - A libpq failure is ErrorCode::io naming what failed, never an exception, and never carries the
//   password. A broken connection is reset once (PQreset) at the next call before the call fails.
// - `snapshot`: read-only; every read sees one moment (a REPEATABLE READ READ ONLY transaction held
//   for the store's life); writes are refused. backup() reads the pool through such a store.
// Not thread-safe: one owner thread (backup() opens connections of its own and may run beside it).
#pragma once

#include "core/store/store.hpp"

#include <cstdint>
#include <memory>
#include <string>

namespace gpupool::store {

inline constexpr int k_postgres_schema_version = 4;

// The same cap as SQLite's, so that any pool fits a SQLite backup file.
inline constexpr std::int64_t k_postgres_max_blob_bytes = 950'000'000;

struct PostgresOptions {
    bool create = true;   // false: a database without the pool's tables is ErrorCode::not_found
    std::string password; // when set, passed as libpq's `password`; empty: libpq's own (PGPASSWORD, ~/.pgpass)
    std::int64_t max_blob_bytes = k_postgres_max_blob_bytes; // lower only (tests of the cap)
    bool snapshot = false;                                   // read-only, every read at one moment (see above)
};

namespace pg {
class Connection;
}

class PostgresStore final : public Store {
public:
    // Connects to `url` (a libpq URL or key=value string) and migrates its schema.
    static Result<std::unique_ptr<PostgresStore>> open(const std::string& url, const PostgresOptions& options = {});
    ~PostgresStore() override;

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
    bool shared() const override { return true; }
    Result<LeaseState> acquire_lease(const LeaseClaim& claim) override;
    Status renew_lease(std::int64_t ttl_ms) override;
    Status release_lease() override;
    Result<LeaseState> read_lease() override;

    // The database's schema version (0 when it cannot be read).
    int schema_version() const;

private:
    PostgresStore(std::unique_ptr<pg::Connection> db, std::string url, const PostgresOptions& options);

    std::unique_ptr<pg::Connection> m_db;
    std::string m_url;      // backup() opens its own snapshot store on it
    std::string m_password; // likewise; never in a message
    std::int64_t m_max_blob_bytes = k_postgres_max_blob_bytes;
    bool m_snapshot = false;
    std::int64_t m_epoch = 0; // the lease epoch this store writes under; 0: it never took the lease
};

} // namespace gpupool::store
