// restore_pool: `gpupool coordinator --restore FILE` puts a backup (`gpupool admin backup`) in the
// place of the pool's database before the coordinator starts on it.
//
// Rules:
// - The backup is checked before anything is replaced: it must open as a pool (an older schema is
//   migrated forward, a newer one refused) and its ledger must balance and agree with its cached
//   balances (the coordinator's own start-up check). It is copied first; the file given is only read.
// - A database already at the target that changed after the backup's last change is not replaced
//   unless `force` (its newer jobs, credits and tokens would be lost); one that cannot be read as a
//   pool is replaced only with `force` too.
// - The target's lock (`<db>.lock`) is held throughout, so a coordinator running on it is a
//   conflict. The copy is put in place by a rename: the target is the old pool or the whole backup,
//   never a mix.
// - The copy records the restore (a `pool.restore` audit record, by "this machine"): the coordinator
//   that starts on it shows the backup's workers offline and their attempts unconfirmed until each
//   worker reports in.
// - SQLite only for now; a PostgreSQL target is refused (not_implemented), as the store is.
#pragma once

#include "core/util/result.hpp"

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace gpupool::coordinator {

// What a pool holds, to tell two of them apart.
struct PoolSummary {
    std::int64_t teams = 0;
    std::int64_t tokens = 0;
    std::int64_t workers = 0;
    std::int64_t jobs = 0;
    std::int64_t attempts = 0;
    std::int64_t ledger_entries = 0;
    std::int64_t last_change_ms = 0; // the latest time any record names (0: an empty pool)
};

struct RestoreOptions {
    std::filesystem::path backup;
    std::string db; // the coordinator's --db
    bool force = false;
};

struct RestoreReport {
    PoolSummary restored;
    std::optional<PoolSummary> replaced; // what was at the target (nullopt: nothing, or unreadable)
};

Result<RestoreReport> restore_pool(const RestoreOptions& options);

} // namespace gpupool::coordinator
