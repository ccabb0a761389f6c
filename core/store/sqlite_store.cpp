// SqliteStore: opening, locking, logs and blobs. The schema is in sqlite_schema.cpp, the records'
// rows in sqlite_records.cpp.
#include "core/store/sqlite_store.hpp"

#include "core/store/blob_files.hpp"
#include "core/store/sqlite_internal.hpp"
#include "core/util/files.hpp"

#include <SQLiteCpp/Backup.h>
#include <SQLiteCpp/SQLiteCpp.h>

#include <algorithm>
#include <fstream>
#include <memory>
#include <sqlite3.h>
#include <stdexcept>

namespace gpupool::store {

using sqlite::db_error;

namespace sqlite {

Error db_error(const std::string& what, const std::exception& e) {
    return make_error(ErrorCode::io, "database: " + what + ": " + e.what());
}

} // namespace sqlite

namespace {

// Fills the zeroblob in `table`.data at `rowid` from `file`, a megabyte at a time (SQLite's
// incremental blob I/O), so an upload never sits whole in memory. Throws on failure; the caller's
// transaction then rolls back.
void write_blob_from_file(SQLite::Database& db, const char* table, std::int64_t rowid,
                          const std::filesystem::path& file, std::int64_t size) {
    sqlite3_blob* blob = nullptr;
    if (sqlite3_blob_open(db.getHandle(), "main", table, "data", rowid, 1, &blob) != SQLITE_OK) {
        sqlite3_blob_close(blob);
        throw std::runtime_error(std::string("cannot open the blob: ") + sqlite3_errmsg(db.getHandle()));
    }
    std::unique_ptr<sqlite3_blob, int (*)(sqlite3_blob*)> guard(blob, sqlite3_blob_close);
    std::ifstream in(file, std::ios::binary);
    std::vector<char> buf(std::size_t{1} << 20);
    std::int64_t offset = 0;
    while (offset < size && in) {
        in.read(buf.data(), static_cast<std::streamsize>(std::min<std::int64_t>(size - offset, static_cast<std::int64_t>(buf.size()))));
        const auto n = static_cast<int>(in.gcount());
        if (n <= 0) {
            break;
        }
        if (sqlite3_blob_write(blob, buf.data(), n, static_cast<int>(offset)) != SQLITE_OK) {
            throw std::runtime_error(std::string("cannot write the blob: ") + sqlite3_errmsg(db.getHandle()));
        }
        offset += n;
    }
    if (offset != size) {
        throw std::runtime_error("could not read all of " + file.string());
    }
}

// The first row's first column as bytes, or nothing when there is no row.
std::optional<std::string> first_blob(SQLite::Statement& q) {
    if (!q.executeStep()) {
        return std::nullopt;
    }
    const auto& col = q.getColumn(0);
    return std::string(static_cast<const char*>(col.getBlob()), static_cast<std::size_t>(col.getBytes()));
}

// One write call's transaction: BEGIN ... COMMIT of its own, or, inside an open group, a savepoint
// of the group's transaction, released on success. Left without commit(), it rolls back what the call
// wrote (and only that). After a failure SQLite may have rolled the whole group back (a full disk, an
// I/O error): later calls in that group fail rather than write outside it.
class WriteScope {
public:
    WriteScope(SQLite::Database& db, bool in_group) : m_db(db), m_nested(in_group) {
        if (m_nested && sqlite3_get_autocommit(m_db.getHandle()) != 0) {
            throw std::runtime_error("the group's transaction was rolled back by an earlier failure");
        }
        m_db.exec(m_nested ? "SAVEPOINT write_call" : "BEGIN");
    }
    WriteScope(const WriteScope&) = delete;
    WriteScope& operator=(const WriteScope&) = delete;
    ~WriteScope() {
        if (m_done || sqlite3_get_autocommit(m_db.getHandle()) != 0) {
            return; // committed, or SQLite rolled it back already
        }
        try {
            m_db.exec(m_nested ? "ROLLBACK TO write_call; RELEASE write_call" : "ROLLBACK");
        } catch (const std::exception&) { // NOLINT(bugprone-empty-catch): the call's own error is reported
        }
    }
    void commit() {
        m_db.exec(m_nested ? "RELEASE write_call" : "COMMIT");
        m_done = true;
    }

private:
    SQLite::Database& m_db;
    bool m_nested;
    bool m_done = false;
};

} // namespace

Result<util::FileLock> lock_database(const std::filesystem::path& db_path) {
    auto lock = util::FileLock::acquire(db_path.string() + ".lock");
    if (!lock && lock.error().code == ErrorCode::conflict) {
        // Busy, not contradictory: it works once the other process stops (every command exits 1).
        return make_error(ErrorCode::unavailable, "another gpupool coordinator is using " + db_path.string() +
                                                   " (it holds " + db_path.string() + ".lock); stop it first");
    }
    return lock;
}

SqliteStore::SqliteStore(std::unique_ptr<SQLite::Database> db, std::filesystem::path path, std::int64_t max_blob_bytes)
    : m_db(std::move(db)), m_path(std::move(path)), m_max_blob_bytes(max_blob_bytes) {}

SqliteStore::~SqliteStore() {
    abandon_group();
    if (m_checkpointer) {
        sqlite3_wal_hook(m_db->getHandle(), nullptr, nullptr);
        m_checkpointer.reset(); // before m_db closes: the last connection out removes the log
    }
}

WalCheckpointer::Stats SqliteStore::checkpoint_stats() const {
    return m_checkpointer ? m_checkpointer->stats() : WalCheckpointer::Stats{};
}

// ---- GroupCommit ---------------------------------------------------------------------------------

Status SqliteStore::begin_group() {
    if (m_group) {
        return make_error(ErrorCode::conflict, "a group of writes is open already");
    }
    try {
        m_db->exec("BEGIN");
        m_group = true;
        return {};
    } catch (const std::exception& e) {
        return db_error("cannot begin a group of writes", e);
    }
}

Status SqliteStore::end_group() {
    if (!m_group) {
        return make_error(ErrorCode::conflict, "no group of writes is open");
    }
    m_group = false;
    if (sqlite3_get_autocommit(m_db->getHandle()) != 0) {
        return make_error(ErrorCode::io, "database: a failure rolled the group of writes back; none of them is stored");
    }
    try {
        m_db->exec("COMMIT");
        return {};
    } catch (const std::exception& e) {
        if (sqlite3_get_autocommit(m_db->getHandle()) == 0) {
            try {
                m_db->exec("ROLLBACK");
            } catch (const std::exception&) { // NOLINT(bugprone-empty-catch): closing drops it all the same
            }
        }
        return db_error("the group of writes could not be committed; none of them is stored", e);
    }
}

void SqliteStore::abandon_group() {
    if (!m_group) {
        return;
    }
    m_group = false;
    if (sqlite3_get_autocommit(m_db->getHandle()) == 0) {
        try {
            m_db->exec("ROLLBACK");
        } catch (const std::exception&) { // NOLINT(bugprone-empty-catch): closing drops it all the same
        }
    }
}

Result<std::unique_ptr<SqliteStore>> SqliteStore::open(const std::filesystem::path& path,
                                                       const SqliteOptions& options) {
    std::optional<util::FileLock> lock;
    if (options.lock) {
        auto held = lock_database(path);
        if (!held) {
            return held.error();
        }
        lock.emplace(std::move(*held));
    }
    if (!options.create && !std::filesystem::exists(path)) {
        return make_error(ErrorCode::not_found, "no pool database at " + path.string());
    }
    // The store holds token hashes, the ledger and the teams' input archives: 0600 before SQLite
    // opens it (which would use the umask's mode), and SQLite gives its -wal and -shm files the
    // database's mode.
    if (auto st = util::create_private_file(path); !st) {
        return st.error();
    }
    try {
        auto db = std::make_unique<SQLite::Database>(path.string(), SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
        db->setBusyTimeout(5000);
        db->exec("PRAGMA journal_mode=WAL");
        db->exec("PRAGMA synchronous=FULL");
        db->exec("PRAGMA foreign_keys=ON");
        const std::int64_t max_blob = std::min(options.max_blob_bytes, k_sqlite_max_blob_bytes);
        std::unique_ptr<SqliteStore> store(new SqliteStore(std::move(db), path, max_blob));
        if (auto st = sqlite::migrate(*store->m_db); !st) {
            return st.error();
        }
        if (options.checkpoint_delay.count() > 0) {
            auto checkpointer = WalCheckpointer::start(path, options.checkpoint_delay);
            if (!checkpointer) {
                return checkpointer.error();
            }
            store->m_checkpointer = std::move(*checkpointer);
            store->m_checkpointer->install(store->m_db->getHandle());
        }
        store->m_lock = std::move(lock);
        return store;
    } catch (const std::exception& e) {
        return db_error("cannot open `" + path.string() + "`", e);
    }
}

int SqliteStore::schema_version() const { return sqlite::schema_version(*m_db); }

std::int64_t SqliteStore::max_blob_bytes() const { return m_max_blob_bytes; }

Result<Snapshot> SqliteStore::load() {
    try {
        return sqlite::load_records(*m_db);
    } catch (const std::exception& e) {
        return db_error("load failed", e);
    }
}

Status SqliteStore::apply(const Changes& c) {
    if (c.empty()) {
        return {};
    }
    try {
        WriteScope tx(*m_db, m_group);
        sqlite::write_records(*m_db, c);
        tx.commit();
        return {};
    } catch (const std::exception& e) {
        return db_error("write failed", e);
    }
}

Result<std::int64_t> SqliteStore::reserve_ids(IdKind kind, std::int64_t count) {
    if (count < 1) {
        return make_error(ErrorCode::internal, "reserve_ids needs a count of 1 or more");
    }
    try {
        const auto& [name, table] = id_kind_names(kind);
        WriteScope tx(*m_db, m_group);
        // The counter, or past the largest stored id (a pool from before the counters, or a copy).
        SQLite::Statement q(*m_db, std::string("SELECT MAX(COALESCE((SELECT next FROM id_counters WHERE kind = ?), 1), "
                                               "COALESCE((SELECT MAX(id) FROM ") +
                                       table + "), 0) + 1)");
        q.bind(1, name);
        q.executeStep();
        const std::int64_t first = q.getColumn(0).getInt64();
        SQLite::Statement up(*m_db, "INSERT INTO id_counters (kind, next) VALUES (?, ?) "
                                    "ON CONFLICT(kind) DO UPDATE SET next = excluded.next");
        up.bind(1, name);
        up.bind(2, first + count);
        up.exec();
        tx.commit();
        return first;
    } catch (const std::exception& e) {
        return db_error("id reservation", e);
    }
}

Result<std::int64_t> SqliteStore::log_length(AttemptId attempt) {
    try {
        SQLite::Statement q(*m_db, "SELECT COALESCE(MAX(byte_offset + length(data)), 0) FROM log_chunks "
                                   "WHERE attempt_id = ?");
        q.bind(1, attempt.value());
        q.executeStep();
        return q.getColumn(0).getInt64();
    } catch (const std::exception& e) {
        return db_error("log length", e);
    }
}

Result<LogAppend> SqliteStore::append_log(AttemptId attempt, std::int64_t offset, std::string_view data) {
    try {
        WriteScope tx(*m_db, m_group);
        auto length = log_length(attempt);
        if (!length) {
            return length.error();
        }
        if (offset < 0 || offset > *length) {
            Error e = make_error(ErrorCode::conflict,
                                 "log chunk at offset " + std::to_string(offset) + " would leave a gap; expected offset " +
                                     std::to_string(*length),
                                 "offset");
            return e;
        }
        const auto skip = static_cast<std::size_t>(*length - offset);
        if (skip >= data.size()) {
            return LogAppend{0, *length};
        }
        std::string_view fresh = data.substr(skip);
        SQLite::Statement q(*m_db, "INSERT INTO log_chunks (attempt_id, byte_offset, data) VALUES (?, ?, ?)");
        q.bind(1, attempt.value());
        q.bind(2, *length);
        q.bind(3, fresh.data(), static_cast<int>(fresh.size()));
        q.exec();
        tx.commit();
        auto stored = static_cast<std::int64_t>(fresh.size());
        return LogAppend{stored, *length + stored};
    } catch (const std::exception& e) {
        return db_error("log append", e);
    }
}

Status SqliteStore::drop_log_range(AttemptId attempt, std::int64_t from, std::int64_t to) {
    try {
        WriteScope tx(*m_db, m_group);
        SQLite::Statement q(*m_db, "DELETE FROM log_chunks WHERE attempt_id = ? AND byte_offset >= ? "
                                   "AND byte_offset + length(data) <= ?");
        q.bind(1, attempt.value());
        q.bind(2, from);
        q.bind(3, to);
        q.exec();
        tx.commit();
        return {};
    } catch (const std::exception& e) {
        return db_error("log trim", e);
    }
}

Result<std::optional<std::int64_t>> SqliteStore::log_resume_offset(AttemptId attempt, std::int64_t offset) {
    try {
        SQLite::Statement q(*m_db, "SELECT MIN(byte_offset) FROM log_chunks WHERE attempt_id = ? "
                                   "AND byte_offset + length(data) > ?");
        q.bind(1, attempt.value());
        q.bind(2, offset);
        if (!q.executeStep() || q.getColumn(0).isNull()) {
            return std::optional<std::int64_t>();
        }
        return std::optional<std::int64_t>(std::max(offset, q.getColumn(0).getInt64()));
    } catch (const std::exception& e) {
        return db_error("log read", e);
    }
}

Result<std::vector<LogRange>> SqliteStore::log_ranges(AttemptId attempt) {
    try {
        SQLite::Statement q(*m_db, "SELECT byte_offset, byte_offset + length(data) FROM log_chunks "
                                   "WHERE attempt_id = ? ORDER BY byte_offset");
        q.bind(1, attempt.value());
        std::vector<LogRange> out;
        while (q.executeStep()) {
            const LogRange chunk{q.getColumn(0).getInt64(), q.getColumn(1).getInt64()};
            if (!out.empty() && out.back().to == chunk.from) {
                out.back().to = chunk.to;
            } else {
                out.push_back(chunk);
            }
        }
        return out;
    } catch (const std::exception& e) {
        return db_error("log ranges", e);
    }
}

Result<std::string> SqliteStore::read_log(AttemptId attempt, std::int64_t offset, std::int64_t max_bytes) {
    try {
        SQLite::Statement q(*m_db, "SELECT byte_offset, data FROM log_chunks WHERE attempt_id = ? "
                                   "AND byte_offset + length(data) > ? ORDER BY byte_offset");
        q.bind(1, attempt.value());
        q.bind(2, offset);
        std::string out;
        while (q.executeStep() && static_cast<std::int64_t>(out.size()) < max_bytes) {
            std::int64_t start = q.getColumn(0).getInt64();
            const auto& col = q.getColumn(1);
            std::string_view chunk(static_cast<const char*>(col.getBlob()), static_cast<std::size_t>(col.getBytes()));
            if (start < offset) {
                chunk.remove_prefix(static_cast<std::size_t>(offset - start));
            }
            out.append(chunk);
        }
        if (static_cast<std::int64_t>(out.size()) > max_bytes) {
            out.resize(static_cast<std::size_t>(max_bytes));
        }
        return out;
    } catch (const std::exception& e) {
        return db_error("log read", e);
    }
}

Status SqliteStore::put_output(AttemptId attempt, const std::filesystem::path& file, std::string_view sha256_hex) {
    try {
        const auto size = blob_file_size(file);
        if (auto st = check_blob_size(size, m_max_blob_bytes); !st) {
            return st;
        }
        WriteScope tx(*m_db, m_group);
        SQLite::Statement q(*m_db, "INSERT INTO outputs (attempt_id, sha256, data) VALUES (?, ?, zeroblob(?)) "
                                   "ON CONFLICT(attempt_id) DO UPDATE SET sha256 = excluded.sha256, data = excluded.data");
        q.bind(1, attempt.value());
        q.bind(2, std::string(sha256_hex));
        q.bind(3, size);
        q.exec();
        write_blob_from_file(*m_db, "outputs", attempt.value(), file, size);
        tx.commit();
        return {};
    } catch (const std::exception& e) {
        return db_error("output upload", e);
    }
}

Result<std::optional<std::string>> SqliteStore::get_output(AttemptId attempt) {
    try {
        SQLite::Statement q(*m_db, "SELECT data FROM outputs WHERE attempt_id = ?");
        q.bind(1, attempt.value());
        return first_blob(q);
    } catch (const std::exception& e) {
        return db_error("output read", e);
    }
}

Status SqliteStore::put_input_blob(TeamId team, std::string_view sha256_hex, const std::filesystem::path& file,
                                   std::int64_t now) {
    try {
        const auto size = blob_file_size(file);
        if (auto st = check_blob_size(size, m_max_blob_bytes); !st) {
            return st;
        }
        WriteScope tx(*m_db, m_group);
        SQLite::Statement q(*m_db, "INSERT INTO team_input_blobs (team_id, sha256, size, data, created_at) "
                                   "VALUES (?, ?, ?, zeroblob(?), ?) ON CONFLICT(team_id, sha256) DO NOTHING");
        q.bind(1, team.value());
        q.bind(2, std::string(sha256_hex));
        q.bind(3, size);
        q.bind(4, size);
        q.bind(5, now);
        if (q.exec() == 0) {
            return {}; // this team has it already
        }
        write_blob_from_file(*m_db, "team_input_blobs", m_db->getLastInsertRowid(), file, size);
        tx.commit();
        return {};
    } catch (const std::exception& e) {
        return db_error("input upload", e);
    }
}

Result<std::optional<std::int64_t>> SqliteStore::input_blob_size(TeamId team, std::string_view sha256_hex) {
    try {
        SQLite::Statement q(*m_db, "SELECT size FROM team_input_blobs WHERE team_id = ? AND sha256 = ?");
        q.bind(1, team.value());
        q.bind(2, std::string(sha256_hex));
        if (!q.executeStep()) {
            return std::optional<std::int64_t>();
        }
        return std::optional<std::int64_t>(q.getColumn(0).getInt64());
    } catch (const std::exception& e) {
        return db_error("input lookup", e);
    }
}

Result<std::optional<std::string>> SqliteStore::get_input_blob(TeamId team, std::string_view sha256_hex) {
    try {
        SQLite::Statement q(*m_db, "SELECT data FROM team_input_blobs WHERE team_id = ? AND sha256 = ?");
        q.bind(1, team.value());
        q.bind(2, std::string(sha256_hex));
        return first_blob(q);
    } catch (const std::exception& e) {
        return db_error("input read", e);
    }
}

Status SqliteStore::backup(const std::filesystem::path& to) {
    std::error_code ec;
    if (std::filesystem::exists(to, ec) && std::filesystem::file_size(to, ec) != 0) {
        return make_error(ErrorCode::conflict, "`" + to.string() + "` exists; a backup never overwrites a file");
    }
    if (auto st = util::create_private_file(to); !st) {
        return st;
    }
    try {
        // SQLite's online backup API, in one step: it copies inside one read transaction of its own
        // connection (one moment of the data), and in WAL mode the owner's writes go on meanwhile.
        SQLite::Database source(m_path.string(), SQLite::OPEN_READONLY);
        source.setBusyTimeout(5000);
        {
            SQLite::Database copy(to.string(), SQLite::OPEN_READWRITE);
            SQLite::Backup copier(copy, source);
            copier.executeStep(-1);
            // One file, nothing beside it: the copy keeps a rollback journal, not a WAL.
            copy.exec("PRAGMA journal_mode=DELETE");
        } // SQLite synced the copy when its last transaction committed (synchronous=FULL)
        return {};
    } catch (const std::exception& e) {
        std::filesystem::remove(to, ec);
        return db_error("backup to `" + to.string() + "` failed", e);
    }
}

Result<std::vector<AuditRecord>> SqliteStore::read_audit(const AuditQuery& query) {
    try {
        // The prefix is matched with substr, not LIKE, so `_` and `%` in it mean themselves.
        const auto& table = columns::table<AuditRecord>();
        static const std::string sql = "SELECT " + columns::column_list(columns::info(table)) +
                                       " FROM audit_log WHERE (?1 IS NULL OR at >= ?1) AND (?2 IS NULL OR id < ?2) "
                                       "AND substr(action, 1, length(?3)) = ?3 ORDER BY id DESC LIMIT ?4";
        SQLite::Statement q(*m_db, sql);
        sqlite::bind_opt(q, 1, query.since_ms);
        sqlite::bind_opt(q, 2, query.before_id);
        q.bind(3, query.action_prefix);
        q.bind(4, std::max<std::int64_t>(query.limit, 0));
        return sqlite::read_rows(q, table);
    } catch (const std::exception& e) {
        return db_error("audit read", e);
    }
}

Result<std::vector<EvidenceRecord>> SqliteStore::read_evidence(AttemptId attempt) {
    try {
        const auto& table = columns::table<EvidenceRecord>();
        static const std::string sql = "SELECT " + columns::column_list(columns::info(table)) +
                                       " FROM attempt_evidence WHERE attempt_id = ?1 ORDER BY kind";
        SQLite::Statement q(*m_db, sql);
        q.bind(1, attempt.value());
        return sqlite::read_rows(q, table);
    } catch (const std::exception& e) {
        return db_error("evidence read", e);
    }
}

Result<std::vector<Sample>> SqliteStore::read_samples(std::int64_t since_ms, std::int64_t limit) {
    try {
        // The newest `limit`, then turned oldest first.
        const auto& table = columns::table<Sample>();
        static const std::string sql = "SELECT " + columns::column_list(columns::info(table)) +
                                       " FROM pool_samples WHERE at >= ?1 ORDER BY at DESC, id DESC LIMIT ?2";
        SQLite::Statement q(*m_db, sql);
        q.bind(1, since_ms);
        q.bind(2, std::max<std::int64_t>(limit, 0));
        auto out = sqlite::read_rows(q, table);
        if (out) {
            std::reverse(out->begin(), out->end());
        }
        return out;
    } catch (const std::exception& e) {
        return db_error("samples read", e);
    }
}

Result<std::int64_t> SqliteStore::prune_samples(std::int64_t before_ms) {
    try {
        WriteScope tx(*m_db, m_group);
        SQLite::Statement q(*m_db, "DELETE FROM pool_samples WHERE at < ?");
        q.bind(1, before_ms);
        const auto pruned = static_cast<std::int64_t>(q.exec());
        tx.commit();
        return pruned;
    } catch (const std::exception& e) {
        return db_error("samples prune", e);
    }
}

Result<std::vector<InputBlobRef>> SqliteStore::list_input_blobs() {
    try {
        SQLite::Statement q(*m_db, "SELECT team_id, sha256, size, created_at FROM team_input_blobs "
                                   "ORDER BY team_id, sha256");
        std::vector<InputBlobRef> out;
        while (q.executeStep()) {
            out.push_back({TeamId(q.getColumn(0).getInt64()), q.getColumn(1).getString(), q.getColumn(2).getInt64(),
                           q.getColumn(3).getInt64()});
        }
        return out;
    } catch (const std::exception& e) {
        return db_error("input list", e);
    }
}

// The file's lock already makes this process the only writer: the lease is always free to it and is
// kept in memory, for the coordinator that asks (it never waits as a standby on SQLite).
Result<LeaseState> SqliteStore::acquire_lease(const LeaseClaim& claim) {
    m_lease = LeaseState{m_lease.epoch + 1, claim.holder, claim.address, claim.ttl_ms};
    m_lease_renewed = std::chrono::steady_clock::now();
    return read_lease();
}

Status SqliteStore::renew_lease(std::int64_t ttl_ms) {
    if (m_lease.epoch == 0) {
        return make_error(ErrorCode::conflict, "this store holds no lease", "lease");
    }
    m_lease.expires_in_ms = ttl_ms;
    m_lease_renewed = std::chrono::steady_clock::now();
    return {};
}

Status SqliteStore::release_lease() {
    m_lease.expires_in_ms = 0;
    return {};
}

Result<LeaseState> SqliteStore::read_lease() {
    LeaseState now = m_lease;
    const auto held = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                            m_lease_renewed);
    now.expires_in_ms = std::max<std::int64_t>(m_lease.expires_in_ms - held.count(), 0);
    return now;
}

} // namespace gpupool::store
