#include "core/store/wal_checkpointer.hpp"

#include <spdlog/spdlog.h>

#include <sqlite3.h>
#include <string>

namespace gpupool::store {

namespace {

// sqlite3_wal_hook's callback, on the writer's thread after each commit, with the log's size.
int on_commit(void* self, sqlite3* writer, const char* schema, int log_pages) {
    auto* c = static_cast<WalCheckpointer*>(self);
    c->committed();
    if (log_pages >= k_wal_restart_frames) {
        // What SQLite's automatic checkpoint would do here; the background one left little to copy.
        (void)sqlite3_wal_checkpoint_v2(writer, schema, SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
    }
    return SQLITE_OK;
}

} // namespace

Result<std::unique_ptr<WalCheckpointer>> WalCheckpointer::start(const std::filesystem::path& path,
                                                                std::chrono::milliseconds delay) {
    sqlite3* connection = nullptr;
    // NOMUTEX: the connection belongs to the checkpointer's thread alone.
    const int rc = sqlite3_open_v2(path.c_str(), &connection, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nullptr);
    if (rc != SQLITE_OK) {
        std::string why = connection != nullptr ? sqlite3_errmsg(connection) : sqlite3_errstr(rc);
        sqlite3_close(connection);
        return make_error(ErrorCode::io, "database: cannot open `" + path.string() + "` to checkpoint it: " + why);
    }
    // A checkpoint that meets the writer's lock gives up at once (PASSIVE does not wait anyway).
    sqlite3_busy_timeout(connection, 0);
    // Its copies are made durable as the writer's commits are (the database file is fsynced).
    sqlite3_exec(connection, "PRAGMA synchronous=FULL", nullptr, nullptr, nullptr);
    return std::unique_ptr<WalCheckpointer>(new WalCheckpointer(connection, delay));
}

WalCheckpointer::WalCheckpointer(sqlite3* connection, std::chrono::milliseconds delay)
    : m_connection(connection), m_delay(delay), m_thread([this] { run(); }) {}

WalCheckpointer::~WalCheckpointer() {
    {
        util::MutexLock lock(m_mu);
        m_stop = true;
    }
    m_cv.notify_all();
    m_thread.join();
    sqlite3_close(m_connection);
}

void WalCheckpointer::install(sqlite3* writer) {
    sqlite3_wal_hook(writer, on_commit, this); // replaces SQLite's automatic checkpoint
}

void WalCheckpointer::committed() {
    bool wake = false;
    {
        util::MutexLock lock(m_mu);
        m_stats.commits += 1;
        wake = !m_pending;
        m_pending = true;
    }
    if (wake) {
        m_cv.notify_one();
    }
}

WalCheckpointer::Stats WalCheckpointer::stats() const {
    util::MutexLock lock(m_mu);
    return m_stats;
}

void WalCheckpointer::run() {
    while (auto covers = wait_for_commits()) {
        checkpoint(*covers);
    }
}

std::optional<std::int64_t> WalCheckpointer::wait_for_commits() {
    util::MutexLock lock(m_mu);
    m_cv.wait(lock, [&]() REQUIRES(m_mu) { return m_stop || m_pending; });
    // Let the commits that follow this one gather: one checkpoint covers them all.
    m_cv.wait_for(lock, m_delay, [&]() REQUIRES(m_mu) { return m_stop; });
    if (m_stop) {
        return std::nullopt;
    }
    m_pending = false; // a commit from now on asks for the next one
    return m_stats.commits;
}

void WalCheckpointer::checkpoint(std::int64_t covers) {
    int log = 0;
    int copied = 0;
    const int rc = sqlite3_wal_checkpoint_v2(m_connection, nullptr, SQLITE_CHECKPOINT_PASSIVE, &log, &copied);
    if (rc != SQLITE_OK) {
        spdlog::debug("background checkpoint: {}", sqlite3_errmsg(m_connection));
    }
    util::MutexLock lock(m_mu);
    m_stats.runs += 1;
    m_stats.failures += rc == SQLITE_OK ? 0 : 1;
    m_stats.last_covers = covers;
    m_stats.last_log = log;
    m_stats.last_copied = copied;
}

} // namespace gpupool::store
