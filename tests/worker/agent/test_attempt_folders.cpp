// Attempt folders are recycled: a delivered attempt's folder is emptied and renamed for the next
// one (same inode, nothing of the last job left), and a folder a job tampered with (a symlink for
// work/, a hard link for its log) is removed or cleaned without touching anything outside it.
#include "tests/support.hpp"
#include "worker/agent/attempt_folders.hpp"
#include "worker/agent/spool.hpp"

#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <fstream>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_attempt_folders {

using namespace gpupool;
namespace fs = std::filesystem;

namespace {

ino_t inode_of(const fs::path& p) {
    struct stat st{};
    REQUIRE(::lstat(p.c_str(), &st) == 0);
    return st.st_ino;
}

void put(const fs::path& p, const std::string& text) {
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << text;
}

// A folder as a finished attempt leaves it.
fs::path used_folder(worker::AttemptFolders& folders, std::int64_t id) {
    const fs::path dir = folders.take(AttemptId(id));
    put(dir / "work" / "input.txt", "team A's input");
    put(dir / "work" / "sub" / "deep.bin", "more");
    put(dir / "outputs" / "result.json", "{\"secret\": 1}");
    put(dir / "log", "team A's log\n");
    put(dir / "assignment.json", "{\"a\": 1}");
    put(dir / "state.json", "{\"s\": 1}");
    put(dir / "outputs.tar", "tar");
    return dir;
}

} // namespace

TEST_CASE("attempt folders: a delivered folder is emptied and taken by the next attempt", "[spool][folders]") {
    test::TempDir work;
    worker::AttemptFolders folders(work.path() / "attempts", work.path() / "spare");
    const fs::path first = used_folder(folders, 1);
    const ino_t inode = inode_of(first);
    folders.give_back(first, true);
    CHECK_FALSE(fs::exists(first));
    CHECK(folders.spare_count() == 1);

    const fs::path second = folders.take(AttemptId(2));
    CHECK(second == work.path() / "attempts" / "2");
    CHECK(inode_of(second) == inode); // the same folder, renamed: no inode made
    CHECK(folders.spare_count() == 0);
    CHECK(fs::is_empty(second / "work"));
    CHECK(fs::is_empty(second / "outputs"));
    for (const char* f : {"log", "assignment.json", "state.json"}) {
        INFO(f);
        CHECK(fs::file_size(second / f) == 0);
    }
    CHECK_FALSE(fs::exists(second / "outputs.tar"));
    CHECK((fs::status(second / "outputs").permissions() & fs::perms::others_all) == fs::perms::none);

    // Spare folders outlive the worker: the next run takes them.
    folders.give_back(second, true);
    worker::AttemptFolders again(work.path() / "attempts", work.path() / "spare");
    CHECK(again.spare_count() == 1);
    CHECK(inode_of(again.take(AttemptId(3))) == inode);
}

TEST_CASE("attempt folders: kept only when reusable and under the cap", "[spool][folders]") {
    test::TempDir work;
    worker::AttemptFolders folders(work.path() / "attempts", work.path() / "spare", 1);
    const fs::path running_still = used_folder(folders, 1);
    folders.give_back(running_still, false); // its container could not be removed
    CHECK_FALSE(fs::exists(running_still));
    CHECK(folders.spare_count() == 0);
    const fs::path a = used_folder(folders, 2);
    const fs::path b = used_folder(folders, 3);
    folders.give_back(a, true);
    folders.give_back(b, true);
    CHECK(folders.spare_count() == 1);
    CHECK_FALSE(fs::exists(a));
    CHECK_FALSE(fs::exists(b));
    CHECK(std::distance(fs::directory_iterator(work.path() / "spare"), fs::directory_iterator()) == 1);
}

TEST_CASE("attempt folders: a job's links never reach outside its folder", "[spool][folders][security]") {
    test::TempDir work;
    test::TempDir outside;
    put(outside.path() / "precious.txt", "the owner's file");
    put(outside.path() / "linked.txt", "hard-linked by the job");
    worker::AttemptFolders folders(work.path() / "attempts", work.path() / "spare");

    SECTION("work/ replaced by a symlink: the link goes, the folder is not kept") {
        const fs::path dir = used_folder(folders, 1);
        fs::remove_all(dir / "work");
        fs::create_directory_symlink(outside.path(), dir / "work");
        folders.give_back(dir, true);
        CHECK(folders.spare_count() == 0);
        CHECK_FALSE(fs::exists(fs::symlink_status(dir)));
    }
    SECTION("symlinks inside outputs/ and a hard-linked log: removed or unlinked, never followed") {
        const fs::path dir = used_folder(folders, 1);
        fs::create_symlink(outside.path() / "precious.txt", dir / "outputs" / "link");
        fs::create_directory_symlink(outside.path(), dir / "outputs" / "dirlink");
        fs::remove(dir / "log");
        fs::create_hard_link(outside.path() / "linked.txt", dir / "log");
        fs::remove(dir / "state.json");
        fs::create_symlink(outside.path() / "precious.txt", dir / "state.json");
        folders.give_back(dir, true);
        CHECK(folders.spare_count() == 1);
        const fs::path next = folders.take(AttemptId(2));
        CHECK(fs::is_empty(next / "outputs"));
        CHECK_FALSE(fs::exists(fs::symlink_status(next / "log")));
        CHECK_FALSE(fs::exists(fs::symlink_status(next / "state.json")));
    }
    CHECK(test::slurp(outside.path() / "precious.txt") == "the owner's file");
    CHECK(test::slurp(outside.path() / "linked.txt") == "hard-linked by the job");
}

TEST_CASE("attempt folders: write_in_place keeps the inode and leaves valid JSON", "[spool][folders]") {
    test::TempDir work;
    const fs::path p = work.path() / "state.json";
    std::string error;
    REQUIRE(worker::write_in_place(p, R"({"reason":"a long reason for the first write"})" "\n", error));
    const ino_t inode = inode_of(p);
    REQUIRE(worker::write_in_place(p, R"({"reason":"short"})" "\n", error));
    CHECK(inode_of(p) == inode);
    CHECK(nlohmann::json::parse(test::slurp(p)) == nlohmann::json{{"reason", "short"}}); // padding is whitespace
    // Larger than a page: through a temporary file, whole.
    const std::string big = nlohmann::json{{"reason", std::string(10'000, 'x')}}.dump();
    REQUIRE(worker::write_in_place(p, big, error));
    CHECK(test::slurp(p) == big);
    // A symlink in its place is refused, its target untouched.
    const fs::path target = work.path() / "target";
    put(target, "keep");
    fs::create_symlink(target, work.path() / "link.json");
    CHECK_FALSE(worker::write_in_place(work.path() / "link.json", "{}", error));
    CHECK(test::slurp(target) == "keep");
    CHECK_THAT(error, Catch::Contains("link.json"));
}

TEST_CASE("spool: a recycled folder never brings back the attempt that had it", "[spool][folders]") {
    test::TempDir work;
    worker::Spool spool(work.path());
    api::Assignment a;
    a.attempt = AttemptId(1);
    a.job = JobId(101);
    a.spec.name = "first";
    a.spec.image = "localhost/gpupool/busybox:latest";
    a.spec.command = {"true"};
    auto first = spool.create(a, 0);
    first.phase = worker::AttemptPhase::ended;
    first.exit_code = 3;
    first.shipped = 77;
    spool.save(first);
    spool.remove(first, true);
    a.attempt = AttemptId(2);
    a.spec.name = "second";
    auto second = spool.create(a, 0);
    CHECK(second.dir == spool.dir() / "2");
    second.shipped = 5;
    spool.save(second);
    const auto back = spool.load(0);
    REQUIRE(back.size() == 1);
    CHECK(back[0].id() == AttemptId(2));
    CHECK(back[0].a.spec.name == "second");
    CHECK(back[0].shipped == 5);
    CHECK(back[0].running());
    CHECK_FALSE(back[0].exit_code);
    // Created in a recycled folder and not yet saved (a crash in between): it comes back as attempt 3
    // with no state of its own (running, no container on record, nothing shipped), and nothing of
    // attempt 2 comes back under attempt 3's name.
    spool.remove(back[0], true);
    a.attempt = AttemptId(3);
    (void)spool.create(a, 0);
    const auto third = spool.load(0);
    REQUIRE(third.size() == 1);
    CHECK(third[0].id() == AttemptId(3));
    CHECK(third[0].running());
    CHECK(third[0].container.empty());
    CHECK(third[0].shipped == 0);
    CHECK_FALSE(third[0].exit_code);
}

} // namespace test_attempt_folders
} // namespace
