// A worker's run report (core/api/run_report.hpp), as it travels in an attempt's completion: every
// member read back as written, and every hostile value refused with the field it was in.
#include "core/api/run_report.hpp"
#include "core/api/worker_protocol.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_run_report {

using namespace gpupool;
using nlohmann::json;

const std::string k_digest = "sha256:" + std::string(64, 'a');

api::RunReport full_report() {
    api::RunReport r;
    r.runtime = "podman";
    r.image_digest = k_digest;
    r.image_id = "sha256:" + std::string(64, 'b');
    r.gpu_model = "NVIDIA H200";
    r.gpu_uuid = "GPU-1234";
    r.driver_version = "550.54.15";
    r.cuda_version = "12.4";
    r.enforcement = "mps";
    r.models = {{"org/model", std::string(40, 'c')}};
    r.started_at_ms = 1'700'000'000'000;
    r.ended_at_ms = 1'700'000'060'000;
    r.worker_version = "0.1.0";
    return r;
}

TEST_CASE("run report: every member round-trips, alone and inside a completion", "[api][evidence]") {
    const auto r = full_report();
    auto back = api::run_report_from_json(api::to_json(r));
    REQUIRE(back);
    CHECK(*back == r);

    api::Completion c;
    c.exit_code = 0;
    c.report = r;
    auto cb = api::completion_from_json(api::to_json(c));
    REQUIRE(cb);
    REQUIRE(cb->report);
    CHECK(*cb->report == r);
    // A completion from a worker that does not report (an older one) has none.
    auto old = api::completion_from_json(json{{"exit_code", 0}});
    REQUIRE(old);
    CHECK_FALSE(old->report);
    // The batch form carries it too.
    auto ends = api::attempt_ends_from_json(json{{"completions", {{{"attempt", 5}, {"exit_code", 0}, {"report", api::to_json(r)}}}}});
    REQUIRE(ends);
    REQUIRE((*ends)[0].completion.report);
    CHECK((*ends)[0].completion.report->gpu_model == "NVIDIA H200");
}

TEST_CASE("run report: what a worker cannot say stays empty, with why for the image", "[api][evidence]") {
    auto r = api::run_report_from_json(json{{"runtime", "process"}, {"image_digest_unknown", "the process runtime runs no image"}});
    REQUIRE(r);
    CHECK(r->image_digest.empty());
    CHECK(r->image_id.empty());
    CHECK(r->image_digest_unknown == "the process runtime runs no image");
    CHECK(r->models.empty());
    CHECK(r->started_at_ms == 0);
}

TEST_CASE("run report: hostile values are refused naming the field", "[api][evidence]") {
    struct Case {
        json report;
        std::string field;
    };
    const std::vector<Case> cases{
        {{{"image_digest", "sha256:XYZ"}}, "report.image_digest"},
        {{{"image_digest", "--privileged"}}, "report.image_digest"},
        {{{"image_id", "sha256:" + std::string(64, 'A')}}, "report.image_id"},
        {{{"gpu_model", std::string("H100\x1b[2J")}}, "report.gpu_model"},
        {{{"driver_version", std::string(300, '5')}}, "report.driver_version"},
        {{{"enforcement", 3}}, "report.enforcement"},
        {{{"started_at_ms", -1}}, "report.started_at_ms"},
        {{{"ended_at_ms", 1.5}}, "report.ended_at_ms"},
        {{{"models", "org/model"}}, "report.models"},
        {{{"models", {{{"model", "a"}, {"revision", std::string("x\ny")}}}}}, "report.models[0].revision"},
    };
    for (const auto& c : cases) {
        INFO(c.report.dump());
        auto r = api::run_report_from_json(c.report);
        REQUIRE_FALSE(r);
        CHECK(r.error().field == c.field);
    }
    json many = json::array();
    for (std::size_t i = 0; i <= api::k_max_report_models; ++i) {
        many.push_back({{"model", "m" + std::to_string(i)}});
    }
    auto r = api::run_report_from_json(json{{"models", many}});
    REQUIRE_FALSE(r);
    CHECK(r.error().field == "report.models[64]");
    // Inside a completion the path says where.
    auto c = api::completion_from_json(json{{"exit_code", 0}, {"report", {{"image_digest", "nope"}}}});
    REQUIRE_FALSE(c);
    CHECK(c.error().field == "report.image_digest");
    CHECK_FALSE(api::completion_from_json(json{{"exit_code", 0}, {"report", "podman"}}));
}

TEST_CASE("run report: a digest is sha256 and 64 lowercase hex digits, nothing else", "[api][evidence]") {
    CHECK(api::is_sha256_digest(k_digest));
    CHECK_FALSE(api::is_sha256_digest("sha256:" + std::string(63, 'a')));
    CHECK_FALSE(api::is_sha256_digest("sha512:" + std::string(64, 'a')));
    CHECK_FALSE(api::is_sha256_digest(std::string(64, 'a')));
    CHECK_FALSE(api::is_sha256_digest("sha256:" + std::string(63, 'a') + "g"));
}

} // namespace test_run_report
} // namespace
