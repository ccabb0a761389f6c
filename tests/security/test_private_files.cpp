// Files holding secrets or a team's data are 0600 from their first byte and are never written
// through a name someone else could have planted: worker.json (the worker's token), the local
// pool's credentials (local.json), the coordinator's pool.db (with its -wal and -shm files) and the
// worker's cached input archives.
#include "core/store/sqlite_store.hpp"
#include "core/util/files.hpp"
#include "tests/support.hpp"

#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <filesystem>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_private_files {

using namespace gpupool;
namespace fs = std::filesystem;

namespace {

unsigned mode_of(const fs::path& p) {
    struct stat st {};
    REQUIRE(::lstat(p.c_str(), &st) == 0);
    return static_cast<unsigned>(st.st_mode) & 0777U;
}

// The umask a careless shell has: what a file gets when its creator does not choose.
class Umask {
public:
    explicit Umask(mode_t mask) : m_old(::umask(mask)) {}
    ~Umask() { ::umask(m_old); }
    Umask(const Umask&) = delete;
    Umask& operator=(const Umask&) = delete;

private:
    mode_t m_old;
};

} // namespace

TEST_CASE("private files: write_private_file makes 0600 files whatever the umask, replacing atomically",
          "[security]") {
    Umask open_umask(0);
    test::TempDir dir;
    const auto file = dir.path() / "secret.json";
    REQUIRE(util::write_private_file(file, "one"));
    CHECK(mode_of(file) == 0600U);
    CHECK(test::slurp(file) == "one");

    // An existing, readable file is replaced by a private one.
    ::chmod(file.c_str(), 0644);
    REQUIRE(util::write_private_file(file, "two"));
    CHECK(mode_of(file) == 0600U);
    CHECK(test::slurp(file) == "two");

    // A symlink planted at the target is replaced, not written through.
    const auto elsewhere = dir.write("elsewhere", "");
    fs::remove(file);
    fs::create_symlink(elsewhere, file);
    REQUIRE(util::write_private_file(file, "three"));
    CHECK(fs::is_regular_file(fs::symlink_status(file)));
    CHECK(test::slurp(elsewhere).empty());

    // No temporary file is left behind.
    int entries = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir.path())) {
        ++entries;
    }
    CHECK(entries == 2);
}

TEST_CASE("private files: the coordinator's pool.db and its -wal and -shm files are 0600", "[security]") {
    Umask open_umask(0);
    test::TempDir dir;
    const auto db = dir.path() / "pool.db";
    auto store = store::SqliteStore::open(db);
    REQUIRE(store);
    CHECK(mode_of(db) == 0600U);
    for (const char* suffix : {"-wal", "-shm"}) {
        const fs::path side = db.string() + suffix;
        INFO(side);
        REQUIRE(fs::exists(side)); // WAL mode: they exist while the store is open
        CHECK(mode_of(side) == 0600U);
    }
}

TEST_CASE("private files: gpupool run keeps its credentials, worker.json, pool.db and cached inputs 0600",
          "[security][worker-cli]") {
    Umask open_umask(0); // the gpupool child inherits it
    test::TempDir dir;
    const auto state = dir.path() / "state";
    fs::create_directories(state / "worker");
    // Names an attacker with access to the directory could plant beforehand: the old code wrote the
    // credentials through them. Nothing may be written to where they point.
    const auto stolen = dir.write("stolen", "");
    const auto stolen_worker = dir.write("stolen-worker", "");
    fs::create_symlink(stolen, state / "local.json");
    fs::create_symlink(stolen_worker, state / "worker" / "worker.json.tmp");

    fs::create_directories(dir.path() / "data");
    dir.write("data/prompts.txt", "What is 2+2?\n");
    const auto recipe = dir.write("inputs.toml", "format = 1\nname = \"reader\"\nimage = \"x\"\n"
                                                 "command = \"cat $GPUPOOL_WORK_DIR/data/prompts.txt\"\n"
                                                 "[resources]\ncpus = 0.1\nmemory = \"64MiB\"\n"
                                                 "[inputs]\npaths = [\"data\"]\n");
    auto r =
        test::run_gpupool({"run", "--runtime", "process", recipe.string(), "--data-dir", state.string()}, dir.path());
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);

    CHECK(test::slurp(stolen).empty());
    CHECK(test::slurp(stolen_worker).empty());
    CHECK(fs::is_regular_file(fs::symlink_status(state / "local.json")));
    CHECK(mode_of(state / "local.json") == 0600U);
    CHECK(mode_of(state / "worker" / "worker.json") == 0600U);
    CHECK(mode_of(state / "pool.db") == 0600U);
    int cached = 0;
    for (const auto& e : fs::directory_iterator(state / "worker" / "inputs")) {
        INFO(e.path());
        CHECK(mode_of(e.path()) == 0600U);
        ++cached;
    }
    CHECK(cached == 1);
}

} // namespace test_private_files
} // namespace
