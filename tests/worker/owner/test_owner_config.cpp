// worker.toml: a full file reads back value by value; each mistake is reported with its file, line
// and field, all of them at once.
#include "tests/support.hpp"
#include "worker/owner/owner_config.hpp"

#include <catch2/catch.hpp>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_owner_config {

using namespace gpupool;
using worker::parse_owner_config;

TEST_CASE("owner config: a full worker.toml reads back", "[owner][config]") {
    auto c = parse_owner_config(R"(
[pool]
coordinator = "https://pool.example.org:7443"
token_file = "~/.gpupool-enroll"
ca_cert = "/etc/gpupool/ca.pem"
name = "lab-box"
work_dir = "/srv/gpupool"
cache_dir = "/srv/cache"
runtime = "docker"
unsafe_process_runtime = false
mps_compute = "isolate"

[share]
max_jobs = 2
max_runtime = "12h"
cpus = 8
memory = "32GiB"
teams = ["fellows", "vision"]
registries = ["ghcr.io", "docker.io/library/"]
drain_grace = "10m"

[[share.window]]
days = "mon-fri"
from = "19:00"
to = "08:00"

[[share.window]]
days = "weekends"
all_day = true

[[gpu]]
index = 0
share = true
keep_mib = 4096

[[gpu]]
index = 1
share = false
)",
                                "worker.toml");
    REQUIRE(c.has_value());
    CHECK(c->pool.coordinator == "https://pool.example.org:7443");
    CHECK(c->pool.token_file == "~/.gpupool-enroll");
    CHECK(c->pool.runtime == "docker");
    CHECK(c->pool.unsafe_process_runtime == false);
    CHECK(c->pool.mps_compute == worker::MpsCompute::isolate);
    CHECK(c->share.max_jobs == 2);
    CHECK(c->share.max_runtime_s == 12 * 3600);
    CHECK(c->share.cpu_milli == 8000);
    CHECK(c->share.memory_mib == 32 * 1024);
    CHECK(c->share.teams == std::vector<std::string>{"fellows", "vision"});
    CHECK(c->share.registries == std::vector<std::string>{"ghcr.io/", "docker.io/library/"}); // whole components
    CHECK(c->share.drain_grace_s == 600);
    REQUIRE(c->share.windows);
    REQUIRE(c->share.windows->size() == 2);
    const auto& night = (*c->share.windows)[0];
    CHECK(night.days == 0x3e); // Monday..Friday, bit 0 = Sunday
    CHECK(night.from_min == 19 * 60);
    CHECK(night.to_min == 8 * 60);
    CHECK_FALSE(night.all_day);
    CHECK(night.line == 22);
    CHECK((*c->share.windows)[1].all_day);
    CHECK((*c->share.windows)[1].days == 0x41);
    REQUIRE(c->share.gpus.size() == 2);
    CHECK(c->share.gpus[0] == worker::GpuTerms{0, true, 4096});
    CHECK(c->share.gpus[1] == worker::GpuTerms{1, false, 0});
}

TEST_CASE("owner config: an empty file sets nothing, and no window means always", "[owner][config]") {
    auto c = parse_owner_config("", "worker.toml");
    REQUIRE(c.has_value());
    CHECK_FALSE(c->share.windows);
    CHECK_FALSE(c->share.max_jobs);
    CHECK(c->share.gpus.empty());
}

TEST_CASE("owner config: days and clock times", "[owner][config]") {
    CHECK(worker::parse_days("all").value() == 0x7f);
    CHECK(worker::parse_days("sat,sun").value() == 0x41);
    CHECK(worker::parse_days("Fri-Mon").value() == 0x63); // wraps through the weekend
    CHECK(worker::parse_days("monday, wed").value() == 0x0a);
    CHECK_FALSE(worker::parse_days("").has_value());
    CHECK_FALSE(worker::parse_days("mon-").has_value());
    CHECK_FALSE(worker::parse_days("funday").has_value());
    CHECK(worker::parse_clock_time("07:05", false).value() == 425);
    CHECK(worker::parse_clock_time("24:00", true).value() == 1440);
    CHECK_FALSE(worker::parse_clock_time("24:00", false).has_value());
    CHECK_FALSE(worker::parse_clock_time("24:01", true).has_value());
    CHECK_FALSE(worker::parse_clock_time("7:5", false).has_value());
    CHECK_FALSE(worker::parse_clock_time("19:60", false).has_value());
    CHECK_FALSE(worker::parse_clock_time("-1:00", false).has_value());
    CHECK_FALSE(worker::parse_clock_time("19h00", false).has_value());
}

namespace {

struct Bad {
    const char* text;
    std::uint32_t line;
    const char* field;
    const char* says;
};

} // namespace

TEST_CASE("owner config: each mistake names its line and field", "[owner][config]") {
    const std::vector<Bad> cases{
        {"[share]\nmax_job = 2\n", 2, "share.max_job", "did you mean `max_jobs`"},
        {"[shares]\nmax_jobs = 2\n", 1, "shares", "did you mean `share`"},
        {"[share]\nmax_jobs = -1\n", 2, "share.max_jobs", "from 0 to 1024"},
        {"[share]\nmax_jobs = \"2\"\n", 2, "share.max_jobs", "expected an integer, got a string"},
        {"[share]\nmax_runtime = \"12 parsecs\"\n", 2, "share.max_runtime", ""},
        {"[share]\nmax_runtime = true\n", 2, "share.max_runtime", "expected a quantity"},
        {"[share]\ncpus = 0\n", 2, "share.cpus", "more than zero"},
        {"[share]\nmemory = 32\n", 2, "share.memory", ""},
        {"[share]\nteams = []\n", 2, "share.teams", "leave the key out to allow all"},
        {"[share]\nteams = [\"a\", 3]\n", 2, "share.teams[1]", "expected a string"},
        {"[share]\nregistries = [\"ghcr io/\"]\n", 2, "share.registries[0]", "without blanks"},
        {"[share]\nwindow = 3\n", 2, "share.window", "[[share.window]]"},
        {"[[share.window]]\ndays = \"mon-fry\"\nfrom = \"19:00\"\nto = \"08:00\"\n", 2, "share.window[0].days",
         "`mon-fry`"},
        {"[[share.window]]\nfrom = \"25:00\"\nto = \"08:00\"\n", 2, "share.window[0].from", "HH:MM"},
        {"[[share.window]]\nfrom = \"08:00\"\nto = \"08:00\"\n", 3, "share.window[0].to", "all_day = true"},
        {"[[share.window]]\nall_day = true\nfrom = \"08:00\"\n", 3, "share.window[0].from", "no `from` or `to`"},
        {"[[share.window]]\nfrom = \"08:00\"\n", 1, "share.window[0]", "needs `from` and `to`"},
        {"[[share.window]]\nfrom = \"08:00\"\nto = \"09:00\"\nuntil = \"x\"\n", 4, "share.window[0].until",
         "unknown key"},
        {"[[gpu]]\nindex = 0\n[[gpu]]\nindex = 0\n", 4, "gpu[1].index", "already described"},
        {"[[gpu]]\nshare = false\n", 1, "gpu[0].index", "missing required key `index`"},
        {"[[gpu]]\nindex = 0\nkeep_mib = -5\n", 3, "gpu[0].keep_mib", "from 0"},
        {"[[gpu]]\nindex = 0\nshare = \"no\"\n", 3, "gpu[0].share", "true or false"},
        {"[[gpu]]\nindex = 0\nkeep = 5\n", 3, "gpu[0].keep", "did you mean `keep_mib`"},
        {"[pool]\nruntime = \"lxc\"\n", 2, "pool.runtime", "expected one of"},
        {"[pool]\ncoordinator = \"ftp://x\"\n", 2, "pool.coordinator", "http:// or https://"},
        {"[pool]\nunsafe_process_runtime = \"yes\"\n", 2, "pool.unsafe_process_runtime", "true or false"},
        {"[pool]\nname = \"\"\n", 2, "pool.name", "non-empty"},
        {"[pool]\nmps_compute = \"fast\"\n", 2, "pool.mps_compute", "`throughput`"},
        {"[pool]\nmps_compute = 100\n", 2, "pool.mps_compute", "expected a string"},
        {"pool = 3\n", 1, "pool", "expected a table"},
        {"[share\nmax_jobs = 2\n", 1, "", "TOML syntax error"},
    };
    for (const auto& c : cases) {
        INFO(c.text);
        auto r = parse_owner_config(c.text, "/etc/worker.toml");
        REQUIRE_FALSE(r.has_value());
        const Error& e = r.error();
        CHECK(e.code == ErrorCode::invalid_input);
        REQUIRE(e.where);
        CHECK(e.where->file == "/etc/worker.toml");
        CHECK(e.where->line == c.line);
        CHECK(e.field == c.field);
        CHECK_THAT(e.message, Catch::Contains(c.says));
    }
}

TEST_CASE("owner config: every problem of a file is reported at once, in order", "[owner][config]") {
    auto r = parse_owner_config("[share]\nmax_jobs = -1\ncpus = \"lots\"\n[[gpu]]\nindex = 0\n[[gpu]]\nindex = 0\n",
                                "w.toml");
    REQUIRE_FALSE(r.has_value());
    REQUIRE(r.error().more.size() == 2);
    CHECK(r.error().where->line == 2);
    CHECK(r.error().more[0].field == "share.cpus");
    CHECK(r.error().more[1].field == "gpu[1].index");
    CHECK_THAT(r.error().describe(), Catch::Contains("w.toml:2"));
}

TEST_CASE("owner config: a missing file is named and flags win over the file in merge", "[owner][config]") {
    auto missing = worker::load_owner_config("/nonexistent/worker.toml");
    REQUIRE_FALSE(missing.has_value());
    CHECK_THAT(missing.error().message,
               Catch::Contains("/nonexistent/worker.toml") && Catch::Contains("does not exist"));
    worker::ShareSettings file;
    file.max_jobs = 4;
    file.cpu_milli = 8000;
    file.gpus = {{0, false, 0}};
    worker::ShareSettings flags;
    flags.max_jobs = 1;
    const auto m = worker::merge(flags, file);
    CHECK(m.max_jobs == 1);
    CHECK(m.cpu_milli == 8000);
    CHECK(m.gpus == file.gpus);
}

TEST_CASE("owner config: the example in docs parses", "[owner][config]") {
    auto c = worker::load_owner_config(test::source_dir() / "docs" / "worker.example.toml");
    REQUIRE(c.has_value());
    CHECK(c->share.max_jobs == 2);
    REQUIRE(c->share.windows);
    CHECK(c->share.windows->size() == 2);
    CHECK(c->share.gpus.size() == 1);
}

} // namespace test_owner_config
} // namespace
