// A job's writable folders are the job's, and every name in them may be a link a hostile job
// planted to a host folder or file. The worker (root in CI, as on an owner's machine that installs
// it as root) must never act through one: not when it prepares the next job of the team (its cache
// and the cache's huggingface/), not when it collects outputs, not when a job is cancelled, not when
// it empties the attempt folder for the next job. Run for real with every runtime this machine has:
// the process runtime always, podman and docker where .ci/setup-containers set them up.
#include "tests/worker/agent/agent_fixture.hpp"
#include "tests/worker/runtime/runtimes_under_test.hpp"
#include "worker/agent/job_container.hpp"

#include <sys/stat.h>

#include <fstream>
#include <set>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_job_links {

using namespace gpupool;
using namespace gpupool::test::agent;
namespace fs = std::filesystem;

namespace {

// What must not change about a host file or folder: its mode, owner and content (a folder's
// entries by name).
struct Seen {
    mode_t mode = 0;
    uid_t uid = 0;
    gid_t gid = 0;
    std::string content;
    bool operator==(const Seen&) const = default;
};

Seen seen(const fs::path& p) {
    struct stat st{};
    REQUIRE(::lstat(p.c_str(), &st) == 0);
    Seen s{st.st_mode, st.st_uid, st.st_gid, {}};
    if (S_ISDIR(st.st_mode)) {
        std::set<std::string> names;
        for (const auto& e : fs::directory_iterator(p)) {
            names.insert(e.path().filename().string());
        }
        for (const auto& n : names) {
            s.content += n + "\n";
        }
    } else {
        std::ifstream in(p, std::ios::binary);
        s.content.assign(std::istreambuf_iterator<char>(in), {});
    }
    return s;
}

mode_t mode_of(const fs::path& p) {
    struct stat st{};
    REQUIRE(::lstat(p.c_str(), &st) == 0);
    return st.st_mode & 07777;
}

uid_t owner_of(const fs::path& p) {
    struct stat st{};
    REQUIRE(::lstat(p.c_str(), &st) == 0);
    return st.st_uid;
}

recipe::JobSpec hostile(const std::string& name, const std::string& script) {
    recipe::JobSpec s = job_spec(name);
    s.resources.gpus = 0;
    s.resources.gpu_milli = 0;
    s.resources.cpu_milli = 200;
    s.resources.memory_mib = 128;
    s.command = {script};
    s.shell = true;
    s.retry.max_attempts = 1;
    return s;
}

// Links to the host targets in every place a job can write. The targets are host paths: inside a
// container they resolve to nothing, but the worker outside reads them as the host's.
std::string plant(const fs::path& victim_dir, const fs::path& victim_file, bool writable_work) {
    const std::string d = victim_dir.string();
    const std::string f = victim_file.string();
    std::string s = "rm -rf \"$GPUPOOL_CACHE_DIR/huggingface\"; ln -s " + d + " \"$GPUPOOL_CACHE_DIR/huggingface\"; "
                    "ln -sfn " + d + " \"$GPUPOOL_CACHE_DIR/dirlink\"; ln -sfn " + f + " \"$GPUPOOL_CACHE_DIR/filelink\"; "
                    "ln -s " + d + " \"$GPUPOOL_OUTPUT_DIR/dirlink\"; ln -s " + f + " \"$GPUPOOL_OUTPUT_DIR/filelink\"; "
                    "mkdir -p \"$GPUPOOL_OUTPUT_DIR/sub/deeper\"; ln -s " + d + " \"$GPUPOOL_OUTPUT_DIR/sub/deeper/x\"; "
                    // a hard link to a host file: only where the job shares the host's file system
                    "ln " + f + " \"$GPUPOOL_OUTPUT_DIR/hard\" 2>/dev/null; ";
    if (writable_work) {
        s += "ln -s " + d + " \"$GPUPOOL_WORK_DIR/worklink\"; ";
    }
    return s + "echo planted; ";
}

} // namespace

TEST_CASE("a job's links never make the worker touch a host folder or file", "[security][links][agent-runtime]") {
    for (const auto& candidate : test::runtimes_under_test()) {
        DYNAMIC_SECTION(candidate.kind) {
            auto rt = test::runtime_or_skip(candidate);
            if (!rt) {
                continue;
            }
            // The owner's things the links point at, in a folder any user may pass through.
            test::TempDir host;
            fs::permissions(host.path(), fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
            const fs::path victim_dir = host.path() / "profile.d";
            fs::create_directories(victim_dir);
            fs::permissions(victim_dir, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec);
            const fs::path victim_inner = host.write("profile.d/owner.sh", "export OWNER=1\n");
            fs::permissions(victim_inner, fs::perms::owner_read | fs::perms::owner_write);
            const fs::path victim_file = host.write("authorized_keys", "ssh-ed25519 AAAA owner\n");
            fs::permissions(victim_file, fs::perms::owner_read | fs::perms::owner_write);
            const Seen before_dir = seen(victim_dir), before_inner = seen(victim_inner), before_file = seen(victim_file);

            Pool pool;
            test::TempDir work;
            worker::StaticGpuProbe no_gpus({});
            RunningAgent running(options(pool, work.path()), *rt, no_gpus);
            const auto ended = [&](std::int64_t id) {
                const std::string s = state_of(pool, id);
                return s == "succeeded" || s == "failed" || s == "cancelled";
            };
            const auto recycled = [&] { return fs::is_empty(work.path() / "attempts"); };

            // 1. Links everywhere; its outputs are collected and its folder recycled.
            const auto first = pool.submit(hostile("plant", plant(victim_dir, victim_file, !candidate.isolates)));
            REQUIRE(eventually([&] { return ended(first); }, 60s));
            INFO(pool.logs(first));
            CHECK(pool.job(first)["state"] == "succeeded");
            REQUIRE(eventually(recycled, 30s));

            // 2. The team's next job: the worker prepares the cache the first one filled with links.
            auto next = hostile("next", "echo probe > \"$HF_HOME/probe\" && ls -ld \"$GPUPOOL_CACHE_DIR\" && "
                                        "echo ok > \"$GPUPOOL_OUTPUT_DIR/ok\"");
            const auto second = pool.submit(next);
            REQUIRE(eventually([&] { return ended(second); }, 60s));
            {
                INFO(pool.logs(second));
                CHECK(pool.job(second)["state"] == "succeeded"); // its cache was made a folder again, and writable
            }
            REQUIRE(eventually(recycled, 30s));
            // No folder of the job is open to everyone; a root worker's container job owns its own.
            for (const auto& e : fs::directory_iterator(work.path() / "cache" / "teams")) {
                CHECK(mode_of(e.path()) == 0700);
                CHECK(fs::is_directory(fs::symlink_status(e.path() / "huggingface")));
                CHECK(mode_of(e.path() / "huggingface") == 0700);
                if (candidate.isolates && ::geteuid() == 0) {
                    CHECK(owner_of(e.path()) == worker::k_job_uid);
                    CHECK(owner_of(e.path() / "huggingface") == worker::k_job_uid);
                }
            }

            // 3. Cancelled while its links are in place.
            const auto third =
                pool.submit(hostile("cancelled", plant(victim_dir, victim_file, !candidate.isolates) + "sleep 60"));
            REQUIRE(eventually([&] { return pool.logs(third).find("planted") != std::string::npos; }, 60s));
            auto c = pool.client(pool.member);
            Pool::call(c, "POST", "/v1/jobs/" + std::to_string(third) + "/cancel", nullptr, 200);
            REQUIRE(eventually([&] { return ended(third); }, 60s));
            REQUIRE(eventually(recycled, 30s));

            // Every host target as it was: mode, owner and content.
            CHECK(seen(victim_dir) == before_dir);
            CHECK(seen(victim_inner) == before_inner);
            CHECK(seen(victim_file) == before_file);
        }
    }
}

} // namespace test_job_links
} // namespace
