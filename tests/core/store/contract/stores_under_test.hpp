// The Store implementations the contract suite (test_store_contract.cpp) runs every case against,
// as the runtime tests run one table against every container runtime. Adding an engine is one
// entry in stores_under_test() (stores_under_test.cpp): how to open it under a test's directory and,
// if it has any, how to write a pool as each of its earlier schema versions left it.
#pragma once

#include "core/store/store.hpp"

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace gpupool::test {

struct StoreOpenOptions {
    std::int64_t max_blob_bytes = 0; // 0: the engine's own cap; else lowered to this (tests of the cap)
};

// A pool as an earlier gpupool left it: its data is old_pool_records(version), with the fields the
// version had no column for left at their defaults (what an upgrade must fill in).
struct OldVersion {
    int schema_version = 0;
    std::string label;          // for the test's name: "4, first shipped"
    bool idempotency_key = true; // version 4 first shipped without sweeps.idempotency_key
};

// One column of a table as the engine's own catalogue lists it (PRAGMA table_info,
// information_schema.columns), for checking the records' column descriptions against the schema.
struct LiveColumn {
    std::string name;
    std::string type;      // lower case: "integer", "bigint", "text", ...
    bool not_null = false; // NULL is refused (a primary key counts)
    bool filled = false;   // the database gives it a value when an INSERT leaves it out (a default, an identity)
};

struct StoreUnderTest {
    std::string kind;
    // Opens (creating on first use) the store kept under `dir`; the same `dir` reopens the same data.
    std::function<Result<std::unique_ptr<store::Store>>(const std::filesystem::path& dir, const StoreOpenOptions&)>
        open;
    // Earlier schema versions this engine shipped, and how to write a pool at one of them under `dir`
    // (with the records `old`; attempt 1's log "hello\n" and outputs "tar bytes"; from version 3 the
    // inputs archive "d1" of team 2 and, at version 3 only, an unowned "d0").
    std::vector<OldVersion> old_versions{};
    std::function<void(const std::filesystem::path& dir, const OldVersion& v, const store::Records& old)> write_old{};
    // The columns of `table` in the store kept under `dir` (opened there before), in order.
    std::function<std::vector<LiveColumn>(const std::filesystem::path& dir, const std::string& table)> live_columns{};
    // Why this engine cannot be tested here (e.g. no PostgreSQL server), or nullopt; unset: always can.
    std::function<std::optional<std::string>()> unavailable{};
};

const std::vector<StoreUnderTest>& stores_under_test();

// Whether a case skips `kind` here: it WARNs why (or FAILs under GPUPOOL_REQUIRE_POSTGRES=1).
bool store_skipped(const StoreUnderTest& kind);

// The records of the pool old_versions write: two teams, three tokens, a worker, a sweep with a job
// and its finished attempt, and from version 2 a grant with its entry and balances.
store::Records old_pool_records(const OldVersion& v);

} // namespace gpupool::test
