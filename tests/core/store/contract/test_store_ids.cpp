// The Store contract for ids (Store::reserve_ids), on every engine: blocks never overlap, they skip
// past stored records, they survive a reopen, and the coordinator's records take their ids from them.
#include "core/store/store.hpp"
#include "tests/core/store/contract/stores_under_test.hpp"
#include "tests/support.hpp"

#include <catch2/catch.hpp>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_store_ids {

using namespace gpupool;
using namespace gpupool::store;
using test::StoreUnderTest;

TEST_CASE("store contract: ids come from the store, in blocks that never overlap", "[store][contract]") {
    for (const StoreUnderTest& kind : test::stores_under_test()) {
        if (test::store_skipped(kind)) {
            continue;
        }
        DYNAMIC_SECTION(kind.kind) {
            test::TempDir dir;
            {
                auto s = kind.open(dir.path(), {});
                REQUIRE(s);
                CHECK(*(*s)->reserve_ids(IdKind::job, 3) == 1);
                CHECK(*(*s)->reserve_ids(IdKind::job, 2) == 4);
                CHECK(*(*s)->reserve_ids(IdKind::attempt, 1) == 1); // each kind counts on its own
                // A record stored with a larger id (a copied pool) pushes the next block past it.
                Changes c;
                c.teams.push_back({TeamId(40), "fellows", 1, 100, std::nullopt, std::nullopt});
                REQUIRE((*s)->apply(c));
                CHECK(*(*s)->reserve_ids(IdKind::team, 10) == 41);
                CHECK(*(*s)->reserve_ids(IdKind::team, 1) == 51);
                auto none = (*s)->reserve_ids(IdKind::sweep, 0);
                REQUIRE_FALSE(none);
            }
            // Reserved ids are never handed out again, though nothing was stored with them.
            auto again = kind.open(dir.path(), {});
            REQUIRE(again);
            CHECK(*(*again)->reserve_ids(IdKind::job, 1) == 6);
            CHECK(*(*again)->reserve_ids(IdKind::team, 1) == 52);
            CHECK(*(*again)->reserve_ids(IdKind::worker, 2) == 1);
        }
    }
}

} // namespace test_store_ids
} // namespace
