// What the threat model and the owner's guide say a job's container mounts is what the worker
// mounts: docs/security.md ("Containers are hardened") and docs/worker.md ("Mounts:") each name
// every mount container_spec_for makes, and call it read-only exactly when it is.
#include "tests/support.hpp"
#include "worker/agent/job_container.hpp"

#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>
#include <string>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_docs_mounts {

using namespace gpupool;

namespace {

// The paragraph (a Markdown bullet with its continuation lines) of `file` that holds `marker`.
std::string bullet_with(const std::string& file, const std::string& marker) {
    std::ifstream in(std::string(GPUPOOL_SOURCE_DIR) + "/" + file);
    REQUIRE(in);
    std::stringstream all;
    all << in.rdbuf();
    const std::string text = all.str();
    const auto at = text.find(marker);
    INFO(file << " has no \"" << marker << "\"");
    REQUIRE(at != std::string::npos);
    const auto start = text.rfind("\n- ", at);
    const auto end = text.find("\n- ", at);
    return text.substr(start == std::string::npos ? 0 : start, end == std::string::npos ? std::string::npos : end - start);
}

// What the bullet says of `target`: from its name to the next mount named.
std::string said_of(const std::string& bullet, const std::string& target) {
    const std::string quoted = "`" + target + "`";
    const auto at = bullet.find(quoted);
    if (at == std::string::npos) {
        return {};
    }
    const auto next = bullet.find("`/", at + quoted.size());
    return bullet.substr(at, next == std::string::npos ? std::string::npos : next - at);
}

} // namespace

TEST_CASE("docs: security.md and worker.md name every mount of a job and which are read-only", "[security][docs]") {
    worker::Attempt t;
    t.a.attempt = AttemptId(1);
    t.a.job = JobId(1);
    t.a.team = TeamId(1);
    t.a.spec.name = "job";
    t.a.spec.command = {"true"};
    t.dir = "/spool/1";
    worker::ContainerContext ctx;
    ctx.worker_label = "w";
    ctx.cache_dir = "/cache-root";
    ctx.model_cache = "/cache-root/models";
    const auto spec = worker::container_spec_for(t, ctx);
    REQUIRE(spec.mounts.size() == 4);
    for (const auto& [file, marker] : {std::pair<std::string, std::string>{"docs/security.md", "Containers are hardened"},
                                       {"docs/worker.md", "- Mounts:"}}) {
        const std::string bullet = bullet_with(file, marker);
        for (const auto& m : spec.mounts) {
            const std::string said = said_of(bullet, m.container);
            INFO(file << ", the bullet with \"" << marker << "\", on " << m.container << ": \"" << said << "\"");
            CHECK_FALSE(said.empty());
            CHECK((said.find("read-only") != std::string::npos) == m.read_only);
        }
    }
}

} // namespace test_docs_mounts
} // namespace
