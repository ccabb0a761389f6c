// PostgresStore: opening, logs, blobs, the audit log and samples, backup and the lease. The schema is
// in postgres_schema.cpp, the records' rows in postgres_records.cpp, libpq's plumbing in
// postgres_connection.cpp.
#include "core/store/postgres_store.hpp"

#include "core/store/copy_pool.hpp"
#include "core/store/blob_files.hpp"
#include "core/store/postgres_internal.hpp"
#include "core/store/sqlite_store.hpp"
#include "core/util/files.hpp"

#include <SQLiteCpp/SQLiteCpp.h>

#include <algorithm>
#include <fstream>

namespace gpupool::store {

using pg::Connection;
using pg::Failure;
using pg::params;
using pg::Row;
using pg::Rows;
using pg::Transaction;

namespace {

constexpr std::int64_t k_blob_piece_bytes = std::int64_t{1} << 20; // a blob goes in and out a MiB at a time
constexpr std::int64_t k_blob_batch = 8;                      // pieces fetched per round trip
constexpr std::int64_t k_log_batch = 64;                      // log chunks fetched per round trip
constexpr const char* k_read_only_begin = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY";

// Runs `body`, turning what it throws into the call's Error ("database: WHAT: ..." for io).
template <class F>
auto guarded(const std::string& what, F&& body) -> decltype(body()) {
    try {
        return body();
    } catch (const Failure& f) {
        Error e = f.error();
        if (e.code == ErrorCode::io) {
            e.message = "database: " + what + ": " + e.message;
        }
        return e;
    } catch (const std::exception& e) {
        return make_error(ErrorCode::io, "database: " + what + ": " + e.what());
    }
}

Connection& writable(Connection& db, bool snapshot) {
    if (snapshot) {
        throw Failure(make_error(ErrorCode::conflict, "this PostgreSQL store is a read-only snapshot"));
    }
    return db;
}

// A write: one transaction, first fenced by the lease (the database refuses it when the lease moved on).
class WriteTransaction : public Transaction {
public:
    WriteTransaction(Connection& db, bool snapshot, std::int64_t epoch) : Transaction(writable(db, snapshot)) {
        pg::fence(db, epoch);
    }
};

// A read of several statements sees one moment: its own read-only transaction, or the snapshot's.
void begin_read(Connection& db, bool snapshot, std::optional<Transaction>& tx) {
    if (!snapshot) {
        tx.emplace(db, k_read_only_begin);
    }
}

// Inserts `file` as pieces of k_blob_piece_bytes with `sql`, whose parameters are `key`, then seq (from 0)
// and the piece's bytes. Only one piece is in memory at a time.
void write_pieces(Connection& db, const char* sql, const pg::Params& key, const std::filesystem::path& file,
                  std::int64_t size) {
    std::ifstream in(file, std::ios::binary);
    if (!in) {
        throw std::runtime_error("cannot open " + file.string());
    }
    std::string buf(static_cast<std::size_t>(k_blob_piece_bytes), '\0');
    std::int64_t done = 0;
    for (std::int64_t seq = 0; done < size; ++seq) {
        in.read(buf.data(), static_cast<std::streamsize>(std::min(size - done, k_blob_piece_bytes)));
        const auto n = static_cast<std::int64_t>(in.gcount());
        if (n <= 0) {
            break;
        }
        pg::Params p = key;
        p.add(seq).add_bytes(std::string_view(buf.data(), static_cast<std::size_t>(n)));
        db.exec(sql, p);
        done += n;
    }
    if (done != size) {
        throw std::runtime_error("could not read all of " + file.string());
    }
}

// A blob of `size` bytes put back together from its pieces: `sql` takes `key`, then the first seq
// and how many pieces, and returns (seq, data) in order.
std::string read_pieces(Connection& db, const char* sql, const pg::Params& key, std::int64_t size) {
    std::string out;
    out.reserve(static_cast<std::size_t>(size));
    for (std::int64_t next = 0;;) {
        pg::Params p = key;
        p.add(next).add(k_blob_batch);
        Rows r = db.exec(sql, p, true);
        for (int i = 0; i < pg::row_count(r); ++i) {
            out.append(Row(r.get(), i).bytes(1));
        }
        next += pg::row_count(r);
        if (pg::row_count(r) < k_blob_batch) {
            break;
        }
    }
    if (static_cast<std::int64_t>(out.size()) != size) {
        throw Failure(make_error(ErrorCode::io, "a stored blob has " + std::to_string(out.size()) + " bytes of " +
                                                    std::to_string(size)));
    }
    return out;
}

std::int64_t stored_log_length(Connection& db, AttemptId attempt) {
    Rows r = db.exec("SELECT COALESCE(MAX(byte_offset + length(data)), 0) FROM log_chunks WHERE attempt_id = $1",
                     params(attempt.value()));
    return Row(r.get(), 0).integer(0);
}

LeaseState lease_row(Connection& db) {
    Rows r = db.exec("SELECT epoch, holder, address, CASE WHEN expires_at <= clock_timestamp() THEN 0 "
                     "ELSE CEIL(EXTRACT(EPOCH FROM (expires_at - clock_timestamp())) * 1000)::BIGINT END "
                     "FROM coordinator_lease WHERE id = 1");
    if (pg::row_count(r) != 1) {
        throw Failure(make_error(ErrorCode::io, "the pool's lease row is missing"));
    }
    const Row q(r.get(), 0);
    return LeaseState{q.integer(0), q.text(1), q.text(2), std::max<std::int64_t>(q.integer(3), 0)};
}

} // namespace

PostgresStore::PostgresStore(std::unique_ptr<pg::Connection> db, std::string url, const PostgresOptions& options)
    : m_db(std::move(db)), m_url(std::move(url)), m_password(options.password),
      m_max_blob_bytes(std::min(options.max_blob_bytes, k_postgres_max_blob_bytes)), m_snapshot(options.snapshot) {}

PostgresStore::~PostgresStore() = default;

Result<std::unique_ptr<PostgresStore>> PostgresStore::open(const std::string& url, const PostgresOptions& options) {
    auto conn = Connection::connect(url, options.password);
    if (!conn) {
        return conn.error();
    }
    std::unique_ptr<PostgresStore> store(new PostgresStore(std::move(*conn), url, options));
    Connection& db = *store->m_db;
    auto opened = guarded("cannot open the pool at " + db.describe(), [&]() -> Status {
        if (!options.snapshot) {
            pg::migrate(db, options.create);
            return {};
        }
        db.forbid_reset();
        db.exec(k_read_only_begin);
        const int version = pg::schema_version(db); // the first read fixes the moment every read sees
        if (version == 0) {
            return make_error(ErrorCode::not_found, "no gpupool pool in the PostgreSQL database at " + db.describe());
        }
        if (version != k_postgres_schema_version) {
            return make_error(ErrorCode::io, "the pool's schema is at version " + std::to_string(version) +
                                                 ", this gpupool reads version " +
                                                 std::to_string(k_postgres_schema_version));
        }
        return {};
    });
    if (!opened) {
        return opened.error();
    }
    return store;
}

int PostgresStore::schema_version() const {
    try {
        return pg::schema_version(*m_db);
    } catch (const std::exception&) {
        return 0;
    }
}

std::int64_t PostgresStore::max_blob_bytes() const {
    return m_max_blob_bytes;
}

Result<Snapshot> PostgresStore::load() {
    return guarded("load failed", [&]() -> Result<Snapshot> {
        std::optional<Transaction> tx;
        begin_read(*m_db, m_snapshot, tx);
        return pg::load_records(*m_db);
    });
}

Status PostgresStore::apply(const Changes& c) {
    if (c.empty()) {
        return {};
    }
    return guarded("write failed", [&]() -> Status {
        WriteTransaction tx(*m_db, m_snapshot, m_epoch);
        pg::write_records(*m_db, c);
        tx.commit();
        return {};
    });
}

Result<std::int64_t> PostgresStore::reserve_ids(IdKind kind, std::int64_t count) {
    if (count < 1) {
        return make_error(ErrorCode::internal, "reserve_ids needs a count of 1 or more");
    }
    return guarded("id reservation", [&]() -> Result<std::int64_t> {
        const auto [name, table] = id_kind_names(kind);
        WriteTransaction tx(*m_db, m_snapshot, m_epoch);
        // The counter, or past the largest stored id (a migrated pool); the row lock orders reservers.
        const std::string sql =
            std::string("INSERT INTO id_counters AS c (kind, next) VALUES ($1, GREATEST(1, (SELECT COALESCE(MAX(id), 0) "
                        "+ 1 FROM ") +
            table + ")) + $2) ON CONFLICT (kind) DO UPDATE SET next = GREATEST(c.next, (SELECT COALESCE(MAX(id), 0) + "
                    "1 FROM " +
            table + ")) + $2 RETURNING next - $2";
        Rows r = m_db->exec(sql.c_str(), params(std::string_view(name), count));
        const std::int64_t first = Row(r.get(), 0).integer(0);
        tx.commit();
        return first;
    });
}

// ---- logs --------------------------------------------------------------------------------------

Result<std::vector<LogRange>> PostgresStore::log_ranges(AttemptId attempt) {
    return guarded("log ranges", [&]() -> Result<std::vector<LogRange>> {
        Rows r = m_db->exec("SELECT byte_offset, byte_offset + length(data) FROM log_chunks WHERE attempt_id = $1 "
                            "ORDER BY byte_offset",
                            params(attempt.value()));
        std::vector<LogRange> out;
        for (int i = 0; i < pg::row_count(r); ++i) {
            const Row q(r.get(), i);
            const LogRange chunk{q.integer(0), q.integer(1)};
            if (!out.empty() && out.back().to == chunk.from) {
                out.back().to = chunk.to;
            } else {
                out.push_back(chunk);
            }
        }
        return out;
    });
}

Result<std::int64_t> PostgresStore::log_length(AttemptId attempt) {
    return guarded("log length", [&]() -> Result<std::int64_t> { return stored_log_length(*m_db, attempt); });
}

Result<LogAppend> PostgresStore::append_log(AttemptId attempt, std::int64_t offset, std::string_view data) {
    return guarded("log append", [&]() -> Result<LogAppend> {
        WriteTransaction tx(*m_db, m_snapshot, m_epoch);
        const std::int64_t length = stored_log_length(*m_db, attempt);
        if (offset < 0 || offset > length) {
            return make_error(ErrorCode::conflict,
                              "log chunk at offset " + std::to_string(offset) + " would leave a gap; expected offset " +
                                  std::to_string(length),
                              "offset");
        }
        const auto skip = static_cast<std::size_t>(length - offset);
        if (skip >= data.size()) {
            return LogAppend{0, length};
        }
        const std::string_view fresh = data.substr(skip);
        pg::Params p = params(attempt.value(), length);
        p.add_bytes(fresh);
        m_db->exec("INSERT INTO log_chunks (attempt_id, byte_offset, data) VALUES ($1, $2, $3)", p);
        tx.commit();
        const auto stored = static_cast<std::int64_t>(fresh.size());
        return LogAppend{stored, length + stored};
    });
}

Status PostgresStore::drop_log_range(AttemptId attempt, std::int64_t from, std::int64_t to) {
    return guarded("log trim", [&]() -> Status {
        WriteTransaction tx(*m_db, m_snapshot, m_epoch);
        m_db->exec("DELETE FROM log_chunks WHERE attempt_id = $1 AND byte_offset >= $2 "
                   "AND byte_offset + length(data) <= $3",
                   params(attempt.value(), from, to));
        tx.commit();
        return {};
    });
}

Result<std::optional<std::int64_t>> PostgresStore::log_resume_offset(AttemptId attempt, std::int64_t offset) {
    return guarded("log read", [&]() -> Result<std::optional<std::int64_t>> {
        Rows r = m_db->exec("SELECT MIN(byte_offset) FROM log_chunks WHERE attempt_id = $1 "
                            "AND byte_offset + length(data) > $2",
                            params(attempt.value(), offset));
        const auto first = Row(r.get(), 0).opt_integer(0);
        if (!first) {
            return std::optional<std::int64_t>();
        }
        return std::optional<std::int64_t>(std::max(offset, *first));
    });
}

Result<std::string> PostgresStore::read_log(AttemptId attempt, std::int64_t offset, std::int64_t max_bytes) {
    return guarded("log read", [&]() -> Result<std::string> {
        std::optional<Transaction> tx;
        begin_read(*m_db, m_snapshot, tx);
        std::string out;
        // Chunk by chunk from `offset`, a batch per round trip, over any dropped range, until `max_bytes`.
        for (std::int64_t from = offset; static_cast<std::int64_t>(out.size()) < max_bytes;) {
            Rows r = m_db->exec("SELECT byte_offset, data FROM log_chunks WHERE attempt_id = $1 "
                                "AND byte_offset + length(data) > $2 ORDER BY byte_offset LIMIT $3",
                                params(attempt.value(), from, k_log_batch), true);
            for (int i = 0; i < pg::row_count(r) && static_cast<std::int64_t>(out.size()) < max_bytes; ++i) {
                const Row q(r.get(), i);
                const std::int64_t start = q.binary_integer(0);
                std::string_view chunk = q.bytes(1);
                from = start + static_cast<std::int64_t>(chunk.size());
                if (start < offset) {
                    chunk.remove_prefix(static_cast<std::size_t>(offset - start));
                }
                out.append(chunk);
            }
            if (pg::row_count(r) < k_log_batch) {
                break;
            }
        }
        if (static_cast<std::int64_t>(out.size()) > max_bytes) {
            out.resize(static_cast<std::size_t>(std::max<std::int64_t>(max_bytes, 0)));
        }
        return out;
    });
}

// ---- blobs -------------------------------------------------------------------------------------

Status PostgresStore::put_output(AttemptId attempt, const std::filesystem::path& file, std::string_view sha256_hex) {
    return guarded("output upload", [&]() -> Status {
        const auto size = blob_file_size(file);
        if (auto st = check_blob_size(size, m_max_blob_bytes); !st) {
            return st;
        }
        WriteTransaction tx(*m_db, m_snapshot, m_epoch);
        // Replaced whole: the old pieces go with their row (ON DELETE CASCADE).
        m_db->exec("DELETE FROM outputs WHERE attempt_id = $1", params(attempt.value()));
        m_db->exec("INSERT INTO outputs (attempt_id, sha256, size) VALUES ($1, $2, $3)",
                   params(attempt.value(), sha256_hex, size));
        write_pieces(*m_db, "INSERT INTO output_chunks (attempt_id, seq, data) VALUES ($1, $2, $3)",
                     params(attempt.value()), file, size);
        tx.commit();
        return {};
    });
}

Result<std::optional<std::string>> PostgresStore::get_output(AttemptId attempt) {
    return guarded("output read", [&]() -> Result<std::optional<std::string>> {
        std::optional<Transaction> tx;
        begin_read(*m_db, m_snapshot, tx);
        Rows head = m_db->exec("SELECT size FROM outputs WHERE attempt_id = $1", params(attempt.value()));
        if (pg::row_count(head) == 0) {
            return std::optional<std::string>();
        }
        return std::optional<std::string>(read_pieces(
            *m_db, "SELECT seq, data FROM output_chunks WHERE attempt_id = $1 AND seq >= $2 ORDER BY seq LIMIT $3",
            params(attempt.value()), Row(head.get(), 0).integer(0)));
    });
}

Status PostgresStore::put_input_blob(TeamId team, std::string_view sha256_hex, const std::filesystem::path& file,
                                     std::int64_t now) {
    return guarded("input upload", [&]() -> Status {
        const auto size = blob_file_size(file);
        if (auto st = check_blob_size(size, m_max_blob_bytes); !st) {
            return st;
        }
        WriteTransaction tx(*m_db, m_snapshot, m_epoch);
        Rows r = m_db->exec("INSERT INTO team_input_blobs (team_id, sha256, size, created_at) VALUES ($1, $2, $3, $4) "
                            "ON CONFLICT (team_id, sha256) DO NOTHING",
                            params(team.value(), sha256_hex, size, now));
        if (pg::affected(r) == 0) {
            return {}; // this team has it already
        }
        write_pieces(*m_db, "INSERT INTO input_blob_chunks (team_id, sha256, seq, data) VALUES ($1, $2, $3, $4)",
                     params(team.value(), sha256_hex), file, size);
        tx.commit();
        return {};
    });
}

Result<std::optional<std::int64_t>> PostgresStore::input_blob_size(TeamId team, std::string_view sha256_hex) {
    return guarded("input lookup", [&]() -> Result<std::optional<std::int64_t>> {
        Rows r = m_db->exec("SELECT size FROM team_input_blobs WHERE team_id = $1 AND sha256 = $2",
                            params(team.value(), sha256_hex));
        if (pg::row_count(r) == 0) {
            return std::optional<std::int64_t>();
        }
        return std::optional<std::int64_t>(Row(r.get(), 0).integer(0));
    });
}

Result<std::optional<std::string>> PostgresStore::get_input_blob(TeamId team, std::string_view sha256_hex) {
    return guarded("input read", [&]() -> Result<std::optional<std::string>> {
        std::optional<Transaction> tx;
        begin_read(*m_db, m_snapshot, tx);
        Rows head = m_db->exec("SELECT size FROM team_input_blobs WHERE team_id = $1 AND sha256 = $2",
                               params(team.value(), sha256_hex));
        if (pg::row_count(head) == 0) {
            return std::optional<std::string>();
        }
        return std::optional<std::string>(read_pieces(*m_db,
                                                      "SELECT seq, data FROM input_blob_chunks WHERE team_id = $1 "
                                                      "AND sha256 = $2 AND seq >= $3 ORDER BY seq LIMIT $4",
                                                      params(team.value(), sha256_hex), Row(head.get(), 0).integer(0)));
    });
}

Result<std::vector<InputBlobRef>> PostgresStore::list_input_blobs() {
    return guarded("input list", [&]() -> Result<std::vector<InputBlobRef>> {
        Rows r = m_db->exec("SELECT team_id, sha256, size, created_at FROM team_input_blobs "
                            "ORDER BY team_id, sha256 COLLATE \"C\"");
        std::vector<InputBlobRef> out;
        for (int i = 0; i < pg::row_count(r); ++i) {
            const Row q(r.get(), i);
            out.push_back({TeamId(q.integer(0)), q.text(1), q.integer(2), q.integer(3)});
        }
        return out;
    });
}

// ---- the audit log and samples -----------------------------------------------------------------

Result<std::vector<AuditRecord>> PostgresStore::read_audit(const AuditQuery& query) {
    return guarded("audit read", [&]() -> Result<std::vector<AuditRecord>> {
        // The prefix is compared with left(), not LIKE, so `_` and `%` in it mean themselves.
        const auto& table = columns::table<AuditRecord>();
        static const std::string sql = "SELECT " + columns::column_list(columns::info(table)) +
                                       " FROM audit_log WHERE ($1::BIGINT IS NULL OR at >= $1) "
                                       "AND ($2::BIGINT IS NULL OR id < $2) "
                                       "AND left(action, length($3::TEXT)) = $3 ORDER BY id DESC LIMIT $4";
        Rows r = m_db->exec(sql.c_str(), params(query.since_ms, query.before_id, query.action_prefix,
                                                std::max<std::int64_t>(query.limit, 0)));
        return pg::read_rows(r, table);
    });
}

Result<std::vector<EvidenceRecord>> PostgresStore::read_evidence(AttemptId attempt) {
    return guarded("evidence read", [&]() -> Result<std::vector<EvidenceRecord>> {
        const auto& table = columns::table<EvidenceRecord>();
        static const std::string sql = "SELECT " + columns::column_list(columns::info(table)) +
                                       " FROM attempt_evidence WHERE attempt_id = $1 ORDER BY kind";
        Rows r = m_db->exec(sql.c_str(), params(attempt.value()));
        return pg::read_rows(r, table);
    });
}

Result<std::vector<Sample>> PostgresStore::read_samples(std::int64_t since_ms, std::int64_t limit) {
    return guarded("samples read", [&]() -> Result<std::vector<Sample>> {
        // The newest `limit`, then turned oldest first.
        const auto& table = columns::table<Sample>();
        static const std::string sql = "SELECT " + columns::column_list(columns::info(table)) +
                                       " FROM pool_samples WHERE at >= $1 ORDER BY at DESC, id DESC LIMIT $2";
        Rows r = m_db->exec(sql.c_str(), params(since_ms, std::max<std::int64_t>(limit, 0)));
        std::vector<Sample> out = pg::read_rows(r, table);
        std::reverse(out.begin(), out.end());
        return out;
    });
}

Result<std::int64_t> PostgresStore::prune_samples(std::int64_t before_ms) {
    return guarded("samples prune", [&]() -> Result<std::int64_t> {
        WriteTransaction tx(*m_db, m_snapshot, m_epoch);
        Rows r = m_db->exec("DELETE FROM pool_samples WHERE at < $1", params(before_ms));
        tx.commit();
        return pg::affected(r);
    });
}

// ---- backup ------------------------------------------------------------------------------------

Status PostgresStore::backup(const std::filesystem::path& to) {
    std::error_code ec;
    if (std::filesystem::exists(to, ec) && std::filesystem::file_size(to, ec) != 0) {
        return make_error(ErrorCode::conflict, "`" + to.string() + "` exists; a backup never overwrites a file");
    }
    if (auto st = util::create_private_file(to); !st) {
        return st;
    }
    const auto failed = [&](Error e) -> Status {
        std::filesystem::remove(to, ec);
        e.message = "backup to `" + to.string() + "` failed: " + e.message;
        return e;
    };
    // One moment of the pool, read through connections of its own (this may run beside the owner thread).
    PostgresOptions snapshot_options;
    snapshot_options.create = false;
    snapshot_options.password = m_password;
    snapshot_options.snapshot = true;
    auto snapshot = PostgresStore::open(m_url, snapshot_options);
    if (!snapshot) {
        return failed(snapshot.error());
    }
    {
        auto copy = SqliteStore::open(to);
        if (!copy) {
            return failed(copy.error());
        }
        if (auto copied = copy_pool(**snapshot, **copy); !copied) {
            return failed(copied.error());
        }
    }
    try {
        // One file, nothing beside it, as SQLite's own backups: a rollback journal, not a WAL.
        SQLite::Database file(to.string(), SQLite::OPEN_READWRITE);
        file.exec("PRAGMA journal_mode=DELETE");
    } catch (const std::exception& e) {
        return failed(make_error(ErrorCode::io, e.what()));
    }
    return {};
}

// ---- the lease ---------------------------------------------------------------------------------

Result<LeaseState> PostgresStore::acquire_lease(const LeaseClaim& claim) {
    if (claim.holder.empty()) {
        return make_error(ErrorCode::invalid_input, "a lease claim needs a holder", "lease");
    }
    return guarded("lease", [&]() -> Result<LeaseState> {
        Transaction tx(writable(*m_db, m_snapshot));
        // Waits for the writes in flight (they hold the row FOR SHARE): none of the old epoch commits after.
        m_db->exec("UPDATE coordinator_lease SET epoch = CASE WHEN holder = $1 THEN epoch ELSE epoch + 1 END, "
                   "holder = $1, address = $2, "
                   "expires_at = clock_timestamp() + $3::DOUBLE PRECISION * INTERVAL '1 millisecond' "
                   "WHERE id = 1 AND (holder = $1 OR expires_at <= clock_timestamp())",
                   params(claim.holder, claim.address, claim.ttl_ms));
        const LeaseState state = lease_row(*m_db);
        tx.commit();
        if (state.holder == claim.holder) {
            m_epoch = state.epoch;
        }
        return state;
    });
}

Status PostgresStore::renew_lease(std::int64_t ttl_ms) {
    if (m_epoch == 0) {
        return make_error(ErrorCode::conflict, "this store holds no lease", "lease");
    }
    return guarded("lease", [&]() -> Status {
        WriteTransaction tx(*m_db, m_snapshot, m_epoch);
        m_db->exec("UPDATE coordinator_lease SET "
                   "expires_at = clock_timestamp() + $1::DOUBLE PRECISION * INTERVAL '1 millisecond' "
                   "WHERE id = 1 AND epoch = $2",
                   params(ttl_ms, m_epoch));
        tx.commit();
        return {};
    });
}

Status PostgresStore::release_lease() {
    if (m_epoch == 0) {
        return {};
    }
    return guarded("lease", [&]() -> Status {
        Transaction tx(writable(*m_db, m_snapshot));
        m_db->exec("UPDATE coordinator_lease SET expires_at = LEAST(expires_at, clock_timestamp()) "
                   "WHERE id = 1 AND epoch = $1",
                   params(m_epoch));
        tx.commit();
        return {};
    });
}

Result<LeaseState> PostgresStore::read_lease() {
    return guarded("lease", [&]() -> Result<LeaseState> { return lease_row(*m_db); });
}

} // namespace gpupool::store
