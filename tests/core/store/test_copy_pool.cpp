// copy_pool (what `gpupool admin migrate` runs) from every store to every store: records, a capped
// log's gap, outputs, input archives, the audit log and samples arrive, the copy checks out, and a
// target that already holds a pool is refused untouched.
#include "core/store/copy_pool.hpp"
#include "core/store/sqlite_store.hpp"
#include "core/util/sha256.hpp"
#include "tests/core/store/contract/stores_under_test.hpp"
#include "tests/support.hpp"

#include <catch2/catch.hpp>

#include <fstream>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_copy_pool {

using namespace gpupool;
using namespace gpupool::store;
using test::StoreUnderTest;
namespace fs = std::filesystem;

namespace {

std::unique_ptr<Store> open(const StoreUnderTest& kind, const fs::path& dir) {
    auto s = kind.open(dir, {});
    INFO(kind.kind << ": " << (s ? std::string() : s.error().describe()));
    REQUIRE(s);
    return std::move(*s);
}

fs::path file_with(const fs::path& dir, const std::string& name, const std::string& bytes) {
    const fs::path p = dir / name;
    std::ofstream(p, std::ios::binary) << bytes;
    return p;
}

// The pool old_pool_records describes at the current schema, with a log whose middle a cap dropped,
// outputs, an input archive, two audit records and a sample.
void fill(Store& s, const fs::path& scratch) {
    REQUIRE(s.apply(test::old_pool_records({8, "8", true})));
    const AttemptId a(1);
    REQUIRE(s.append_log(a, 0, "head-"));
    REQUIRE(s.append_log(a, 5, "middle-"));
    REQUIRE(s.append_log(a, 12, "tail"));
    REQUIRE(s.drop_log_range(a, 5, 12));
    REQUIRE(s.put_output(a, file_with(scratch, "out.tar", "tar bytes"), util::sha256_hex("tar bytes")));
    REQUIRE(s.put_input_blob(TeamId(2), util::sha256_hex("inputs"), file_with(scratch, "in.tar", "inputs"), 110));
    Changes c;
    c.audit.push_back({0, 2000, TokenId(1), "team.create", "fellows", R"({"weight":1})"});
    c.audit.push_back({0, 2001, std::nullopt, "token.recover", "admin", "{}"});
    c.samples.push_back({3000, 1, 2, 2000, 1000, 3, 1});
    REQUIRE(s.apply(c));
}

} // namespace

TEST_CASE("copy_pool: every store copies to every store, whole and checked", "[store][migrate][contract]") {
    for (const StoreUnderTest& from_kind : test::stores_under_test()) {
        for (const StoreUnderTest& to_kind : test::stores_under_test()) {
            if (test::store_skipped(from_kind) || test::store_skipped(to_kind)) {
                continue;
            }
            DYNAMIC_SECTION(from_kind.kind << " to " << to_kind.kind) {
                test::TempDir dir;
                fs::create_directories(dir.path() / "from");
                fs::create_directories(dir.path() / "to");
                auto from = open(from_kind, dir.path() / "from");
                auto to = open(to_kind, dir.path() / "to");
                fill(*from, dir.path());
                std::vector<std::string> said;
                auto report = copy_pool(*from, *to, [&](const std::string& line) { said.push_back(line); });
                INFO((report ? std::string() : report.error().describe()));
                REQUIRE(report);
                CHECK(report->teams == 2);
                CHECK(report->tokens == 3);
                CHECK(report->jobs == 1);
                CHECK(report->attempts == 1);
                CHECK(report->ledger_entries == 1);
                CHECK(report->log_bytes == 9); // "head-" and "tail": the dropped middle stays dropped
                CHECK(report->outputs == 1);
                CHECK(report->input_blobs == 1);
                CHECK(report->audit_records == 2);
                CHECK(report->samples == 1);
                CHECK_FALSE(said.empty());

                const AttemptId a(1);
                CHECK(*to->log_ranges(a) == std::vector<LogRange>{{0, 5}, {12, 16}});
                CHECK(*to->read_log(a, 0, 5) == "head-");
                CHECK(*to->log_resume_offset(a, 5) == std::optional<std::int64_t>(12));
                CHECK(*to->read_log(a, 12, 100) == "tail");
                CHECK(*to->log_length(a) == 16);
                CHECK(*to->get_output(a) == std::optional<std::string>("tar bytes"));
                CHECK(*to->get_input_blob(TeamId(2), util::sha256_hex("inputs")) == std::optional<std::string>("inputs"));
                CHECK(*to->list_input_blobs() == *from->list_input_blobs());
                auto audit = to->read_audit({});
                REQUIRE(audit);
                REQUIRE(audit->size() == 2);
                CHECK(audit->front().action == "token.recover"); // newest first, as in the source
                CHECK(audit->back().actor == std::optional<TokenId>(TokenId(1)));
                CHECK(to->read_samples(0, 10)->size() == 1);
                auto loaded = to->load();
                REQUIRE(loaded);
                CHECK(loaded->jobs == from->load()->jobs);
                CHECK(loaded->balances == from->load()->balances);

                // A second copy into the same target is refused and changes nothing there.
                auto again = copy_pool(*from, *to);
                REQUIRE_FALSE(again);
                CHECK(again.error().code == ErrorCode::conflict);
                CHECK(to->load()->jobs.size() == 1);
                CHECK(*to->log_length(a) == 16);
            }
        }
    }
}

TEST_CASE("copy_pool: a store's backup() is a SQLite pool file with everything in it", "[store][migrate][contract]") {
    for (const StoreUnderTest& kind : test::stores_under_test()) {
        if (test::store_skipped(kind)) {
            continue;
        }
        DYNAMIC_SECTION(kind.kind) {
            test::TempDir dir;
            fs::create_directories(dir.path() / "pool");
            auto s = open(kind, dir.path() / "pool");
            fill(*s, dir.path());
            const fs::path file = dir.path() / "backup.db";
            auto st = s->backup(file);
            INFO((st ? std::string() : st.error().describe()));
            REQUIRE(st);
            CHECK((fs::status(file).permissions() & fs::perms::all) == (fs::perms::owner_read | fs::perms::owner_write));
            auto copy = SqliteStore::open(file, {});
            REQUIRE(copy);
            CHECK((*copy)->load()->jobs == s->load()->jobs);
            CHECK((*copy)->load()->ledger == s->load()->ledger);
            CHECK(*(*copy)->log_ranges(AttemptId(1)) == std::vector<LogRange>{{0, 5}, {12, 16}});
            CHECK(*(*copy)->get_output(AttemptId(1)) == std::optional<std::string>("tar bytes"));
            CHECK((*copy)->read_audit({})->size() == 2);
            // A file that holds something already is never overwritten.
            REQUIRE_FALSE(s->backup(file));
        }
    }
}

} // namespace test_copy_pool
} // namespace
