// WalCheckpointer: copies a SQLite write-ahead log back into its database on a thread of its own,
// so that the thread that commits does not stop to do it.
//
// In WAL mode every commit appends to the `-wal` file, and by default the committing connection
// copies the log into the database once the log holds 1,000 pages (a checkpoint: that many random
// writes and an fsync of the database file), and that commit waits for it. What moving the copying
// here buys was measured small (bench/README.md, "Checkpoints off the coordinator thread"): a
// lower p99 of commits while the CPUs are busy, no change beyond the noise otherwise.
//
// The rules:
//  - The checkpointer has its own connection to the file and runs PASSIVE checkpoints, which never
//    block the writer: it keeps committing while pages are copied. One runs `delay` after the first
//    commit since the last one (commits in between are covered by it), none while nothing commits.
//  - The writer's connection keeps its own checkpoint at k_wal_restart_frames pages (install() sets it
//    in place of SQLite's automatic one). By then the checkpointer has copied almost every page, so
//    it costs about one fsync. It is still needed: only a checkpoint that ends with nothing left to
//    copy lets the next commit start the log over, and under load the background one never does
//    (the writer appends while it runs), so without it the log would grow without bound.
//  - A failed checkpoint changes nothing (the log still holds every commit) and is counted, not
//    raised; the next commit schedules another.
//
// Thread safety: committed() (through the hook install() sets) and stats() may be called from any
// thread; install() and the destructor from the writer's thread, which must remove the hook (or
// close its connection) before the checkpointer is destroyed. The destructor waits for a
// checkpoint in progress.
#pragma once

#include "core/util/result.hpp"
#include "core/util/thread_safety.hpp"

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <thread>

struct sqlite3;

namespace gpupool::store {

inline constexpr int k_wal_restart_frames = 1000; // SQLite's own automatic checkpoint threshold
inline constexpr std::chrono::milliseconds k_checkpoint_delay{100}; // the default delay after a commit

class WalCheckpointer {
public:
    struct Stats {
        std::int64_t commits = 0;     // committed() calls so far
        std::int64_t runs = 0;        // checkpoints attempted
        std::int64_t failures = 0;    // of those, failed or busy
        std::int64_t last_covers = 0; // the commits made before the last one began
        std::int64_t last_log = 0;    // pages in the log at the last one
        std::int64_t last_copied = 0; // of those, copied into the database by then
    };

    // Opens the checkpointer's connection to the database at `path` (in WAL mode already) and
    // starts its thread.
    static Result<std::unique_ptr<WalCheckpointer>> start(const std::filesystem::path& path,
                                                          std::chrono::milliseconds delay);
    ~WalCheckpointer();
    WalCheckpointer(const WalCheckpointer&) = delete;
    WalCheckpointer& operator=(const WalCheckpointer&) = delete;

    // Makes `writer`'s commits call committed(), and `writer` checkpoint itself at
    // k_wal_restart_frames pages (the rules above).
    void install(sqlite3* writer);
    // A commit happened: a checkpoint runs within `delay`.
    void committed();
    Stats stats() const;

private:
    WalCheckpointer(sqlite3* connection, std::chrono::milliseconds delay);
    void run();
    // Waits for a commit and then `delay`; returns the commits so far, or nothing: stop.
    std::optional<std::int64_t> wait_for_commits() EXCLUDES(m_mu);
    void checkpoint(std::int64_t covers) EXCLUDES(m_mu);

    sqlite3* m_connection; // the checkpointer's own; used by its thread only
    std::chrono::milliseconds m_delay;
    mutable util::Mutex m_mu;
    std::condition_variable_any m_cv;
    bool m_pending GUARDED_BY(m_mu) = false;
    bool m_stop GUARDED_BY(m_mu) = false;
    Stats m_stats GUARDED_BY(m_mu){};
    std::thread m_thread; // last: started once the rest is set
};

} // namespace gpupool::store
