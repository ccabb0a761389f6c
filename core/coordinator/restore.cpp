// restore_pool (restore.hpp): check a backup, then put it in the place of the pool's database.
#include "core/coordinator/restore.hpp"

#include "core/coordinator/coordinator.hpp"
#include "core/coordinator/service.hpp"
#include "core/store/open_store.hpp"
#include "core/store/sqlite_store.hpp" // lock_database
#include "core/util/time_text.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>

namespace gpupool::coordinator {

namespace fs = std::filesystem;

namespace {

PoolSummary summarize(const store::Records& r) {
    PoolSummary s;
    s.teams = static_cast<std::int64_t>(r.teams.size());
    s.tokens = static_cast<std::int64_t>(r.tokens.size());
    s.workers = static_cast<std::int64_t>(r.workers.size());
    s.jobs = static_cast<std::int64_t>(r.jobs.size());
    s.attempts = static_cast<std::int64_t>(r.attempts.size());
    s.ledger_entries = static_cast<std::int64_t>(r.ledger.size());
    auto later = [&s](std::optional<std::int64_t> t) { s.last_change_ms = std::max(s.last_change_ms, t.value_or(0)); };
    for (const auto& t : r.teams) {
        later(t.created_at);
    }
    for (const auto& t : r.tokens) {
        later(t.created_at);
        later(t.revoked_at);
    }
    for (const auto& w : r.workers) {
        later(w.last_seen_at);
    }
    for (const auto& j : r.jobs) {
        later(j.updated_at);
    }
    for (const auto& a : r.attempts) {
        later(a.assigned_at);
        later(a.ended_at);
        later(a.voided_at);
    }
    for (const auto& e : r.ledger) {
        later(e.at_ms);
    }
    for (const auto& g : r.grants) {
        later(g.expired_at);
    }
    return s;
}

// Opens the pool `spec` names as open_store does, but never creating it and without taking its lock
// (restore_pool holds the target's; the staging copy is its own).
Result<std::unique_ptr<store::Store>> open_existing(const store::StoreSpec& spec) {
    store::OpenOptions o;
    o.create = false;
    o.lock = false;
    return store::open_store(spec, o);
}

// Opens the pool `spec` names (never creating it) and loads its records.
Result<store::Records> load_pool(const store::StoreSpec& spec) {
    auto db = open_existing(spec);
    if (!db) {
        return db.error();
    }
    return (*db)->load();
}

// The backup's copy at `staging`, checked as the coordinator checks a pool when it starts.
Result<PoolSummary> check_backup(const fs::path& staging, const fs::path& backup) {
    auto db = open_existing(store::StoreSpec{store::Engine::sqlite, staging.string()}); // a backup is a SQLite file
    if (!db) {
        Error e = db.error();
        e.message = "`" + backup.string() + "` is not a usable pool backup: " + e.message;
        e.field = "--restore";
        return e;
    }
    Coordinator check(**db, system_clock());
    if (auto st = check.start(); !st) {
        Error e = st.error();
        e.message = "`" + backup.string() + "` does not check out: " + e.message;
        e.field = "--restore";
        return e;
    }
    auto records = (*db)->load();
    if (!records) {
        return records.error();
    }
    PoolSummary summary = summarize(*records);
    // The restore is recorded in the copy itself, before it is put in place: a coordinator that starts
    // on it (now, or later after --restore-only) reads from it that what the backup says of its
    // workers is unconfirmed until each reports in (LiveWorker::unconfirmed).
    store::Changes c;
    store::AuditRecord a;
    a.at_ms = system_clock().now_ms();
    a.action = "pool.restore";
    a.target = "pool";
    a.detail = nlohmann::json{{"backup", backup.filename().string()},
                              {"backup_last_change_ms", summary.last_change_ms},
                              {"workers", summary.workers}}
                   .dump();
    c.audit.push_back(std::move(a));
    if (auto st = (*db)->apply(c); !st) {
        return st.error();
    }
    return summary;
}

} // namespace

Result<RestoreReport> restore_pool(const RestoreOptions& options) {
    auto spec = store::parse_store_spec(options.db);
    if (!spec) {
        return spec.error();
    }
    if (spec->engine != store::Engine::sqlite) {
        return make_error(ErrorCode::not_implemented, "--restore works on a SQLite pool only", "--db");
    }
    const fs::path target = spec->location;
    std::error_code ec;
    if (!fs::is_regular_file(options.backup, ec)) {
        return make_error(ErrorCode::not_found, "no backup file at `" + options.backup.string() + "`", "--restore");
    }
    auto lock = store::lock_database(target);
    if (!lock) {
        return lock.error();
    }
    const fs::path staging = target.string() + ".restoring";
    fs::remove(staging, ec);
    if (auto st = util::create_private_file(staging); !st) {
        return st.error();
    }
    // Removes the copy unless it was put in place.
    struct Cleanup {
        fs::path path;
        bool keep = false;
        ~Cleanup() {
            if (!keep) {
                std::error_code ignored;
                fs::remove(path, ignored);
                fs::remove(path.string() + "-journal", ignored);
            }
        }
    } cleanup{staging};
    if (!fs::copy_file(options.backup, staging, fs::copy_options::overwrite_existing, ec)) {
        return make_error(ErrorCode::io, "cannot copy `" + options.backup.string() + "` to `" + staging.string() +
                                             "`: " + ec.message());
    }
    RestoreReport report;
    auto restored = check_backup(staging, options.backup);
    if (!restored) {
        return restored.error();
    }
    report.restored = *restored;

    if (fs::exists(target, ec)) {
        auto current = load_pool(*spec);
        if (!current && !options.force) {
            return make_error(ErrorCode::conflict,
                              "`" + target.string() + "` cannot be read as a pool (" + current.error().message +
                                  "); --force-restore replaces it with the backup",
                              "--db");
        }
        if (current) {
            report.replaced = summarize(*current);
            if (report.replaced->last_change_ms > report.restored.last_change_ms && !options.force) {
                return make_error(ErrorCode::conflict,
                                  "`" + target.string() + "` changed after the backup was taken (its last change " +
                                      util::utc_text_ms(report.replaced->last_change_ms) + ", the backup's " +
                                      util::utc_text_ms(report.restored.last_change_ms) + "; " +
                                      std::to_string(report.replaced->jobs) + " jobs there, " +
                                      std::to_string(report.restored.jobs) +
                                      " in the backup); --force-restore replaces it and loses what is newer",
                                  "--restore");
            }
        }
    }
    // The old pool was closed cleanly above (its WAL folded in); what is left of it beside the file
    // must not be applied to the restored one.
    for (const char* suffix : {"-wal", "-shm", "-journal"}) {
        fs::remove(target.string() + suffix, ec);
    }
    fs::rename(staging, target, ec);
    if (ec) {
        return make_error(ErrorCode::io,
                          "cannot put the backup in place at `" + target.string() + "`: " + ec.message());
    }
    cleanup.keep = true;
    return report;
}

} // namespace gpupool::coordinator
