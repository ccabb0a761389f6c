// copy_pool: a whole pool from one Store into another, verified — what `gpupool admin migrate` runs
// (SQLite to PostgreSQL, or back) and what a PostgreSQL store's backup() writes into a SQLite file.
//
// Only the Store interface is used, so any engine copies to any other. The target must be empty (no
// teams, tokens or jobs): a copy never merges two pools. Records go over in one apply() (one
// transaction); then each attempt's log (its stored ranges, gaps where a capped log dropped its
// middle kept as gaps), outputs, every team's input archives, the audit log (oldest first) and the
// utilisation samples. Before it reports success the copy is checked: the target's counts of every
// kind equal the source's, every log's length matches, and the target's ledger balances (the sum of
// all balances is zero and each equals the sum of its entries).
#pragma once

#include "core/store/store.hpp"

#include <cstdint>
#include <functional>
#include <string>

namespace gpupool::store {

struct CopyReport {
    std::int64_t teams = 0;
    std::int64_t tokens = 0;
    std::int64_t workers = 0;
    std::int64_t sweeps = 0;
    std::int64_t jobs = 0;
    std::int64_t attempts = 0;
    std::int64_t ledger_entries = 0;
    std::int64_t grants = 0;
    std::int64_t audit_records = 0;
    std::int64_t samples = 0;
    std::int64_t log_bytes = 0;
    std::int64_t outputs = 0;
    std::int64_t input_blobs = 0;
    std::int64_t evidence = 0; // pieces of attempts' evidence
    bool operator==(const CopyReport&) const = default;
};

// Progress lines for a person watching a long copy ("copied the logs of 1,200 of 5,000 attempts").
using CopyProgress = std::function<void(const std::string&)>;

// Copies `from` into `to` and verifies the copy. Errors: conflict when `to` is not empty, io from
// either store, internal (naming the first difference) when the verification finds one.
Result<CopyReport> copy_pool(Store& from, Store& to, const CopyProgress& progress = {});

} // namespace gpupool::store
