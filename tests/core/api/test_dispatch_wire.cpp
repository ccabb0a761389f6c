// The wire of batched dispatch: several attempts' ends in one request and their answers, and a
// client's wait on its jobs — round trips, and refusals that name the field.
#include "core/api/jobs.hpp"
#include "core/api/worker_protocol.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_dispatch_wire {

using namespace gpupool;
using nlohmann::json;

TEST_CASE("wire: a batch of ends and its answers round-trip", "[api]") {
    const std::vector<api::AttemptEnd> ends{{AttemptId(4), {0, "", api::Outcome::exited}},
                                            {AttemptId(9), {std::nullopt, "gpu fell off", api::Outcome::worker_fault}}};
    auto back = api::attempt_ends_from_json(api::to_json(ends));
    REQUIRE(back.has_value());
    REQUIRE(back->size() == 2);
    CHECK((*back)[0].attempt == AttemptId(4));
    CHECK((*back)[0].completion.exit_code == 0);
    CHECK((*back)[1].completion.outcome == api::Outcome::worker_fault);
    CHECK((*back)[1].completion.reason == "gpu fell off");

    const std::vector<api::EndAnswer> answers{{AttemptId(4), std::nullopt},
                                              {AttemptId(9), make_error(ErrorCode::conflict, "not current", "")}};
    auto read = api::end_answers_from_json(api::to_json(answers));
    REQUIRE(read.has_value());
    REQUIRE(read->size() == 2);
    CHECK_FALSE((*read)[0].error);
    REQUIRE((*read)[1].error);
    CHECK((*read)[1].error->code == ErrorCode::conflict);
    CHECK((*read)[1].error->message == "not current");
}

TEST_CASE("wire: a batch of ends is refused with the element that is wrong", "[api]") {
    auto field_of = [](const json& body) {
        auto r = api::attempt_ends_from_json(body);
        REQUIRE_FALSE(r.has_value());
        return r.error().field;
    };
    CHECK(field_of(json::object()) == "completions");
    CHECK(field_of({{"completions", "all"}}) == "completions");
    CHECK(field_of({{"completions", {{{"attempt", 1}}, {{"attempt", 0}}}}}) == "completions[1].attempt");
    CHECK(field_of({{"completions", {{{"attempt", 1}, {"outcome", "vanished"}}}}}) == "completions[0].outcome");
    CHECK(field_of({{"completions", {{{"attempt", 1}}, {{"attempt", 2}}, {{"attempt", 1}}}}}) == "completions[2].attempt");
    CHECK(field_of({{"completions", {42}}}) == "completions[0]");
    json many = json::array();
    for (std::size_t i = 1; i <= api::k_max_batch_completions + 1; ++i) {
        many.push_back({{"attempt", i}, {"exit_code", 0}});
    }
    CHECK(field_of({{"completions", many}}) == "completions[" + std::to_string(api::k_max_batch_completions) + "]");
    many.erase(many.end() - 1);
    CHECK(api::attempt_ends_from_json({{"completions", many}}).has_value());
}

TEST_CASE("wire: a batch of starts round-trips, and a bad one names the element", "[api]") {
    const std::vector<AttemptId> ids{AttemptId(4), AttemptId(9)};
    auto back = api::attempt_starts_from_json(api::starts_json(ids));
    REQUIRE(back.has_value());
    CHECK(*back == ids);
    auto field_of = [](const json& body) {
        auto r = api::attempt_starts_from_json(body);
        REQUIRE_FALSE(r.has_value());
        return r.error().field;
    };
    CHECK(field_of(json::object()) == "attempts");
    CHECK(field_of({{"attempts", 4}}) == "attempts");
    CHECK(field_of({{"attempts", {4, 0}}}) == "attempts[1]");
    CHECK(field_of({{"attempts", {4, "5"}}}) == "attempts[1]");
    CHECK(field_of({{"attempts", {4, -3}}}) == "attempts[1]");
    CHECK(field_of({{"attempts", {4, 5, 4}}}) == "attempts[2]");
    CHECK(field_of({{"attempts", {4, 1.5}}}) == "attempts[1]");
    json many = json::array();
    for (std::size_t i = 1; i <= api::k_max_batch_starts + 1; ++i) {
        many.push_back(i);
    }
    CHECK(field_of({{"attempts", many}}) == "attempts[" + std::to_string(api::k_max_batch_starts) + "]");
    many.erase(many.end() - 1);
    CHECK(api::attempt_starts_from_json({{"attempts", many}}).has_value());
}

TEST_CASE("wire: a wait on jobs and its answer round-trip, and a bad one names the field", "[api]") {
    const api::JobWaitRequest req{{JobId(3), JobId(5)}, 2000};
    auto back = api::job_wait_request_from_json(api::to_json(req));
    REQUIRE(back.has_value());
    CHECK(*back == req);
    const api::JobWaitReply reply{{{JobId(3), "succeeded", 0}, {JobId(5), "running", std::nullopt}}, false};
    auto read = api::job_wait_reply_from_json(api::to_json(reply));
    REQUIRE(read.has_value());
    CHECK(*read == reply);

    auto bad = api::job_wait_request_from_json({{"jobs", {3, -1}}});
    REQUIRE_FALSE(bad.has_value());
    CHECK(bad.error().field == "jobs[1]");
    bad = api::job_wait_request_from_json({{"jobs", {3}}, {"wait_ms", -5}});
    REQUIRE_FALSE(bad.has_value());
    CHECK(bad.error().field == "wait_ms");
    auto no_done = api::job_wait_reply_from_json({{"jobs", json::array()}});
    REQUIRE_FALSE(no_done.has_value());
    CHECK(no_done.error().field == "done");
}

} // namespace test_dispatch_wire
} // namespace
