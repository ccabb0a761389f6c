// The BlobShelf (core/coordinator/blob_shelf.hpp) on a real SQLite file: a capped log keeps its head
// and its newest bytes and a read from the dropped middle resumes after it; an input archive is its
// team's alone. The records the blobs hang on (a team, a job, an attempt) come from a real
// coordinator (credit_pool.hpp).
#include "core/coordinator/blob_shelf.hpp"
#include "core/util/sha256.hpp"
#include "tests/core/coordinator/credit_pool.hpp"

#include <catch2/catch.hpp>

#include <string>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_blob_shelf {

using namespace gpupool;
using namespace gpupool::test::credit_pool;

TEST_CASE("blob shelf: a log over its cap drops whole chunks between its head and its newest bytes",
          "[coordinator][blobs]") {
    CreditPool p(false); // credits not enforced: the job runs without a grant
    p.submit(half_l4("chatty"));
    const auto attempt = p.place_and_start();
    REQUIRE(attempt);
    BlobShelf& shelf = p.coord->blobs();
    // A cap of 100 bytes keeps the first 50 (log_head_bytes) and the newest 50, chunk by chunk.
    constexpr std::int64_t cap = 100;
    auto a = shelf.append_log(*attempt, 0, std::string(50, 'a'), cap);
    REQUIRE(a);
    CHECK(a->stored_bytes == 50);
    REQUIRE(shelf.append_log(*attempt, 50, std::string(30, 'b'), cap));
    REQUIRE(shelf.append_log(*attempt, 80, std::string(30, 'c'), cap)); // 110 bytes: b is not wholly droppable yet
    auto whole = shelf.read_log(*attempt, 0, 1000);
    REQUIRE(whole);
    CHECK(whole->data == std::string(50, 'a') + std::string(30, 'b') + std::string(30, 'c'));
    auto d = shelf.append_log(*attempt, 110, std::string(30, 'd'), cap); // 140: b lies wholly in [50, 90)
    REQUIRE(d);
    CHECK(d->length == 140);
    // A repeated chunk stores nothing and drops nothing more.
    auto again = shelf.append_log(*attempt, 110, std::string(30, 'd'), cap);
    REQUIRE(again);
    CHECK(again->stored_bytes == 0);

    auto from_start = shelf.read_log(*attempt, 0, 1000);
    REQUIRE(from_start);
    CHECK(from_start->from == 0);
    CHECK(from_start->data == std::string(50, 'a') + std::string(30, 'c') + std::string(30, 'd'));
    REQUIRE(from_start->length);
    CHECK(*from_start->length == 140);
    // A read that starts in the dropped chunk resumes where the stored bytes do.
    auto middle = shelf.read_log(*attempt, 55, 1000);
    REQUIRE(middle);
    CHECK(middle->from == 80);
    CHECK(middle->data == std::string(30, 'c') + std::string(30, 'd'));
    // Past the end: nothing, from where it was asked.
    auto past = shelf.read_log(*attempt, 140, 1000);
    REQUIRE(past);
    CHECK(past->from == 140);
    CHECK(past->data.empty());
    CHECK_FALSE(shelf.fenced()); // SQLite has no second coordinator to fence it
}

TEST_CASE("blob shelf: an input archive is its team's alone, stored once", "[coordinator][blobs]") {
    CreditPool p;
    BlobShelf& shelf = p.coord->blobs();
    const std::string body = "not really a tar, the shelf does not look";
    const auto file = p.dir.write("inputs.tar", body);
    const std::string sha = util::sha256_hex(body);
    const store::TeamId fellows(1);
    const store::TeamId owners(2);
    REQUIRE(shelf.put_input(fellows, sha, file, 1000));
    REQUIRE(shelf.put_input(fellows, sha, file, 2000)); // again: a no-op
    auto size = shelf.input_size(fellows, sha);
    REQUIRE(size);
    REQUIRE(*size);
    CHECK(**size == static_cast<std::int64_t>(body.size()));
    auto read = shelf.input(fellows, sha);
    REQUIRE(read);
    REQUIRE(*read);
    CHECK(**read == body);
    // Another team naming the same digest finds nothing, as for an unknown one.
    auto theirs = shelf.input_size(owners, sha);
    REQUIRE(theirs);
    CHECK_FALSE(*theirs);
    auto theirs_read = shelf.input(owners, sha);
    REQUIRE(theirs_read);
    CHECK_FALSE(*theirs_read);
    CHECK(shelf.max_blob_bytes() > static_cast<std::int64_t>(body.size()));
}

} // namespace test_blob_shelf
} // namespace
