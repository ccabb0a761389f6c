// The attempt outcome on the wire: every value has a name, and each name reads back to its value;
// anything else is not an outcome.
#include "core/api/outcome.hpp"

#include <catch2/catch.hpp>

#include <string>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_outcome {

using namespace gpupool;

TEST_CASE("outcome: names read back, unknown names do not", "[api][outcome]") {
    for (auto o : {api::Outcome::exited, api::Outcome::worker_fault, api::Outcome::owner_preempted,
                   api::Outcome::image_unavailable}) {
        auto back = api::outcome_from_string(api::to_string(o));
        REQUIRE(back.has_value());
        CHECK(*back == o);
    }
    CHECK(std::string(api::to_string(api::Outcome::owner_preempted)) == "owner_preempted");
    CHECK(std::string(api::to_string(api::Outcome::image_unavailable)) == "image_unavailable");
    CHECK_FALSE(api::outcome_from_string("Exited"));
    CHECK_FALSE(api::outcome_from_string(""));
    CHECK_FALSE(api::outcome_from_string(std::string("exited\0", 7)));
}

} // namespace test_outcome
} // namespace
