// SqliteStore: the embedded default Store, one SQLite file through SQLiteCpp.
//
// WAL journal, synchronous=FULL (a committed transaction survives power loss), foreign keys on,
// a busy timeout. The schema is versioned with PRAGMA user_version and migrated forward on open;
// a file from a newer gpupool is refused rather than damaged. The file is created 0600 (so are its
// -wal and -shm files). Not thread-safe: one owner thread.
#pragma once

#include "core/store/store.hpp"

#include <filesystem>
#include <memory>

namespace SQLite {
class Database;
}

namespace gpupool::store {

inline constexpr int k_schema_version = 6;

class SqliteStore final : public Store {
public:
    // Opens (creating if needed) and migrates the database at `path`.
    static Result<std::unique_ptr<SqliteStore>> open(const std::filesystem::path& path);
    ~SqliteStore() override;

    Result<Snapshot> load() override;
    Status apply(const Changes& changes) override;
    Result<LogAppend> append_log(AttemptId attempt, std::int64_t offset, std::string_view data) override;
    Result<std::string> read_log(AttemptId attempt, std::int64_t offset, std::int64_t max_bytes) override;
    Result<std::int64_t> log_length(AttemptId attempt) override;
    Status drop_log_range(AttemptId attempt, std::int64_t from, std::int64_t to) override;
    Result<std::optional<std::int64_t>> log_resume_offset(AttemptId attempt, std::int64_t offset) override;
    Status put_output(AttemptId attempt, const std::filesystem::path& file, std::string_view sha256_hex) override;
    Result<std::optional<std::string>> get_output(AttemptId attempt) override;
    Status put_input_blob(TeamId team, std::string_view sha256_hex, const std::filesystem::path& file,
                          std::int64_t now) override;
    Result<std::optional<std::int64_t>> input_blob_size(TeamId team, std::string_view sha256_hex) override;
    Result<std::optional<std::string>> get_input_blob(TeamId team, std::string_view sha256_hex) override;

    int schema_version() const;

private:
    explicit SqliteStore(std::unique_ptr<SQLite::Database> db);
    Status migrate();

    std::unique_ptr<SQLite::Database> m_db;
};

} // namespace gpupool::store
