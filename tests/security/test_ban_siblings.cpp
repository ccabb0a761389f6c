// `gpupool admin ban` against a real coordinator: it names the other workers enrolled with the
// same token, and --with-siblings bans them too.
#include "tests/core/coordinator/service_fixture.hpp"
#include "tests/support.hpp"

#include <catch2/catch.hpp>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace security_test_ban_siblings {

using namespace gpupool;
using namespace gpupool::test::svc;

TEST_CASE("admin ban CLI: lists the workers enrolled with the same token, --with-siblings bans them too",
          "[cli][ban][security]") {
    Pool p;
    auto e = p.server.client(p.enroll);
    const json twin = call(e, "POST", "/v1/workers/register", {{"name", "box-twin"}, {"inventory", inventory()}}, 201);
    const std::string twin_id = std::to_string(twin["worker_id"].get<std::int64_t>());
    const std::string box = std::to_string(p.worker_id);
    auto admin = [&](std::vector<std::string> args) {
        args.insert(args.begin(), {"--url", p.server.url, "--token", p.server.admin_token});
        return test::run_gpupool(args);
    };

    auto plain = admin({"admin", "ban", box});
    INFO(plain.out << plain.err);
    REQUIRE(plain.exit_code == 0);
    CHECK_THAT(plain.out, Catch::Contains("worker " + box + " is now banned") &&
                              Catch::Contains("still taking work: worker " + twin_id + " `box-twin`") &&
                              Catch::Contains("--with-siblings"));

    auto together = admin({"admin", "ban", box, "--with-siblings"});
    INFO(together.out << together.err);
    REQUIRE(together.exit_code == 0);
    CHECK_THAT(together.out, Catch::Contains("banned with it, enrolled with the same token: worker " + twin_id));
    CHECK_THAT(together.out, !Catch::Contains("still taking work"));
    auto listed = admin({"--json", "admin", "workers"});
    REQUIRE(listed.exit_code == 0);
    for (const auto& w : json::parse(listed.out)["workers"]) {
        CHECK(w["state"] == "banned");
    }
}

} // namespace security_test_ban_siblings
} // namespace
