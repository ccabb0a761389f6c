// The process runtime's session records: one append-only file that says which sessions a worker
// killed with SIGKILL left behind, read back with older workers' .pid files, kept small.
#include "tests/support.hpp"
#include "worker/runtime/session_records.hpp"

#include <catch2/catch.hpp>

#include <fstream>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_session_records {

using namespace gpupool;
namespace fs = std::filesystem;

namespace {

std::vector<std::string> names(const std::vector<worker::SessionRecords::Record>& records) {
    std::vector<std::string> out;
    for (const auto& r : records) {
        out.push_back(r.name);
    }
    return out;
}

} // namespace

TEST_CASE("session records: what a killed worker left is read back", "[runtime][process]") {
    test::TempDir dir;
    {
        worker::SessionRecords records(dir.path());
        records.clear();
        records.started({"job-a", 101, 5000});
        records.started({"job-b", 102, 6000});
        records.started({"job-c", 103, 7000});
        records.ended("job-a");
        // No destructor semantics matter: a SIGKILLed worker leaves the file as it is now.
    }
    std::ofstream(dir.path() / "sessions", std::ios::app) << "+ torn-line 12\n"; // cut short: ignored
    std::ofstream(dir.path() / "job-old.pid") << "104 8000\n";                  // an older worker's record
    worker::SessionRecords next(dir.path());
    const auto left = next.leftovers();
    CHECK(names(left) == std::vector<std::string>{"job-b", "job-c", "job-old"});
    CHECK(left[0].session == 102);
    CHECK(left[0].start_time == 6000);
    CHECK(left[2].session == 104);
    next.clear();
    CHECK(next.leftovers().empty());
    CHECK_FALSE(fs::exists(dir.path() / "job-old.pid"));
    CHECK(fs::file_size(next.file()) == 0);
}

TEST_CASE("session records: the file empties when nothing runs and stays small while jobs do", "[runtime][process]") {
    test::TempDir dir;
    worker::SessionRecords records(dir.path(), 200);
    records.clear();
    records.started({"one", 1, 1});
    records.ended("one");
    CHECK(fs::file_size(records.file()) == 0);

    records.started({"long-running", 7, 70});
    for (int i = 0; i < 100; ++i) {
        records.started({"short-" + std::to_string(i), 1000 + i, 1});
        records.ended("short-" + std::to_string(i));
        REQUIRE(fs::file_size(records.file()) <= 200 + 64);
    }
    worker::SessionRecords reader(dir.path());
    CHECK(names(reader.leftovers()) == std::vector<std::string>{"long-running"});
    records.ended("long-running");
    CHECK(fs::file_size(records.file()) == 0);
}

TEST_CASE("session records: without a directory nothing is written", "[runtime][process]") {
    worker::SessionRecords none;
    none.clear();
    none.started({"x", 1, 1});
    none.ended("x");
    CHECK(none.leftovers().empty());
}

} // namespace test_session_records
} // namespace
