// resolve_name: an id or a name to the one id it means (the rule every admin route that takes a
// worker, a team or a token follows).
#include "core/coordinator/resolve_name.hpp"

#include <catch2/catch.hpp>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_resolve_name {

using namespace gpupool;
using coordinator::NamedCandidate;
using coordinator::resolve_name;

namespace {

// Workers 1 `gpu-a`, 2 and 3 both `lab-box`, 4 named `1`.
const std::vector<NamedCandidate> k_workers{
    {1, "gpu-a", "online"}, {2, "lab-box", "offline"}, {3, "lab-box", "online"}, {4, "1", ""}};

} // namespace

TEST_CASE("resolve_name: an id or a name that one candidate has is that candidate", "[coordinator][names]") {
    struct Row {
        const char* text;
        std::int64_t id;
    };
    for (const Row& row : {Row{"1", 1},     // an exact id wins over worker 4, named `1`
                           Row{"3", 3},     // by id, though its name is shared
                           Row{"gpu-a", 1}, // by its name
                           Row{"4", 4}}) {
        INFO(row.text);
        auto got = resolve_name("worker", row.text, k_workers, "worker");
        REQUIRE(got);
        CHECK(*got == row.id);
    }
}

TEST_CASE("resolve_name: a name several candidates have is an error listing each with its id", "[coordinator][names]") {
    auto got = resolve_name("worker", "lab-box", k_workers, "worker");
    REQUIRE_FALSE(got);
    CHECK(got.error().code == ErrorCode::invalid_input);
    CHECK(got.error().field == "worker");
    CHECK(got.error().message == "`lab-box` names 2 workers: 2 (offline), 3 (online); give the id of the one you mean");
}

TEST_CASE("resolve_name: no match is not_found with the nearest name", "[coordinator][names]") {
    struct Row {
        const char* text;
        const char* message;
    };
    const std::vector<NamedCandidate> teams{{1, "fellows", ""}, {2, "owners", ""}};
    for (const Row& row :
         {Row{"fellowz", "no team named `fellowz`; did you mean `fellows`? (see the list)"},
          Row{"ownres", "no team named `ownres`; did you mean `owners`? (see the list)"},
          Row{"zzzzzzzzzz", "no team named `zzzzzzzzzz` (see the list)"}, Row{"9", "no team 9 (see the list)"}}) {
        INFO(row.text);
        auto got = resolve_name("team", row.text, teams, "team", "see the list");
        REQUIRE_FALSE(got);
        CHECK(got.error().code == ErrorCode::not_found);
        CHECK(got.error().field == "team");
        CHECK(got.error().message == row.message);
    }
    // Nothing to name and nothing named: an empty text is bad input; empty names are never suggested.
    auto empty = resolve_name("token", "", {{5, "", ""}}, "token");
    REQUIRE_FALSE(empty);
    CHECK(empty.error().code == ErrorCode::invalid_input);
    auto unnamed = resolve_name("token", "ab", {{5, "", ""}}, "token");
    REQUIRE_FALSE(unnamed);
    CHECK(unnamed.error().message == "no token named `ab`");
}

} // namespace test_resolve_name
} // namespace
