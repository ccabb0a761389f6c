// `gpupool run` with the real binary: one recipe behaves the same under every runtime (working
// directory, inputs, outputs, environment), the runtime is chosen (an engine that answers, else the
// process runtime, said in one line), and an earlier run's outputs are kept unless --force.
// Podman and docker as .ci/setup-containers sets them up (tests/worker/runtime/runtimes_under_test.hpp):
// a missing engine is a WARN and a skip, a failure under GPUPOOL_REQUIRE_CONTAINERS=1.
#include "tests/support.hpp"
#include "tests/worker/runtime/runtimes_under_test.hpp"

#include <boost/process.hpp>
#include <catch2/catch.hpp>

#include <map>
#include <sstream>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_run_cli {

using namespace gpupool;
namespace fs = std::filesystem;
namespace bp = boost::process;

namespace {

// Every file under `root` by its relative path, with its bytes.
std::map<std::string, std::string> tree(const fs::path& root) {
    std::map<std::string, std::string> files;
    for (const auto& e : fs::recursive_directory_iterator(root)) {
        if (e.is_regular_file()) {
            files[fs::relative(e.path(), root).string()] = test::slurp(e.path());
        }
    }
    return files;
}

// A recipe as a researcher writes one: a script and its data shipped as inputs, the command relative
// to the working directory, the results in the outputs folder.
fs::path same_recipe(const test::TempDir& dir) {
    dir.write(
        "job.sh",
        "set -e\n"
        "tr a-z A-Z < ./data.txt > \"$GPUPOOL_OUTPUT_DIR/upper.txt\"\n"
        "wc -l < data.txt | tr -d ' ' > ../outputs/lines.txt\n" // the outputs folder, relative too
        "{ echo \"cwd=$(basename \"$(pwd)\")\"; echo \"home=$HOME\"; echo \"lr=$GPUPOOL_PARAM_LR\"\n"
        "  [ \"$(cd ../outputs && pwd -P)\" = \"$(cd \"$GPUPOOL_OUTPUT_DIR\" && pwd -P)\" ] && echo outputs=same\n"
        "} > \"$GPUPOOL_OUTPUT_DIR/seen.txt\"\n"
        // The variables a job is given, by name; the engines' own (HOSTNAME, podman's container
        // and TERM) and the shell's are not gpupool's.
        "env | cut -d= -f1 | grep -vxE 'HOSTNAME|container|TERM|PWD|OLDPWD|SHLVL|_' | sort > "
        "\"$GPUPOOL_OUTPUT_DIR/env-names.txt\"\n"
        "echo done\n");
    dir.write("data.txt", "alpha\nbeta\ngamma\n");
    return dir.write("same.toml", "format = 1\nname = \"same\"\nimage = \"" + std::string(test::k_test_image) +
                                      "\"\ncommand = \"sh job.sh\"\n"
                                      "[resources]\ncpus = 0.2\nmemory = \"64MiB\"\n[retry]\nmax_attempts = 1\n"
                                      "[inputs]\npaths = [\"job.sh\", \"data.txt\"]\n"
                                      "[sweep]\nlr = [\"0.5\"]\n"); // a parameter: GPUPOOL_PARAM_LR
}

// The gpupool binary with `args` in `cwd`, with PATH as given (the engines are found on it).
test::CliResult run_with_path(const std::vector<std::string>& args, const fs::path& cwd, const std::string& path) {
    test::TempDir io;
    const fs::path out = io.path() / "stdout";
    const fs::path err = io.path() / "stderr";
    bp::environment env = boost::this_process::environment(); // a copy: this process keeps its own
    env["PATH"] = path;
    bp::child c(bp::exe = GPUPOOL_BINARY, bp::args = args, bp::std_out > out.string(), bp::std_err > err.string(),
                bp::std_in < bp::null, bp::start_dir = cwd.string(), env);
    c.wait();
    return {c.exit_code(), test::slurp(out), test::slurp(err)};
}

std::vector<std::string> lines_of(const std::string& text) {
    std::vector<std::string> out;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
        out.push_back(line);
    }
    return out;
}

} // namespace

TEST_CASE("gpupool run: one recipe gives byte-identical outputs under process, podman and docker",
          "[run-cli][agent-runtime]") {
    test::TempDir dir;
    const auto recipe = same_recipe(dir);
    std::map<std::string, std::string> first;
    std::string first_kind;
    for (const auto& candidate : test::runtimes_under_test()) {
        INFO("runtime " << candidate.kind);
        if (!test::runtime_or_skip(candidate)) {
            continue;
        }
        const std::string out_name = "out-" + candidate.kind;
        std::vector<std::string> args{
            "run",   recipe.string(), "--runtime",  candidate.kind,
            "--out", out_name,        "--data-dir", (dir.path() / ("state-" + candidate.kind)).string()};
        if (candidate.kind == "docker") {
            args.push_back("--runtime-arg=-H=" + test::env_or("GPUPOOL_TEST_DOCKER_HOST"));
        }
        auto r = test::run_gpupool(args, dir.path());
        INFO(r.out << r.err);
        REQUIRE(r.exit_code == 0);
        const fs::path out = dir.path() / out_name;
        CHECK(test::slurp(out / "same.log") == "done\n");
        const auto got = tree(out / "same");
        REQUIRE(got.count("seen.txt") == 1);
        CHECK(got.at("upper.txt") == "ALPHA\nBETA\nGAMMA\n");
        CHECK(got.at("lines.txt") == "3\n");
        CHECK(got.at("seen.txt") == "cwd=work\nhome=/tmp\nlr=0.5\noutputs=same\n");
        const std::string names = got.at("env-names.txt");
        for (const std::string var : {"GPUPOOL_JOB_ID", "GPUPOOL_WORK_DIR", "GPUPOOL_OUTPUT_DIR", "GPUPOOL_CACHE_DIR",
                                      "GPUPOOL_PARAM_LR", "HF_HOME", "HOME", "PATH"}) {
            CHECK_THAT(names, Catch::Contains(var + "\n"));
        }
        if (first_kind.empty()) {
            first = got;
            first_kind = candidate.kind;
        } else {
            INFO("compared with " << first_kind);
            CHECK(got == first);
        }
    }
}

TEST_CASE("gpupool run: without --runtime, an engine that answers, else the process runtime said in one line",
          "[run-cli][slow]") {
    test::TempDir dir;
    const auto recipe = same_recipe(dir);
    // No podman, no docker on PATH: the process runtime, and one line that says what it means.
    test::TempDir empty;
    auto r = run_with_path({"run", recipe.string(), "--out", "bare", "--data-dir", (dir.path() / "state").string()},
                           dir.path(), empty.path().string());
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(test::slurp(dir.path() / "bare" / "same" / "seen.txt") == "cwd=work\nhome=/tmp\nlr=0.5\noutputs=same\n");
    std::vector<std::string> said;
    for (const auto& line : lines_of(r.err)) {
        if (line.find("isolat") != std::string::npos || line.find("machine's programs") != std::string::npos) {
            said.push_back(line);
        }
    }
    REQUIRE(said.size() == 1);
    CHECK_THAT(said[0], Catch::Contains("this machine's programs") && Catch::Contains(test::k_test_image) &&
                            Catch::Contains("no container engine could run them") && Catch::Contains("podman") &&
                            Catch::Contains("docker"));

    // Asked for by name: the same one line, with the reason.
    auto named = test::run_gpupool({"run", recipe.string(), "--runtime", "process", "--out", "named", "--data-dir",
                                    (dir.path() / "state").string()},
                                   dir.path());
    INFO(named.err);
    REQUIRE(named.exit_code == 0);
    CHECK_THAT(named.err, Catch::Contains("runtime process: jobs run this machine's programs") &&
                              Catch::Contains("--runtime process"));
    CHECK_THAT(named.err, !Catch::Contains("NO isolation")); // the worker's own warning: not a second time

    // --runtime-arg belongs to one engine: auto cannot guess which.
    auto vague = test::run_gpupool(
        {"run", recipe.string(), "--runtime-arg=-H=unix:///x.sock", "--data-dir", (dir.path() / "state").string()},
        dir.path());
    CHECK(vague.exit_code == 2);
    CHECK_THAT(vague.err, Catch::Contains("--runtime podman or --runtime docker"));

    // With podman set up, it is the one chosen: the job runs in its image, as on the pool.
    const auto& podman = test::runtimes_under_test()[1];
    REQUIRE(podman.kind == "podman");
    if (test::runtime_or_skip(podman)) {
        auto chosen = test::run_gpupool(
            {"run", recipe.string(), "--out", "chosen", "--data-dir", (dir.path() / "state").string()}, dir.path());
        INFO(chosen.out << chosen.err);
        REQUIRE(chosen.exit_code == 0);
        CHECK_THAT(chosen.err, Catch::Contains("(runtime podman,") && !Catch::Contains("runtime process"));
        CHECK(tree(dir.path() / "chosen" / "same") == tree(dir.path() / "bare" / "same"));

        // A local image (built on this machine, never pulled) that no engine holds: an engine could
        // only fail every job, so the jobs run as bare processes, and the line says why.
        test::TempDir local;
        const fs::path unbuilt = local.write("recipe.toml", "name = \"unbuilt\"\n"
                                                            "image = \"localhost/gpupool/never-built:1\"\n"
                                                            "command = \"echo ran > $GPUPOOL_OUTPUT_DIR/ran.txt\"\n");
        auto fallback = test::run_gpupool(
            {"run", unbuilt.string(), "--out", "out", "--data-dir", (local.path() / "state").string()}, local.path());
        INFO(fallback.out << fallback.err);
        CHECK(fallback.exit_code == 0);
        CHECK(test::slurp(local.path() / "out" / "unbuilt" / "ran.txt") == "ran\n");
        CHECK_THAT(fallback.err, Catch::Contains("runtime process") &&
                                     Catch::Contains("podman: it has no localhost/gpupool/never-built:1"));
    }
}

TEST_CASE("gpupool run: an earlier run's outputs are kept unless --force, and the message says what to do",
          "[run-cli]") {
    test::TempDir dir;
    const auto recipe = dir.write("again.toml", "format = 1\nname = \"again\"\nimage = \"x\"\n"
                                                "command = \"echo $GPUPOOL_JOB_ID | tee $GPUPOOL_OUTPUT_DIR/id.txt\"\n"
                                                "[resources]\ncpus = 0.1\nmemory = \"64MiB\"\n");
    const std::vector<std::string> run{"run",     recipe.string(), "--runtime",
                                       "process", "--data-dir",    (dir.path() / "state").string()};
    auto first = test::run_gpupool(run, dir.path());
    INFO(first.out << first.err);
    REQUIRE(first.exit_code == 0);
    const fs::path id_file = dir.path() / "gpupool-out" / "again" / "id.txt";
    const std::string first_id = test::slurp(id_file);
    REQUIRE_FALSE(first_id.empty());

    // The same recipe again: refused before anything runs, the first run's outputs as they were.
    auto second = test::run_gpupool(run, dir.path());
    INFO(second.out << second.err);
    CHECK(second.exit_code == 1);
    CHECK_THAT(second.err, Catch::Contains("gpupool-out/again") && Catch::Contains("exist") &&
                               Catch::Contains("--force") && Catch::Contains("--out DIR"));
    CHECK_THAT(second.err, !Catch::Contains("job from")); // nothing was submitted
    CHECK(test::slurp(id_file) == first_id);
    CHECK(test::slurp(dir.path() / "gpupool-out" / "again.log") == first_id);

    // Only the log left: still an earlier run's, still kept.
    fs::remove_all(dir.path() / "gpupool-out" / "again");
    auto log_only = test::run_gpupool(run, dir.path());
    CHECK(log_only.exit_code == 1);
    CHECK_THAT(log_only.err, Catch::Contains("again.log"));

    // --force replaces both; a stale file of the old outputs does not survive.
    fs::create_directories(dir.path() / "gpupool-out" / "again");
    dir.write("gpupool-out/again/stale.txt", "old\n");
    auto run_forced = run;
    run_forced.push_back("--force");
    auto forced = test::run_gpupool(run_forced, dir.path());
    INFO(forced.out << forced.err);
    REQUIRE(forced.exit_code == 0);
    const std::string new_id = test::slurp(id_file);
    CHECK(new_id != first_id);
    CHECK(test::slurp(dir.path() / "gpupool-out" / "again.log") == new_id);
    CHECK_FALSE(fs::exists(dir.path() / "gpupool-out" / "again" / "stale.txt"));
}

} // namespace test_run_cli
} // namespace
