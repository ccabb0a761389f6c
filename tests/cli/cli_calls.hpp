// Small calls the CLI tests share against a real coordinator: a CLI run's stdout as JSON (the run
// must have succeeded), and one shell job submitted over HTTP. Each REQUIRE fails the calling test.
#pragma once

#include "core/recipe/recipe_json.hpp"
#include "tests/cli/processes.hpp"
#include "tests/support.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace gpupool::test {

inline nlohmann::json ok_json(const CliResult& r) {
    INFO("exit " << r.exit_code << "\nstdout: " << r.out << "\nstderr: " << r.err);
    REQUIRE(r.exit_code == 0);
    return nlohmann::json::parse(r.out);
}

// A one-job sweep running `script` with sh in the busybox test image (0.1 CPU, 64 MiB), submitted
// through `c` (a member's client, plain or TLS); its job id.
inline std::int64_t submit_shell(net::HttpClient& c, const std::string& name, const std::string& script,
                                 std::int64_t max_runtime_s = 120) {
    recipe::JobSpec s;
    s.name = name;
    s.image = "localhost/gpupool/busybox:latest";
    s.command = {script};
    s.shell = true;
    s.resources.cpu_milli = 100;
    s.resources.memory_mib = 64;
    s.resources.max_runtime_s = max_runtime_s;
    const nlohmann::json body = {{"source", "t.toml"},
                                 {"max_parallel", 0},
                                 {"jobs", nlohmann::json::parse(recipe::to_json(std::vector{s}).dump())}};
    auto r = c.request("POST", "/v1/jobs", body.dump());
    REQUIRE(r);
    INFO(r->body);
    REQUIRE(r->status == 201);
    return nlohmann::json::parse(r->body)["jobs"][0].get<std::int64_t>();
}

// The same over plain HTTP to `url` with the member's token.
inline std::int64_t submit_shell(const std::string& url, const std::string& member, const std::string& name,
                                 const std::string& script, std::int64_t max_runtime_s = 120) {
    auto c = http_client(url, member);
    return submit_shell(c, name, script, max_runtime_s);
}

} // namespace gpupool::test
