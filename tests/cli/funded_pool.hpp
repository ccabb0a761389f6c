// A real coordinator process set up as the CLI tests of sweeps, submit and retry need it: the team
// `fellows` with 1,000 credits and a member token labelled `alice`, the team `owners` with a member
// token and an enrollment token for workers. Each REQUIRE of the set-up fails the test that builds
// it. Not thread-safe; one per test.
#pragma once

#include "tests/cli/processes.hpp"
#include "tests/support.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <vector>

namespace gpupool::test {

// A token made with the admin's client: `body` is POST /v1/admin/tokens's.
inline std::string make_token(net::HttpClient& admin, const std::string& body) {
    auto t = admin.request("POST", "/v1/admin/tokens", body);
    REQUIRE(t);
    REQUIRE(t->status == 201);
    return nlohmann::json::parse(t->body)["token"];
}

struct FundedPool {
    explicit FundedPool(const std::filesystem::path& dir)
        : coord(dir), url(coord.url()), admin(http_client(url, coord.admin())) {
        for (const char* team : {R"({"name": "fellows"})", R"({"name": "owners"})"}) {
            REQUIRE(admin.request("POST", "/v1/admin/teams", team)->status == 201);
        }
        REQUIRE(
            admin.request("POST", "/v1/admin/grants", R"({"team": "fellows", "amount_micro": 1000000000})")->status ==
            201);
        fellow = make_token(admin, R"({"role": "member", "team": "fellows", "label": "alice"})");
        owner = make_token(admin, R"({"role": "member", "team": "owners"})");
        enroll = make_token(admin, R"({"role": "enroll", "team": "owners"})");
    }

    // `gpupool --url URL --token TOKEN ARGS...`, the real binary.
    CliResult as(const std::string& token, std::vector<std::string> args) const {
        args.insert(args.begin(), {"--url", url, "--token", token});
        return run_gpupool(args);
    }

    CoordinatorProcess coord;
    std::string url;
    net::HttpClient admin;
    std::string fellow; // a member of `fellows`, labelled alice
    std::string owner;  // a member of `owners`
    std::string enroll; // enrolls workers into `owners`
};

} // namespace gpupool::test
