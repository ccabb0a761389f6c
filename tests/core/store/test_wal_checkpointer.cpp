// The SQLite store's background checkpoints (WalCheckpointer): the log is copied into the database
// file after commits, without a commit waiting for it, and the log still starts over instead of
// growing. Real SQLite files.
#include "core/store/sqlite_store.hpp"
#include "tests/support.hpp"

#include <SQLiteCpp/SQLiteCpp.h>
#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <thread>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_wal_checkpointer {

using namespace gpupool;
using namespace gpupool::store;

namespace {

constexpr int k_commits = 400;
constexpr int k_rows_per_commit = 1000; // about 15 pages a commit: 6,000 in all

// Writes k_commits commits of samples; returns how many samples there are.
std::int64_t write_samples(SqliteStore& s) {
    std::int64_t at = 0;
    for (int i = 0; i < k_commits; ++i) {
        Changes c;
        for (int r = 0; r < k_rows_per_commit; ++r) {
            c.samples.push_back({++at, 10, 20, 20'000, 12'345, 678, 901});
        }
        REQUIRE(s.apply(c));
    }
    return at;
}

std::int64_t wal_pages(const std::filesystem::path& db) {
    const auto wal = std::filesystem::path(db.string() + "-wal");
    return std::filesystem::exists(wal) ? static_cast<std::int64_t>(std::filesystem::file_size(wal)) / 4096 : 0;
}

std::int64_t samples_in(const std::filesystem::path& db) {
    SQLite::Database d(db.string(), SQLite::OPEN_READWRITE);
    return d.execAndGet("SELECT COUNT(*) FROM pool_samples").getInt64();
}

} // namespace

TEST_CASE("store: the log is copied into the database in the background, and still starts over",
          "[store][checkpoint]") {
    test::TempDir dir;
    const auto path = dir.path() / "pool.db";
    auto s = SqliteStore::open(path).value();
    const std::int64_t rows = write_samples(*s);

    // The log started over at about k_wal_restart_frames pages instead of holding all ~6,000 (a
    // checkpoint in the background alone never lets it: the writer keeps appending while it runs).
    CHECK(wal_pages(path) < 2 * k_wal_restart_frames);

    // Soon after the last commit the checkpointer has copied the whole log into the database file:
    // a copy of the file without its log holds every sample (the writer's own checkpoint leaves up
    // to k_wal_restart_frames pages of the last ones in the log).
    WalCheckpointer::Stats st;
    for (int i = 0; i < 100; ++i) {
        st = s->checkpoint_stats();
        if (st.last_covers == k_commits) { // a checkpoint began after the last commit
            break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    CHECK(st.commits == k_commits);
    REQUIRE(st.last_covers == k_commits);
    // Batched: one run for many commits.
    CHECK(st.runs > 0);
    CHECK(st.runs < k_commits / 2);
    CHECK(st.failures < st.runs);
    CHECK(st.last_log > 0);
    CHECK(st.last_copied == st.last_log);
    const auto copy = dir.path() / "copy.db";
    std::filesystem::copy_file(path, copy);
    CHECK(samples_in(copy) == rows);

    // And nothing is lost when it closes and reopens.
    s.reset();
    CHECK(samples_in(path) == rows);
}

TEST_CASE("store: without background checkpoints SQLite's own keep the log bounded", "[store][checkpoint]") {
    test::TempDir dir;
    const auto path = dir.path() / "pool.db";
    SqliteOptions o;
    o.checkpoint_delay = std::chrono::milliseconds(0);
    auto s = SqliteStore::open(path, o).value();
    const std::int64_t rows = write_samples(*s);
    CHECK(wal_pages(path) < 2 * k_wal_restart_frames);
    CHECK(s->checkpoint_stats().runs == 0);
    s.reset();
    CHECK(samples_in(path) == rows);
}

} // namespace test_wal_checkpointer
} // namespace
