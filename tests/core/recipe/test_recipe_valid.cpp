// Valid recipes and the jobs they expand to.
#include "core/recipe/parser.hpp"
#include "core/recipe/recipe_json.hpp"
#include "tests/support.hpp"

#include <catch2/catch.hpp>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_recipe_valid {

using namespace gpupool;
using namespace gpupool::recipe;

namespace {

std::vector<JobSpec> jobs_of(const std::string& text, const ParseOptions& options = {}) {
    auto r = parse_recipe_text(text, "ok.toml", options);
    if (!r) {
        FAIL("unexpected error: " << r.error().describe());
    }
    auto jobs = expand(*r, options);
    REQUIRE(jobs);
    return *jobs;
}

} // namespace

TEST_CASE("a minimal recipe gets the documented defaults") {
    auto jobs = jobs_of("image = \"busybox\"\ncommand = [\"echo\", \"hi\"]\n");
    REQUIRE(jobs.size() == 1);
    const JobSpec& j = jobs[0];
    CHECK(j.name == "ok");
    CHECK(j.image == "busybox");
    CHECK(j.command == std::vector<std::string>{"echo", "hi"});
    CHECK_FALSE(j.shell);
    CHECK(j.argv() == std::vector<std::string>{"echo", "hi"});
    CHECK(j.resources.gpus == 0);
    CHECK(j.resources.gpu_milli == 0);
    CHECK(j.resources.cpu_milli == 1000);
    CHECK(j.resources.memory_mib == 4096);
    CHECK(j.resources.disk_mib == 10240);
    CHECK(j.resources.max_runtime_s == 3600);
    CHECK(j.resources.idle_timeout_s == -1); // the pool's default
    CHECK(j.priority == Priority::normal);
    CHECK(j.retry.max_attempts == 3);
    CHECK(j.outputs.paths == std::vector<std::string>{"."});
    CHECK(j.logs.max_size_mib == 0); // the pool's default
    CHECK(j.checkpoint.every_s == 0);  // no checkpoints
    CHECK(j.params.empty());
}

TEST_CASE("[checkpoint] declares how often the job saves and the grace it gets to save when stopped") {
    const std::string head = "image = \"busybox\"\ncommand = [\"true\"]\n";
    auto jobs = jobs_of(head + "[checkpoint]\nevery = \"10m\"\ngrace = \"2m\"\n");
    REQUIRE(jobs.size() == 1);
    CHECK(jobs[0].checkpoint.every_s == 600);
    CHECK(jobs[0].checkpoint.grace_s == 120);
    auto defaults = jobs_of(head + "[checkpoint]\nevery = \"1h\"\n");
    CHECK(defaults[0].checkpoint.every_s == 3600);
    CHECK(defaults[0].checkpoint.grace_s == k_default_checkpoint_grace_s);
    // It travels with the job, and a job without it keeps the spec it had.
    const nlohmann::json wire = to_wire_json(jobs[0]);
    CHECK(wire["checkpoint"] == nlohmann::json{{"every_s", 600}, {"grace_s", 120}});
    auto back = job_from_json(wire);
    REQUIRE(back);
    CHECK(*back == jobs[0]);
    CHECK_FALSE(to_wire_json(jobs_of(head)[0]).contains("checkpoint"));
    // A grace beyond the limit from the wire is refused with the field.
    nlohmann::json bad = wire;
    bad["checkpoint"]["grace_s"] = k_max_checkpoint_grace_s + 1;
    auto refused = job_from_json(bad);
    REQUIRE_FALSE(refused);
    CHECK(refused.error().field == "checkpoint.grace_s");
}

TEST_CASE("[verify] says how a spot check compares the job's results, and travels with the job") {
    const std::string head = "image = \"busybox\"\ncommand = [\"true\"]\n";
    auto plain = jobs_of(head);
    CHECK(plain[0].verify.compare == CompareMode::exact); // the default: bytes must match
    CHECK_FALSE(to_wire_json(plain[0]).contains("verify"));
    auto jobs = jobs_of(head + "[verify]\ncompare = \"json\"\ntolerance = 1e-3\nfiles = [\"results/*.json\"]\n");
    REQUIRE(jobs.size() == 1);
    CHECK(jobs[0].verify.compare == CompareMode::json);
    CHECK(jobs[0].verify.tolerance == Approx(1e-3));
    CHECK(jobs[0].verify.files == std::vector<std::string>{"results/*.json"});
    CHECK(jobs_of(head + "[verify]\ncompare = \"none\"\n")[0].verify.compare == CompareMode::none);
    CHECK(jobs_of(head + "[verify]\ncompare = \"json\"\ntolerance = 0\n")[0].verify.tolerance == 0.0);
    const nlohmann::json wire = to_wire_json(jobs[0]);
    CHECK(wire["verify"]["compare"] == "json");
    auto back = job_from_json(wire);
    REQUIRE(back);
    CHECK(*back == jobs[0]);
    // From the wire, a hostile value is refused with its field.
    nlohmann::json bad = wire;
    bad["verify"]["compare"] = "maybe";
    CHECK(job_from_json(bad).error().field == "verify.compare");
    bad = wire;
    bad["verify"]["tolerance"] = -1;
    CHECK(job_from_json(bad).error().field == "verify.tolerance");
    bad = wire;
    bad["verify"]["files"] = {"/etc/passwd"};
    CHECK(job_from_json(bad).error().field == "verify.files[0]");
}

TEST_CASE("GPU requests: share, memory, whole GPU, CPU-only") {
    SECTION("0.57 is exactly 570 milli-GPU") {
        auto j = jobs_of("image = \"b\"\ncommand = \"x\"\n[resources]\ngpu = 0.57\n")[0];
        CHECK(j.resources.gpus == 1);
        CHECK(j.resources.gpu_milli == 570);
        CHECK(j.resources.gpu_memory_mib == 0);
    }
    SECTION("a percentage string") {
        auto j = jobs_of("image = \"b\"\ncommand = \"x\"\n[resources]\ngpu = \"25%\"\n")[0];
        CHECK(j.resources.gpu_milli == 250);
    }
    SECTION("GPU memory") {
        auto j = jobs_of("image = \"b\"\ncommand = \"x\"\n[resources]\ngpu_memory = \"16GiB\"\ngpu_models = [\"A100\", \"L4\"]\n")[0];
        CHECK(j.resources.gpus == 1);
        CHECK(j.resources.gpu_milli == 0);
        CHECK(j.resources.gpu_memory_mib == 16384);
        CHECK(j.resources.gpu_models == std::vector<std::string>{"A100", "L4"});
    }
    SECTION("a whole GPU") {
        auto j = jobs_of("image = \"b\"\ncommand = \"x\"\n[resources]\ngpus = 1\n")[0];
        CHECK(j.resources.gpus == 1);
        CHECK(j.resources.gpu_milli == 1000);
    }
    SECTION("gpu = 1 is a whole GPU too") {
        auto j = jobs_of("image = \"b\"\ncommand = \"x\"\n[resources]\ngpu = 1\n")[0];
        CHECK(j.resources.gpu_milli == 1000);
    }
    SECTION("other quantities") {
        auto j = jobs_of("image = \"b\"\ncommand = \"x\"\n[resources]\ngpus = 0\ncpus = 0.5\nmemory = \"1.5GiB\"\n"
                         "disk = \"100GB\"\nmax_runtime = \"1h30m\"\n")[0];
        CHECK(j.resources.gpus == 0);
        CHECK(j.resources.cpu_milli == 500);
        CHECK(j.resources.memory_mib == 1536);
        CHECK(j.resources.disk_mib == 95368); // 100e9 bytes, rounded up to whole MiB
        CHECK(j.resources.max_runtime_s == 5400);
    }
}

TEST_CASE("durations and sizes may put a space before the unit, and durations may spell it out") {
    struct Row {
        const char* runtime;
        std::int64_t seconds;
    };
    const Row rows[] = {{"5 min", 300},   {"5min", 300},  {"1h 30m", 5400}, {"1 h 30 m", 5400},  {"2 hours", 7200},
                        {"1 day", 86400}, {"45 sec", 45}, {"1.5 hr", 5400}, {"10 minutes", 600}, {"90 seconds", 90}};
    for (const Row& row : rows) {
        DYNAMIC_SECTION(row.runtime) {
            auto j = jobs_of(std::string("image = \"b\"\ncommand = \"x\"\n[resources]\nmax_runtime = \"") +
                             row.runtime + "\"\n")[0];
            CHECK(j.resources.max_runtime_s == row.seconds);
        }
    }
    auto j = jobs_of("image = \"b\"\ncommand = \"x\"\n[resources]\nmemory = \"16 GiB\"\ngpu_memory = \"1.5 GiB\"\n")[0];
    CHECK(j.resources.memory_mib == 16384);
    CHECK(j.resources.gpu_memory_mib == 1536);
}

TEST_CASE("a string command runs through the shell") {
    auto j = jobs_of("image = \"b\"\ncommand = \"echo $HOME | wc -c\"\n")[0];
    CHECK(j.shell);
    CHECK(j.argv() == std::vector<std::string>{"/bin/sh", "-c", "echo $HOME | wc -c"});
}

TEST_CASE("a sweep expands to the cartesian product in the order written") {
    auto jobs = jobs_of("name = \"eval-{model}-{shots}\"\n"
                        "image = \"b\"\n"
                        "command = [\"run\", \"--model={model}\", \"--shots\", \"{shots}\"]\n"
                        "[env]\nMODEL = \"{model}\"\nFIXED = 7\n"
                        "[sweep]\nmodel = [\"m1\", \"m2\"]\nshots = [0, 5, 25]\nmax_parallel = 2\n");
    REQUIRE(jobs.size() == 6);
    // Row-major: the last parameter written varies fastest.
    const std::vector<std::string> names{"eval-m1-0", "eval-m1-5", "eval-m1-25",
                                         "eval-m2-0", "eval-m2-5", "eval-m2-25"};
    for (std::size_t i = 0; i < jobs.size(); ++i) {
        CHECK(jobs[i].name == names[i]);
        CHECK(jobs[i].sweep_index == static_cast<std::int64_t>(i));
    }
    CHECK(jobs[4].command == std::vector<std::string>{"run", "--model=m2", "--shots", "5"});
    CHECK(jobs[4].params == EnvList{{"model", "m2"}, {"shots", "5"}});
    CHECK(jobs[4].env == EnvList{{"FIXED", "7"}, {"MODEL", "m2"}});
}

TEST_CASE("sweep order follows the file, not the alphabet") {
    auto jobs = jobs_of("name = \"{z}{a}\"\nimage = \"b\"\ncommand = \"x\"\n[sweep]\nz = [\"1\", \"2\"]\na = [\"x\", \"y\"]\n");
    REQUIRE(jobs.size() == 4);
    CHECK(jobs[0].name == "1x");
    CHECK(jobs[1].name == "1y");
    CHECK(jobs[2].name == "2x");
}

TEST_CASE("sweep values of every scalar type render as written") {
    auto jobs = jobs_of("name = \"{v}\"\nimage = \"b\"\ncommand = \"x\"\n[sweep]\nv = [0.1, 3, true, \"s\", 1e-3]\n");
    REQUIRE(jobs.size() == 5);
    CHECK(jobs[0].name == "0.1");
    CHECK(jobs[1].name == "3");
    CHECK(jobs[2].name == "true");
    CHECK(jobs[3].name == "s");
    CHECK(jobs[4].name == "1e-3");
}

TEST_CASE("a sweep without placeholders in the name numbers its jobs") {
    auto jobs = jobs_of("name = \"plain\"\nimage = \"b\"\ncommand = \"x {seed}\"\n[sweep]\nseed = [1, 2]\n");
    REQUIRE(jobs.size() == 2);
    CHECK(jobs[0].name == "plain-0");
    CHECK(jobs[1].name == "plain-1");
    CHECK(jobs[1].command[0] == "x 2");
}

TEST_CASE("shell variables and escaped braces are left alone") {
    auto jobs = jobs_of("image = \"b\"\ncommand = \"echo ${HOME} {{seed}} {seed} awk '{print $1}'\"\n"
                        "[sweep]\nseed = [7]\n");
    CHECK(jobs[0].command[0] == "echo ${HOME} {seed} 7 awk '{print $1}'");
}

TEST_CASE("a sweep at exactly the cap is accepted") {
    ParseOptions options;
    options.max_sweep_jobs = 6;
    auto jobs = jobs_of("image = \"b\"\ncommand = \"x\"\n[sweep]\na = [1, 2]\nb = [1, 2, 3]\n", options);
    CHECK(jobs.size() == 6);
}

TEST_CASE("extends merges tables key by key and replaces the GPU request as one choice") {
    gpupool::test::TempDir dir;
    dir.write("base.toml", "image = \"base-img\"\ncommand = [\"base\"]\npriority = \"low\"\n"
                           "[resources]\ngpu_memory = \"16GiB\"\ncpus = 4\n[env]\nA = \"1\"\nB = \"2\"\n");
    auto child = dir.write("child.toml", "extends = \"base.toml\"\ncommand = [\"child\"]\n"
                                         "[resources]\ngpu = 0.5\n[env]\nB = \"3\"\n");
    auto r = parse_recipe_file(child);
    REQUIRE(r);
    const JobSpec& j = r->base;
    CHECK(j.image == "base-img");
    CHECK(j.command == std::vector<std::string>{"child"});
    CHECK(j.priority == Priority::low);
    CHECK(j.resources.gpu_milli == 500);   // the child's share replaces the parent's gpu_memory
    CHECK(j.resources.gpu_memory_mib == 0);
    CHECK(j.resources.cpu_milli == 4000);  // kept from the parent
    CHECK(j.env == EnvList{{"A", "1"}, {"B", "3"}});
    CHECK(r->extends.size() == 1);
    CHECK(r->source == child.string());
}

TEST_CASE("every built-in recipe parses, and can be extended by name") {
    auto names = builtin_recipe_names();
    REQUIRE(names.size() >= 4);
    for (const auto& n : names) {
        INFO(n);
        auto r = parse_recipe_text("extends = \"" + n + "\"\n", "child.toml");
        REQUIRE(r);
        CHECK(r->extends == std::vector<std::string>{"builtin:" + n});
        CHECK_FALSE(r->base.image.empty());
    }
}

TEST_CASE("overrides from --set replace values, including the GPU choice") {
    ParseOptions options;
    options.overrides = {{"resources.gpu", "0.5"}, {"image", "other:1"}, {"sweep.seed", "[1, 2, 3]"}};
    auto jobs = jobs_of("image = \"b\"\ncommand = \"x {seed}\"\n[resources]\ngpus = 1\n[sweep]\nseed = [9]\n", options);
    REQUIRE(jobs.size() == 3);
    CHECK(jobs[0].image == "other:1");
    CHECK(jobs[0].resources.gpu_milli == 500);
    CHECK(jobs[2].command[0] == "x 3");
}

TEST_CASE("overrides from --set may add a table the recipe lacks, and take text as it is") {
    ParseOptions options;
    options.overrides = {{"retry.max_attempts", "5"}, {"env.NOTE", "it's \"quoted\" \\ here"}, {"name", "plain-word"}};
    auto jobs = jobs_of("image = \"b\"\ncommand = \"x\"\n", options);
    REQUIRE(jobs.size() == 1);
    CHECK(jobs[0].retry.max_attempts == 5);
    CHECK(jobs[0].env == EnvList{{"NOTE", "it's \"quoted\" \\ here"}});
    CHECK(jobs[0].name == "plain-word");
}

TEST_CASE("every recipe in recipes/ is valid") {
    int seen = 0;
    for (const auto& entry : std::filesystem::directory_iterator(gpupool::test::source_dir() / "recipes")) {
        const auto file = entry.path() / "recipe.toml";
        if (!std::filesystem::exists(file)) {
            continue; // builtin/: compiled in, checked by the built-in tests
        }
        INFO(file.string());
        ++seen;
        auto jobs = load_jobs(file);
        if (!jobs) {
            FAIL(jobs.error().describe());
        }
        CHECK_FALSE(jobs->empty());
    }
    CHECK(seen >= 5); // hello-sweep, inspect-gpqa, tlens-attribution, toy-eval, toy-patching
}

TEST_CASE("jobs survive a JSON round trip") {
    auto jobs = jobs_of("name = \"n-{a}\"\nimage = \"b\"\ncommand = [\"x\", \"{a}\"]\npriority = \"high\"\n"
                        "[resources]\ngpu = 0.25\ngpu_models = [\"L4\"]\nmax_runtime = \"2h\"\n"
                        "[env]\nK = \"v\"\n[cache]\nmodels = [\"org/m\"]\n[retry]\non_exit_codes = [3]\n"
                        "[outputs]\npaths = [\"r\"]\n[logs]\nmax_size = \"256MiB\"\n[sweep]\na = [1, 2]\n");
    REQUIRE(jobs.front().logs.max_size_mib == 256);
    for (const auto& j : jobs) {
        auto back = job_from_json(nlohmann::json::parse(to_json(j).dump()));
        REQUIRE(back);
        CHECK(*back == j);
    }
}

TEST_CASE("job JSON is validated field by field") {
    auto good = to_json(jobs_of("image = \"b\"\ncommand = \"x\"\n")[0]);
    auto bad = nlohmann::json::parse(good.dump());
    bad["resources"]["gpu_milli"] = "lots";
    auto r = job_from_json(bad);
    REQUIRE_FALSE(r);
    CHECK(r.error().field == "resources.gpu_milli");

    bad = nlohmann::json::parse(good.dump());
    bad["resources"]["gpus"] = 1; // a GPU job without a share
    r = job_from_json(bad);
    REQUIRE_FALSE(r);
    CHECK(r.error().field == "resources.gpu_milli");

    for (const char* section : {"logs", "outputs"}) {
        bad = nlohmann::json::parse(good.dump());
        bad[section]["max_size_mib"] = -1; // the API is checked like the parser
        r = job_from_json(bad);
        REQUIRE_FALSE(r);
        CHECK(r.error().field == std::string(section) + ".max_size_mib");
    }

    bad = nlohmann::json::parse(good.dump());
    bad.erase("image");
    r = job_from_json(bad);
    REQUIRE_FALSE(r);
    CHECK(r.error().field == "image");
}

TEST_CASE("idle_timeout: a duration, or 0 for never, and it survives the wire") {
    auto jobs = jobs_of("image = \"busybox\"\ncommand = [\"true\"]\n[resources]\ngpu = 0.5\nidle_timeout = \"45m\"\n");
    REQUIRE(jobs.size() == 1);
    CHECK(jobs[0].resources.idle_timeout_s == 2700);
    auto back = job_from_json(nlohmann::json::parse(to_wire_json(jobs[0]).dump()));
    REQUIRE(back.has_value());
    CHECK(back->resources.idle_timeout_s == 2700);
    jobs = jobs_of("image = \"busybox\"\ncommand = [\"true\"]\n[resources]\ngpu = 0.5\nidle_timeout = \"0\"\n");
    CHECK(jobs[0].resources.idle_timeout_s == 0);
    auto wire = to_wire_json(jobs[0]);
    wire["resources"]["idle_timeout_s"] = -2;
    auto bad = job_from_json(wire);
    REQUIRE_FALSE(bad.has_value());
    CHECK(bad.error().field == "resources.idle_timeout_s");
}

} // namespace test_recipe_valid
} // namespace
