// HandedOut: what a worker says as `known` in its polls stays within the coordinator's cap however
// fast work comes, and ages out.
#include "worker/agent/handed_out.hpp"

#include <catch2/catch.hpp>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_handed_out {

using namespace gpupool;
using worker::HandedOut;

TEST_CASE("handed out: each assignment once, newest first, aged out after keep_ms", "[agent][known]") {
    HandedOut h(60'000);
    CHECK(h.note(AttemptId(1), 1'000));
    CHECK(h.note(AttemptId(2), 2'000));
    CHECK_FALSE(h.note(AttemptId(1), 3'000)); // held already: not fresh, and its time stays
    CHECK(h.known(3'000) == std::vector<AttemptId>{AttemptId(2), AttemptId(1)});
    CHECK(h.known(61'500) == std::vector<AttemptId>{AttemptId(2)}); // 1 is 60.5 s old
    CHECK(h.known(62'001).empty());
    CHECK(h.size() == 0);
    CHECK(h.note(AttemptId(1), 62'001)); // forgotten: fresh again
}

TEST_CASE("handed out: a busy worker names at most the coordinator's 1,024, the newest", "[agent][known]") {
    // A hundred jobs a second for 15 s: 1,500 handed within the minute.
    HandedOut h(60'000);
    for (std::int64_t i = 1; i <= 1'500; ++i) {
        REQUIRE(h.note(AttemptId(i), i * 10));
    }
    const auto known = h.known(15'000);
    REQUIRE(known.size() == HandedOut::k_max);
    CHECK(HandedOut::k_max == 1'024);
    CHECK(known.front() == AttemptId(1'500));
    CHECK(known.back() == AttemptId(1'500 - 1'024 + 1));
    CHECK(h.size() == 1'024);
}

} // namespace test_handed_out
} // namespace
