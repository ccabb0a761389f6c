// What a commit of the SQLite store costs the thread that makes it, with the write-ahead log copied
// back into the database by SQLite on that thread (its automatic checkpoint every 1,000 pages) and
// by the store's background checkpointer (store::WalCheckpointer), in the same run.
//
// Each commit is a group (store::GroupCommit) of --writes writes of --rows rows each, as the
// coordinator thread makes one per turn; each write is an upsert of worker records (what a
// heartbeat writes) plus appended pool samples, so that the log grows as under load. The two modes
// take turns, each on a new file in --dir, --rounds times. Prints per mode and round the commits'
// median, p99, p99.9 and maximum, how many took over 15 ms, the log's size at the end, and the
// checkpointer's runs.
//
//   store_commit_bench [--commits 2000] [--writes 8] [--rows 20] [--rounds 2] [--dir DIR]
//   (DIR on the disk the coordinator would use: /dev/shm takes fsync, and with it the point, out)
#include "core/store/sqlite_store.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <unistd.h>
#include <vector>

using namespace gpupool;
using namespace gpupool::store;
namespace fs = std::filesystem;

namespace {

struct Options {
    int commits = 2000;
    int writes = 8;
    int rows = 20;
    int rounds = 2;
    std::string dir;
};

Changes one_write(std::int64_t& seq, int rows) {
    Changes c;
    for (int r = 0; r < rows; ++r) {
        const std::int64_t n = ++seq;
        c.samples.push_back({n, 10'000, 40'000, 40'000'000, 31'337'000, 120, 39'000});
    }
    c.teams.push_back({TeamId(1), "owners", 1, 1, std::nullopt, std::nullopt});
    for (int w = 0; w < rows; ++w) {
        const std::int64_t id = 1 + (seq + w) % 10'000;
        c.workers.push_back({WorkerId(id), TeamId(1), "w" + std::to_string(id), R"({"gpus":[]})", WorkerState::active,
                             1, seq, std::nullopt});
    }
    return c;
}

double at(const std::vector<double>& sorted, double q) {
    const auto i = static_cast<std::size_t>(q * static_cast<double>(sorted.size() - 1));
    return sorted[i];
}

int run_mode(const Options& o, const fs::path& dir, int round, int delay_ms) {
    const fs::path db = dir / ("pool-" + std::to_string(delay_ms) + "-" + std::to_string(round) + ".db");
    SqliteOptions so;
    so.checkpoint_delay = std::chrono::milliseconds(delay_ms);
    auto store = SqliteStore::open(db, so);
    if (!store) {
        std::fprintf(stderr, "cannot open %s: %s\n", db.c_str(), store.error().message.c_str());
        return 1;
    }
    SqliteStore& s = **store;
    std::int64_t seq = 0;
    std::vector<double> ms;
    ms.reserve(static_cast<std::size_t>(o.commits));
    for (int i = 0; i < o.commits; ++i) {
        std::vector<Changes> writes;
        for (int w = 0; w < o.writes; ++w) {
            writes.push_back(one_write(seq, o.rows));
        }
        const auto t0 = std::chrono::steady_clock::now();
        bool ok = static_cast<bool>(s.begin_group());
        for (const auto& c : writes) {
            ok = ok && static_cast<bool>(s.apply(c));
        }
        ok = ok && static_cast<bool>(s.end_group());
        const auto t1 = std::chrono::steady_clock::now();
        if (!ok) {
            std::fprintf(stderr, "a commit failed\n");
            return 1;
        }
        ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    }
    const auto stats = s.checkpoint_stats();
    const fs::path wal = db.string() + "-wal";
    const auto wal_mib = fs::exists(wal) ? static_cast<double>(fs::file_size(wal)) / (1 << 20) : 0.0;
    std::sort(ms.begin(), ms.end());
    const auto slow = std::count_if(ms.begin(), ms.end(), [](double x) { return x > 15.0; });
    std::printf("| %d | %s | %d | %.2f | %.2f | %.2f | %.2f | %ld | %.1f MiB | %lld |\n", round,
                delay_ms == 0 ? "SQLite's own, on the committing thread" : "background (100 ms after a commit)",
                o.commits, at(ms, 0.5), at(ms, 0.99), at(ms, 0.999), ms.back(), static_cast<long>(slow), wal_mib,
                static_cast<long long>(stats.runs));
    std::fflush(stdout);
    return 0;
}

} // namespace

int main(int argc, char** argv) {
    Options o;
    CLI::App app{"SQLite commit latency with and without background checkpoints"};
    app.add_option("--commits", o.commits, "Group commits per mode and round")->capture_default_str();
    app.add_option("--writes", o.writes, "Writes per group commit")->capture_default_str();
    app.add_option("--rows", o.rows, "Samples and worker records per write")->capture_default_str();
    app.add_option("--rounds", o.rounds, "Times each mode runs, taking turns")->capture_default_str();
    app.add_option("--dir", o.dir, "Where the database files go (default: a new directory under TMPDIR)");
    CLI11_PARSE(app, argc, argv);

    fs::path dir = o.dir;
    const bool own = dir.empty();
    if (own) {
        std::string tmpl = (fs::temp_directory_path() / "gpupool-commit-bench.XXXXXX").string();
        if (mkdtemp(tmpl.data()) == nullptr) {
            std::perror("mkdtemp");
            return 1;
        }
        dir = tmpl;
    }
    std::printf("== SQLite commits with and without background checkpoints (bench/store_commit_bench.cpp): "
                "%d group commits of %d writes of %d rows, in %s\n",
                o.commits, o.writes, o.rows, dir.c_str());
    std::printf(
        "| round | checkpoints | commits | median ms | p99 ms | p99.9 ms | max ms | over 15 ms | log at the end "
        "| background runs |\n|---|---|---|---|---|---|---|---|---|---|\n");
    int rc = 0;
    for (int round = 1; round <= o.rounds && rc == 0; ++round) {
        for (int delay : {0, 100}) {
            rc = run_mode(o, dir, round, delay);
            if (rc != 0) {
                break;
            }
        }
    }
    if (own) {
        std::error_code ec;
        fs::remove_all(dir, ec);
    }
    return rc;
}
