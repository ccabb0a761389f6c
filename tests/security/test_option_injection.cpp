// Option injection: no value a job's author controls may reach podman's or docker's command line in
// option position, or the job's environment in a form the engine reads differently (a NUL that cuts
// a value short, `-e NAME` without a value, which copies the worker's own variable).
//
// Every recipe field that reaches an engine argv or the job's environment gets hostile values, and
// each layer is checked on its own: (a) the TOML parser refuses them with the field and the line;
// (b) recipe::job_from_json (the coordinator's API and the worker's assignments) refuses them with
// the field; (c) build_run_argv, given a spec that bypassed both, still ends the options with `--`
// before the image, and everything before `--` is a flag of its own or that flag's value;
// (d) OciRuntime::start refuses an invalid image before it runs the engine at all.
#include "core/api/assignment.hpp"
#include "core/recipe/parser.hpp"
#include "core/recipe/recipe_json.hpp"
#include "core/util/strings.hpp"
#include "tests/support.hpp"
#include "worker/runtime/oci_runtime.hpp"
#include "worker/runtime/process_runtime.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <sys/stat.h>
#include <vector>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_option_injection {

using namespace gpupool;
using namespace gpupool::recipe;
using namespace gpupool::worker;
namespace fs = std::filesystem;

namespace {

// ---- (a) the TOML parser -------------------------------------------------------------------

struct TomlCase {
    const char* title;
    const char* text;
    std::uint32_t line;
    const char* field;
};

// Line 1 is the image and line 2 the command unless the case is about them. TOML's \u0000 escape
// puts a NUL byte in a string.
#define IMAGE "image = \"busybox\"\n"
#define HEAD IMAGE "command = [\"true\"]\n"

const TomlCase k_toml_cases[] = {
    {"image: --privileged", "image = \"--privileged\"\ncommand = [\"true\"]\n", 1, "image"},
    {"image: a short flag with a host mount", "image = \"-v/:/h\"\ncommand = [\"true\"]\n", 1, "image"},
    {"image: a long flag with a host mount", "image = \"--volume=/:/host:rw\"\ncommand = [\"true\"]\n", 1, "image"},
    {"image: host network", "image = \"--network=host\"\ncommand = [\"true\"]\n", 1, "image"},
    {"image: host pid namespace", "image = \"--pid=host\"\ncommand = [\"true\"]\n", 1, "image"},
    {"image: root user", "image = \"--user=0\"\ncommand = [\"true\"]\n", 1, "image"},
    {"image: NUL then a flag", "image = \"busybox\\u0000--privileged\"\ncommand = [\"true\"]\n", 1, "image"},
    {"image: uppercase", "image = \"UPPER/case\"\ncommand = [\"true\"]\n", 1, "image"},
    {"image: trailing colon", "image = \"busybox:\"\ncommand = [\"true\"]\n", 1, "image"},
    {"command: a NUL byte", IMAGE "command = [\"echo\", \"a\\u0000b\"]\n", 2, "command[1]"},
    {"command: a NUL in a shell string", IMAGE "command = \"echo a\\u0000b\"\n", 2, "command"},
    {"env name: a flag", HEAD "[env]\n\"--privileged\" = \"1\"\n", 4, "env.--privileged"},
    {"env name: with =", HEAD "[env]\n\"A=B\" = \"1\"\n", 4, "env.A=B"},
    {"env name: reserved prefix", HEAD "[env]\nGPUPOOL_JOB_ID = \"1\"\n", 4, "env.GPUPOOL_JOB_ID"},
    {"env value: a NUL byte", HEAD "[env]\nA = \"x\\u0000y\"\n", 4, "env.A"},
    {"cache.models: a flag", HEAD "[cache]\nmodels = [\"--privileged\"]\n", 4, "cache.models[0]"},
    {"cache.models: a path", HEAD "[cache]\nmodels = [\"../../etc\"]\n", 4, "cache.models[0]"},
    {"gpu_models: a NUL byte", HEAD "[resources]\ngpu = 0.5\ngpu_models = [\"A100\\u0000\"]\n", 5,
     "resources.gpu_models[0]"},
    {"gpu_models: an escape sequence", HEAD "[resources]\ngpu = 0.5\ngpu_models = [\"\\u001b[2J\"]\n", 5,
     "resources.gpu_models[0]"},
    {"name: a NUL byte", HEAD "name = \"job\\u0000--privileged\"\n", 3, "name"},
    {"name: a newline", HEAD "name = \"job\\n--privileged\"\n", 3, "name"},
    {"name: a control character from a sweep value", HEAD "name = \"job-{x}\"\n[sweep]\nx = [\"a\\u001bb\"]\n", 3,
     "name"},
    {"outputs.paths: parent", HEAD "[outputs]\npaths = [\"../../etc\"]\n", 4, "outputs.paths[0]"},
    {"outputs.paths: absolute", HEAD "[outputs]\npaths = [\"/etc/shadow\"]\n", 4, "outputs.paths[0]"},
    {"outputs.paths: a NUL byte", HEAD "[outputs]\npaths = [\"a\\u0000b\"]\n", 4, "outputs.paths[0]"},
    {"inputs.paths: a NUL byte", HEAD "[inputs]\npaths = [\"a\\u0000b\"]\n", 4, "inputs.paths[0]"},
    {"params: a NUL in a sweep value", HEAD "[sweep]\nx = [\"a\\u0000b\"]\n", 4, "sweep.x[0]"},
    {"params: a flag as a parameter name", HEAD "[sweep]\n\"--privileged\" = [1]\n", 4, "sweep.--privileged"},
};

#undef HEAD
#undef IMAGE

// ---- (b) job_from_json ---------------------------------------------------------------------

nlohmann::json valid_job() {
    JobSpec s;
    s.name = "ok";
    s.image = "localhost/gpupool/busybox:latest";
    s.command = {"true"};
    return nlohmann::json::parse(to_json(s).dump());
}

struct JsonCase {
    const char* title;
    const char* pointer; // the JSON pointer replaced in a valid job
    nlohmann::json value;
    const char* field;
};

const std::string k_nul_then_flag = std::string("x\0--privileged", 14);

std::vector<JsonCase> json_cases() {
    using nlohmann::json;
    return {
        {"image: --privileged", "/image", "--privileged", "image"},
        {"image: -v/:/h", "/image", "-v/:/h", "image"},
        {"image: --volume=/:/host:rw", "/image", "--volume=/:/host:rw", "image"},
        {"image: --device=/dev/mem", "/image", "--device=/dev/mem", "image"},
        {"image: a NUL byte", "/image", "busybox" + k_nul_then_flag, "image"},
        {"image: uppercase", "/image", "UPPER/case", "image"},
        {"image: a space", "/image", "a b", "image"},
        {"command: a NUL byte", "/command", json::array({"echo", k_nul_then_flag}), "command[1]"},
        {"env name: a flag", "/env", json{{"--privileged", "1"}}, "env.--privileged"},
        {"env name: with =", "/env", json{{"A=B", "1"}}, "env.A=B"},
        {"env name: empty", "/env", json{{"", "1"}}, "env."},
        {"env name: reserved prefix", "/env", json{{"GPUPOOL_OUTPUT_DIR", "/"}}, "env.GPUPOOL_OUTPUT_DIR"},
        {"env name: a NUL byte", "/env", json{{std::string("A\0B", 3), "1"}}, "env.A\\x00B"},
        {"env value: a NUL byte", "/env", json{{"A", k_nul_then_flag}}, "env.A"},
        {"params name: a flag", "/params", json{{"--privileged", "1"}}, "params.--privileged"},
        {"params value: a NUL byte", "/params", json{{"x", k_nul_then_flag}}, "params.x"},
        {"cache_models: a flag", "/cache_models", json::array({"--privileged"}), "cache_models[0]"},
        {"cache_models: a path", "/cache_models", json::array({"org/../../etc"}), "cache_models[0]"},
        {"gpu_models: a NUL byte", "/resources/gpu_models", json::array({"L4", "A100" + k_nul_then_flag}),
         "resources.gpu_models[1]"},
        {"gpu_models: an escape sequence", "/resources/gpu_models", json::array({"\x1b[2J"}),
         "resources.gpu_models[0]"},
        {"name: a NUL byte", "/name", "job" + k_nul_then_flag, "name"},
        {"name: a newline", "/name", "job\n--privileged", "name"},
        {"outputs.paths: parent", "/outputs/paths", json::array({".", "../../etc"}), "outputs.paths[1]"},
        {"outputs.paths: absolute", "/outputs/paths", json::array({"/etc/shadow"}), "outputs.paths[0]"},
        {"outputs.paths: a NUL byte", "/outputs/paths", json::array({k_nul_then_flag}), "outputs.paths[0]"},
        {"outputs.paths: empty", "/outputs/paths", json::array({""}), "outputs.paths[0]"},
        {"inputs.paths: a NUL byte", "/inputs/paths", json::array({k_nul_then_flag}), "inputs.paths[0]"},
    };
}

// ---- (c) build_run_argv ----------------------------------------------------------------------

// The flags build_run_argv writes, and whether each takes the next element as its value.
const std::set<std::string> k_flags_with_value{
    "--name",   "--label",       "--log-driver", "--security-opt", "--user",   "--pids-limit",
    "--memory", "--memory-swap", "--cpus",       "--ulimit",       "--tmpfs",  "-v",
    "-e",       "--device",      "--gpus",       "--network",      "--workdir"};
const std::set<std::string> k_flags_alone{"-d", "--init", "--cap-drop=ALL", "--read-only", "--sig-proxy=false"};

ContainerSpec hostile_spec(const std::string& image) {
    ContainerSpec s;
    s.name = "gpupool-w1-a42";
    s.image = image;
    s.argv = {"--privileged", "-v/:/h"};
    s.env = {{"A", "--privileged"}, {"B", "-v/:/h"}, {"C", "x --network=host"}};
    s.labels = {{"gpupool.worker", "1"}, {"gpupool.job", "42"}, {"gpupool.attempt", "7"}};
    s.mounts = {{"/srv/jobs/42/work", "/work", true}, {"/srv/jobs/42/outputs", "/outputs", false}};
    s.log_path = "/srv/jobs/42/log";
    s.workdir = "/work";
    s.gpu_index = 0;
    s.cpu_milli = 1000;
    s.memory_mib = 512;
    return s;
}

// ---- (d) OciRuntime::start -------------------------------------------------------------------

// A stand-in for the engine that records every call: nothing may be recorded.
fs::path recording_tool(const test::TempDir& dir) {
    const fs::path tool = dir.write("fake-engine", "#!/bin/sh\necho \"$@\" >> \"$(dirname \"$0\")/calls\"\n");
    fs::permissions(tool, fs::perms::owner_all);
    return tool;
}

} // namespace

TEST_CASE("option injection: the recipe parser refuses hostile values with the field and line", "[security]") {
    for (const TomlCase& c : k_toml_cases) {
        DYNAMIC_SECTION(c.title) {
            ParseOptions options;
            options.allow_file_access = false;
            auto r = parse_recipe_text(c.text, "evil.toml", options);
            REQUIRE_FALSE(r);
            const Error& e = r.error();
            INFO("got: " << e.describe());
            CHECK(e.code == ErrorCode::invalid_input);
            CHECK(e.field == c.field);
            REQUIRE(e.where);
            CHECK(e.where->file == "evil.toml");
            CHECK(e.where->line == c.line);
            CHECK(e.where->column > 0);
            CHECK_THAT(e.message, !Catch::Contains("TOML syntax error"));
        }
    }
}

TEST_CASE("option injection: --set image= is checked like the file", "[security]") {
    ParseOptions options;
    options.overrides = {{"image", "--privileged"}};
    auto r = parse_recipe_text("image = \"busybox\"\ncommand = [\"true\"]\n", "evil.toml", options);
    REQUIRE_FALSE(r);
    CHECK(r.error().field == "image");
    CHECK_THAT(r.error().message, Catch::Contains("never starts with `-`"));
}

TEST_CASE("option injection: job_from_json refuses hostile values and names the field", "[security]") {
    REQUIRE(job_from_json(valid_job())); // the base every case changes one field of
    for (const JsonCase& c : json_cases()) {
        DYNAMIC_SECTION(c.title) {
            nlohmann::json j = valid_job();
            j[nlohmann::json::json_pointer(c.pointer)] = c.value;
            auto r = job_from_json(j);
            REQUIRE_FALSE(r);
            INFO("got: " << r.error().describe());
            CHECK(r.error().code == ErrorCode::invalid_input);
            CHECK(r.error().field == c.field);
        }
    }
}

TEST_CASE("option injection: the worker reads assignments through job_from_json", "[security]") {
    nlohmann::json spec = valid_job();
    spec["image"] = "--privileged";
    auto a = api::assignment_from_json({{"attempt", 7}, {"job", 42}, {"spec", spec}}, "assignments[0]");
    REQUIRE_FALSE(a);
    CHECK(a.error().field == "assignments[0].spec.image");
}

TEST_CASE("option injection: build_run_argv ends the options with -- before an unchecked image", "[security]") {
    for (OciTool tool : {OciTool::podman, OciTool::docker}) {
        for (const std::string& image :
             std::vector<std::string>{"--privileged", "-v/:/h", "--volume=/:/host:rw", "--network=host"}) {
            DYNAMIC_SECTION(to_string(tool) << " " << image) {
                const ContainerSpec spec = hostile_spec(image);
                const auto argv = build_run_argv(tool, spec, {"--network", "none"});
                const auto dash = std::find(argv.begin(), argv.end(), "--");
                REQUIRE(dash != argv.end());
                // After `--`: the image, then the job's argv, exactly.
                std::vector<std::string> tail(dash + 1, argv.end());
                std::vector<std::string> expected{image};
                expected.insert(expected.end(), spec.argv.begin(), spec.argv.end());
                CHECK(tail == expected);
                // Before `--`: the subcommand, then only flags this code writes, each followed by
                // its value when it takes one. An attacker's string is never in option position.
                REQUIRE(argv.front() == "run");
                const auto options_end = static_cast<std::size_t>(dash - argv.begin());
                for (std::size_t i = 1; i < options_end; ++i) {
                    INFO("argv[" << i << "] = " << argv[i]);
                    if (k_flags_with_value.count(argv[i]) != 0) {
                        REQUIRE(i + 1 < options_end);
                        ++i; // its value
                    } else {
                        CHECK(k_flags_alone.count(argv[i]) == 1);
                    }
                }
            }
        }
    }
}

TEST_CASE("option injection: OciRuntime::start refuses an invalid image before running anything", "[security]") {
    for (OciTool tool : {OciTool::podman, OciTool::docker}) {
        for (const std::string& image :
             std::vector<std::string>{"--privileged", "-v/:/h", "--volume=/:/host:rw", "--pid=host", "--user=0",
                                      std::string("busybox\0--privileged", 20), "UPPER/case", ""}) {
            DYNAMIC_SECTION(to_string(tool) << " " << util::escape_control(image)) {
                test::TempDir dir;
                OciConfig config;
                config.tool = tool;
                config.program = recording_tool(dir).string();
                OciRuntime runtime(config);
                REQUIRE_FALSE(runtime.missing_tool());
                ContainerSpec spec = hostile_spec(image);
                spec.mounts.clear();
                spec.log_path = dir.path() / "log";
                auto started = runtime.start(spec);
                REQUIRE_FALSE(started);
                CHECK(started.error().code == ErrorCode::invalid_input);
                CHECK_THAT(started.error().message, Catch::Contains("image"));
                CHECK_FALSE(fs::exists(dir.path() / "calls")); // the engine was never run
            }
        }
    }
}

TEST_CASE("option injection: the runtimes refuse env names and NUL bytes the engine would misread", "[security]") {
    test::TempDir dir;
    const fs::path tool = recording_tool(dir);
    auto with = [&](auto change) {
        ContainerSpec s = hostile_spec("localhost/gpupool/busybox:latest");
        s.mounts.clear();
        s.log_path = dir.path() / "log";
        s.workdir = dir.path();
        s.argv = {"true"};
        s.env = {{"PATH", "/usr/bin:/bin"}};
        change(s);
        return s;
    };
    const std::vector<std::pair<std::string, ContainerSpec>> specs = {
        {"env name with =", with([](ContainerSpec& s) { s.env["A=B"] = "1"; })},
        {"empty env name", with([](ContainerSpec& s) { s.env[""] = "1"; })},
        {"NUL in an env value", with([](ContainerSpec& s) { s.env["A"] = std::string("x\0y", 3); })},
        {"NUL in the argv", with([](ContainerSpec& s) {
             s.argv = {"echo", std::string("x\0y", 3)};
         })},
        {"a name with a slash", with([](ContainerSpec& s) { s.name = "../evil"; })},
    };
    for (const auto& [title, spec] : specs) {
        DYNAMIC_SECTION(title) {
            OciConfig config;
            config.program = tool.string();
            OciRuntime oci(config);
            auto started = oci.start(spec);
            REQUIRE_FALSE(started);
            CHECK(started.error().code == ErrorCode::invalid_input);
            CHECK_FALSE(fs::exists(dir.path() / "calls"));

            ProcessRuntime process;
            auto ran = process.start(spec);
            REQUIRE_FALSE(ran);
            CHECK(ran.error().code == ErrorCode::invalid_input);
        }
    }
    SECTION("a mount source with `:` would add mount options") {
        OciConfig config;
        config.program = tool.string();
        OciRuntime oci(config);
        auto spec = with([](ContainerSpec& s) { s.mounts = {{"/srv/x:/etc", "/work", true}}; });
        auto started = oci.start(spec);
        REQUIRE_FALSE(started);
        CHECK_THAT(started.error().message, Catch::Contains("mount"));
        CHECK_FALSE(fs::exists(dir.path() / "calls"));
    }
}

} // namespace test_option_injection
} // namespace
