// Store: the coordinator's durable memory.
//
// The coordinator owns the live state in memory and writes every change through a Store before
// it answers the request that caused it (decision 6: durable first). A successful call has been
// committed: after a crash, load() returns everything that any successful apply() wrote, and
// nothing of a failed one (each call is one transaction). The interface speaks in domain records
// so that SQLite stays inside its adapter (PostgreSQL is the planned second engine).
// Implementations are used from one thread at a time (the coordinator's owner thread); failures
// are Errors with ErrorCode::io, never exceptions.
#pragma once

#include "core/store/records.hpp"
#include "core/util/result.hpp"

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpupool::store {

// A set of whole records, keyed by id: what load() returns (everything the coordinator needs to
// rebuild its in-memory view) and what apply() upserts, all or nothing.
struct Records {
    std::vector<TeamRecord> teams;
    std::vector<TokenRecord> tokens;
    std::vector<WorkerRecord> workers;
    std::vector<SweepRecord> sweeps;
    std::vector<JobRecord> jobs;
    std::vector<AttemptRecord> attempts;
    // Ledger entries are appended, never upserted: applying an entry id that exists fails the
    // whole apply(). Balances are upserted in the same transaction as the entries that moved them.
    std::vector<LedgerEntry> ledger;
    std::vector<BalanceRecord> balances;
    std::vector<GrantRecord> grants;
    // The audit log is appended to, never loaded: load() leaves it empty (read_audit reads it).
    std::vector<AuditRecord> audit;
    // Utilisation samples, likewise appended and never loaded (read_samples reads them).
    std::vector<Sample> samples;
    // Attempts' evidence, upserted and never loaded (read_evidence reads one attempt's).
    std::vector<EvidenceRecord> evidence;
    bool empty() const {
        return teams.empty() && tokens.empty() && workers.empty() && sweeps.empty() && jobs.empty() &&
               attempts.empty() && ledger.empty() && balances.empty() && grants.empty() && audit.empty() &&
               samples.empty() && evidence.empty();
    }
};
using Snapshot = Records;
using Changes = Records;

// Which audit records read_audit returns: newest first, at most `limit`, older than `before_id`
// when set, not older than `since_ms` when set, and whose action starts with `action_prefix`.
struct AuditQuery {
    std::optional<std::int64_t> since_ms;
    std::optional<std::int64_t> before_id;
    std::string action_prefix;
    std::int64_t limit = 100;
};

// One input archive as list_input_blobs names it.
struct InputBlobRef {
    TeamId team;
    std::string sha256_hex;
    std::int64_t size = 0;
    std::int64_t created_at = 0;
    bool operator==(const InputBlobRef&) const = default;
};

// The kinds of record whose ids the store hands out (Store::reserve_ids).
enum class IdKind : std::uint8_t { team, token, worker, sweep, job, attempt };
inline constexpr std::size_t k_id_kinds = 6;
// The kind's name (its counter's key) and the table whose ids it numbers, the same in every engine.
struct IdKindNames {
    const char* name;
    const char* table;
};
inline IdKindNames id_kind_names(IdKind kind) {
    static constexpr IdKindNames k_names[k_id_kinds] = {{"team", "teams"},   {"token", "tokens"}, {"worker", "workers"},
                                                        {"sweep", "sweeps"}, {"job", "jobs"},     {"attempt", "attempts"}};
    return k_names[static_cast<std::size_t>(kind)];
}

// A stored stretch of an attempt's log, [from, to).
struct LogRange {
    std::int64_t from = 0;
    std::int64_t to = 0;
    bool operator==(const LogRange&) const = default;
};

// The pool's lease, which lets several coordinators share one database (an active one and standbys):
// whoever holds it is the only one that writes. `epoch` grows by one each time it changes hands.
struct LeaseClaim {
    std::string holder;  // unique per coordinator process (a random id chosen at start)
    std::string address; // where clients reach that coordinator (its advertised URL)
    std::int64_t ttl_ms = 0;
};
struct LeaseState {
    std::int64_t epoch = 0; // 0: never held
    std::string holder;
    std::string address;
    std::int64_t expires_in_ms = 0; // by the database's clock; <= 0: expired (free to take)
    bool operator==(const LeaseState&) const = default;
};

// What happened to a log chunk sent at an offset.
struct LogAppend {
    std::int64_t stored_bytes = 0; // new bytes stored (0 for a repeated chunk)
    std::int64_t length = 0;       // the attempt's log length afterwards
};

class Store {
public:
    virtual ~Store() = default;

    virtual Result<Snapshot> load() = 0;
    virtual Status apply(const Changes& changes) = 0;

    // Ids come from the store, not from counters in a coordinator's memory: reserves `count` (1 or
    // more) ids of `kind` that it never handed out before (to this or any other coordinator on the
    // same database) and that no stored record of that kind holds, and returns the first of
    // [first, first + count). Committed before it returns, and fenced like every write. Ids reserved
    // and never used are gaps, nothing more.
    virtual Result<std::int64_t> reserve_ids(IdKind kind, std::int64_t count) = 0;

    // Appends `data` at byte `offset` of the attempt's log. Idempotent: bytes already stored are
    // not stored again (a retried chunk is harmless). A chunk that starts past the end leaves a gap
    // and is refused with ErrorCode::conflict naming the expected offset.
    virtual Result<LogAppend> append_log(AttemptId attempt, std::int64_t offset, std::string_view data) = 0;
    // Up to `max_bytes` of the attempt's log from `offset`.
    virtual Result<std::string> read_log(AttemptId attempt, std::int64_t offset, std::int64_t max_bytes) = 0;
    virtual Result<std::int64_t> log_length(AttemptId attempt) = 0;
    // Deletes the chunks that lie wholly in [from, to) (a capped log drops its middle); offsets of
    // the rest do not change.
    virtual Status drop_log_range(AttemptId attempt, std::int64_t from, std::int64_t to) = 0;
    // Where the stored bytes at or after `offset` resume: `offset` itself unless it falls in a
    // dropped range; nullopt when nothing is stored at or after it.
    virtual Result<std::optional<std::int64_t>> log_resume_offset(AttemptId attempt, std::int64_t offset) = 0;
    // The byte ranges [from, to) of the attempt's log that are stored, in order, touching chunks
    // merged: one range for a whole log, two for a capped one whose middle was dropped.
    virtual Result<std::vector<LogRange>> log_ranges(AttemptId attempt) = 0;

    // The packed outputs of an attempt (one archive, read from `file` in pieces, never whole in
    // memory), replaced whole on a repeated upload.
    virtual Status put_output(AttemptId attempt, const std::filesystem::path& file, std::string_view sha256_hex) = 0;
    virtual Result<std::optional<std::string>> get_output(AttemptId attempt) = 0;

    // Input archives by team and SHA-256 (hex): what one team uploads only that team's jobs can
    // name (another team's digest is "not found", as an unknown one is). Stored once per team (a
    // repeated upload is a no-op), read from `file` in pieces, shared by the team's jobs.
    virtual Status put_input_blob(TeamId team, std::string_view sha256_hex, const std::filesystem::path& file,
                                  std::int64_t now) = 0;
    virtual Result<std::optional<std::int64_t>> input_blob_size(TeamId team, std::string_view sha256_hex) = 0;
    virtual Result<std::optional<std::string>> get_input_blob(TeamId team, std::string_view sha256_hex) = 0;

    // The largest blob (an attempt's outputs, an input archive) this store keeps, in bytes: a
    // larger put_output or put_input_blob is refused with ErrorCode::invalid_input and stores
    // nothing. Fixed for the store's lifetime; the service caps upload bodies with it.
    virtual std::int64_t max_blob_bytes() const = 0;

    // The audit log (Changes::audit appends to it, with ids in the order appended).
    virtual Result<std::vector<AuditRecord>> read_audit(const AuditQuery& query) = 0;

    // Utilisation samples (Changes::samples appends them) taken at or after `since_ms`: the newest
    // `limit` of them, oldest first (ties in time in the order appended).
    virtual Result<std::vector<Sample>> read_samples(std::int64_t since_ms, std::int64_t limit) = 0;
    // Deletes the samples taken before `before_ms`; returns how many. Its own small transaction: the
    // coordinator calls it after each sample it records, so the table holds one retention period.
    virtual Result<std::int64_t> prune_samples(std::int64_t before_ms) = 0;

    // The evidence stored for one attempt (Changes::evidence), by kind; empty when there is none.
    virtual Result<std::vector<EvidenceRecord>> read_evidence(AttemptId attempt) = 0;

    // Writes a consistent copy of everything committed so far (one moment of it: no half of a
    // transaction) to `to` (0600; new, or an empty file: anything else is a conflict), in a form
    // open_store and restore_store (open_store.hpp) take. The one call that may run on another
    // thread while the owner thread goes on using the store: it reads through a connection of its
    // own, and writers are not held up while it copies. Fails with ErrorCode::io, leaving no file.
    virtual Status backup(const std::filesystem::path& to) = 0;

    // Every input archive, by team then digest (for copying a pool to another store).
    virtual Result<std::vector<InputBlobRef>> list_input_blobs() = 0;

    // ---- the lease (active and standby coordinators) ---------------------------------------------
    // Whether several processes may open this store at once, so that a standby can wait on the lease.
    // SQLite: no (one process holds the file's lock; its lease is always free to that process).
    virtual bool shared() const = 0;
    // Takes the lease when it is free, expired, or already this holder's, with an epoch one above the
    // last, and returns it as it stands afterwards: the claim succeeded when its holder is
    // `claim.holder`. From then on every write through this store is fenced by that epoch: once another
    // holder has taken the lease, the database refuses it (ErrorCode::conflict with the field "lease"),
    // so a coordinator that was paused cannot write over its successor.
    virtual Result<LeaseState> acquire_lease(const LeaseClaim& claim) = 0;
    // Extends this store's lease by `ttl_ms` from now (the database's clock). conflict with the field
    // "lease" when it is no longer this store's.
    virtual Status renew_lease(std::int64_t ttl_ms) = 0;
    // Gives this store's lease up (it expires now), so a standby takes over at once; a no-op when it
    // is not held.
    virtual Status release_lease() = 0;
    virtual Result<LeaseState> read_lease() = 0;
};

// The error every write through a store whose lease was taken by another coordinator returns.
inline bool is_fenced(const Error& e) { return e.code == ErrorCode::conflict && e.field == "lease"; }

} // namespace gpupool::store
