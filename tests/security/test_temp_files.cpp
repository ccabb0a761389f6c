// Temporary archives get unpredictable names, created O_EXCL and 0600, and are removed afterwards:
// nobody can plant a symlink where gpupool is about to write, and two packs never share a file.
#include "cmd/remote.hpp"
#include "core/coordinator/service.hpp"
#include "core/store/open_store.hpp"
#include "core/net/http_client.hpp"
#include "core/util/files.hpp"
#include "tests/support.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <thread>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_temp_files {

using namespace gpupool;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

std::size_t entries_in(const fs::path& dir) {
    std::size_t n = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) {
        ++n;
    }
    return n;
}

// TMPDIR pointing at a test directory for the scope (temp_directory_path() reads it).
class TmpDirEnv {
public:
    explicit TmpDirEnv(const fs::path& dir) {
        if (const char* old = std::getenv("TMPDIR")) {
            m_old = old;
        }
        ::setenv("TMPDIR", dir.c_str(), 1);
    }
    ~TmpDirEnv() {
        if (m_old) {
            ::setenv("TMPDIR", m_old->c_str(), 1);
        } else {
            ::unsetenv("TMPDIR");
        }
    }
    TmpDirEnv(const TmpDirEnv&) = delete;
    TmpDirEnv& operator=(const TmpDirEnv&) = delete;

private:
    std::optional<std::string> m_old;
};

struct MemberPool {
    test::TempDir dir;
    std::unique_ptr<coordinator::CoordinatorService> service;
    config::ClientConfig member;

    MemberPool() {
        coordinator::ServiceOptions o;
        o.http.host = "127.0.0.1";
        o.http.port = 0;
        auto opened = store::open_store((dir.path() / "pool.db").string());
        REQUIRE(opened);
        service = std::make_unique<coordinator::CoordinatorService>(o, std::move(*opened), coordinator::system_clock());
        std::string admin;
        REQUIRE(service->start(&admin));
        const std::string url = "http://127.0.0.1:" + std::to_string(service->port());
        net::ClientOptions co;
        co.base_url = url;
        co.token = admin;
        net::HttpClient a(co);
        REQUIRE(a.request("POST", "/v1/admin/teams", R"({"name": "fellows"})")->status == 201);
        auto t = a.request("POST", "/v1/admin/tokens", R"({"role": "member", "team": "fellows"})");
        REQUIRE(t->status == 201);
        member.url = url;
        member.token = json::parse(t->body)["token"].get<std::string>();
    }
    ~MemberPool() { service->stop(); }
};

std::vector<recipe::JobSpec> job_with_inputs(const fs::path& input) {
    recipe::JobSpec s;
    s.name = "j";
    s.inputs.paths = {input.filename().string()};
    s.inputs.resolved = {input.string()};
    return {s};
}

} // namespace

TEST_CASE("temp files: TempFile names are unique, 0600, and removed with the object", "[security]") {
    test::TempDir dir;
    fs::path first;
    {
        auto a = util::TempFile::create(dir.path(), "gpupool-inputs-", ".tar");
        auto b = util::TempFile::create(dir.path(), "gpupool-inputs-", ".tar");
        REQUIRE(a);
        REQUIRE(b);
        CHECK(a->path() != b->path());
        CHECK(a->path().filename().string().starts_with("gpupool-inputs-"));
        CHECK(a->path().extension() == ".tar");
        CHECK(a->path().filename().string().find(std::to_string(::getpid())) == std::string::npos);
        struct stat st {};
        REQUIRE(::stat(a->path().c_str(), &st) == 0);
        CHECK((st.st_mode & 0777) == 0600);
        first = a->path();
        // Moving hands the file over; it is removed once.
        util::TempFile moved = std::move(*a);
        CHECK(moved.path() == first);
        CHECK(fs::exists(first));
    }
    CHECK_FALSE(fs::exists(first));
    CHECK(entries_in(dir.path()) == 0);
}

TEST_CASE("temp files: packing inputs does not write through a planted symlink, and leaves nothing behind",
          "[security][cli]") {
    MemberPool pool;
    test::TempDir data;
    const auto input = data.write("prompts.txt", "What is 2+2?\n");
    test::TempDir tmp;
    TmpDirEnv env(tmp.path());
    const auto victim = tmp.write("victim", "precious\n");
    // The name the old code used for this process's first archive.
    fs::create_symlink(victim, tmp.path() / ("gpupool-inputs-" + std::to_string(::getpid()) + "-0.tar"));

    client::ApiClient api(pool.member);
    auto jobs = job_with_inputs(input);
    auto st = cmd::ship_inputs(api, jobs);
    INFO((st ? std::string("shipped") : st.error().describe()));
    REQUIRE(st);
    CHECK(jobs.front().inputs.archive.size() == 64);
    CHECK(test::slurp(victim) == "precious\n");
    CHECK(entries_in(tmp.path()) == 2); // the victim and the planted link: the archive was removed
}

TEST_CASE("temp files: two concurrent packs in one process do not collide", "[security][cli]") {
    MemberPool pool;
    test::TempDir data;
    const auto a_input = data.write("a.txt", std::string(200'000, 'a'));
    const auto b_input = data.write("b.txt", std::string(200'000, 'b'));

    // Alone first: the digest each one's inputs must get.
    auto digest_of = [&](const fs::path& input) {
        client::ApiClient api(pool.member);
        auto jobs = job_with_inputs(input);
        REQUIRE(cmd::ship_inputs(api, jobs));
        return jobs.front().inputs.archive;
    };
    const std::string a_digest = digest_of(a_input);
    const std::string b_digest = digest_of(b_input);
    REQUIRE(a_digest != b_digest);

    // Together, many times: each thread must keep getting its own archive.
    constexpr int k_rounds = 15;
    std::vector<std::string> a_got;
    std::vector<std::string> b_got;
    auto pack_many = [&](const fs::path& input, std::vector<std::string>& got) {
        client::ApiClient api(pool.member);
        for (int i = 0; i < k_rounds; ++i) {
            auto jobs = job_with_inputs(input);
            got.push_back(cmd::ship_inputs(api, jobs) ? jobs.front().inputs.archive : std::string("failed"));
        }
    };
    std::thread a_thread([&] { pack_many(a_input, a_got); });
    std::thread b_thread([&] { pack_many(b_input, b_got); });
    a_thread.join();
    b_thread.join();
    CHECK(a_got == std::vector<std::string>(k_rounds, a_digest));
    CHECK(b_got == std::vector<std::string>(k_rounds, b_digest));
}

} // namespace test_temp_files
} // namespace
