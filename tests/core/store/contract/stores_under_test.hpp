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
