// What listing an outputs archive costs (core/archive/listing.hpp): the coordinator lists each
// archive a worker uploads on its parse thread, hashing the whole upload in the same pass. This
// times the SHA-256 alone (what every other upload costs), the listing alone, and the one pass that
// does both, as ratios to the SHA-256.
//
//   listing_bench [--mib 256] [--files 64] [--small 10000] [--reps 5]
//
// Two archives, packed with archive::pack_outputs from random bytes in a temporary folder: `--files`
// files making `--mib` MiB, and `--small` files of 1 KiB. Prints, per archive, the median and the
// `--reps` runs of sha256_file_hex, list_archive_file, and list_archive_file hashing the whole file.
#include "core/archive/archive.hpp"
#include "core/archive/listing.hpp"
#include "core/util/sha256.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

namespace {

namespace fs = std::filesystem;
using namespace gpupool;

double seconds_of(const std::function<void()>& f) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

void fill(const fs::path& dir, int files, std::int64_t bytes_each, std::mt19937_64& rng) {
    fs::create_directories(dir);
    std::string block(static_cast<std::size_t>(bytes_each), '\0');
    for (int i = 0; i < files; ++i) {
        for (std::size_t j = 0; j + 8 <= block.size(); j += 8) {
            const std::uint64_t r = rng();
            std::memcpy(block.data() + j, &r, 8);
        }
        std::ofstream(dir / ("f" + std::to_string(i) + ".bin"), std::ios::binary) << block;
    }
}

int measure(const char* label, const fs::path& tar, int reps) {
    std::vector<double> hash;
    std::vector<double> list;
    std::vector<double> both;
    std::int64_t entries = 0;
    bool ok = true;
    for (int r = 0; r < reps; ++r) {
        hash.push_back(seconds_of([&] { (void)util::sha256_file_hex(tar); }));
        list.push_back(seconds_of([&] {
            auto l = archive::list_archive_file(tar);
            ok = ok && l.has_value();
            entries = ok ? l->entry_count : 0;
        }));
        // What the coordinator's parse thread does with an outputs upload: one pass for both.
        both.push_back(seconds_of([&] {
            util::Sha256 whole;
            ok = ok && archive::list_archive_file(tar, {}, &whole).has_value();
            (void)whole.hex();
        }));
    }
    if (!ok) {
        std::fprintf(stderr, "listing failed\n");
        return 1;
    }
    const double mib = static_cast<double>(fs::file_size(tar)) / (1 << 20);
    std::printf("%-24s %7.1f MiB %6lld entries | sha256 %6.3f s | listing %6.3f s | one pass for both %6.3f s "
                "= %.2fx the sha256 alone (two passes: %.2fx)\n",
                label, mib, static_cast<long long>(entries), median(hash), median(list), median(both),
                median(both) / median(hash), (median(hash) + median(list)) / median(hash));
    return 0;
}

} // namespace

int main(int argc, char** argv) {
    CLI::App app{"What listing an outputs archive costs beside its SHA-256"};
    int mib = 256;
    int files = 64;
    int small = 10'000;
    int reps = 5;
    app.add_option("--mib", mib, "MiB of the large archive")->check(CLI::Range(1, 4096));
    app.add_option("--files", files, "Files of the large archive")->check(CLI::Range(1, 100'000));
    app.add_option("--small", small, "1 KiB files of the small-file archive")->check(CLI::Range(1, 100'000));
    app.add_option("--reps", reps, "Runs of each measurement")->check(CLI::Range(1, 100));
    CLI11_PARSE(app, argc, argv);

    const fs::path root = fs::temp_directory_path() / ("listing_bench." + std::to_string(::getpid()));
    std::mt19937_64 rng(7);
    fill(root / "large", files, (std::int64_t{mib} << 20) / files, rng);
    fill(root / "small", small, 1024, rng);
    int rc = 0;
    for (const char* which : {"large", "small"}) {
        const fs::path tar = root / (std::string(which) + ".tar");
        if (!archive::pack_outputs(root / which, {"."}, std::int64_t{8} << 30, tar)) {
            std::fprintf(stderr, "packing failed\n");
            rc = 1;
            break;
        }
        const std::string label = std::string(which) == "large"
                                      ? std::to_string(files) + " files of " + std::to_string(mib / files) + " MiB"
                                      : std::to_string(small) + " files of 1 KiB";
        rc |= measure(label.c_str(), tar, reps);
    }
    std::error_code ec;
    fs::remove_all(root, ec);
    return rc;
}
