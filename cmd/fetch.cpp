#include "cmd/fetch.hpp"

#include "cmd/cli_app.hpp"
#include "cmd/remote.hpp"
#include "cmd/sweeps.hpp"
#include "core/archive/archive.hpp"
#include "core/client/jobs_client.hpp"

#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>

namespace gpupool::cmd {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// Where one job's outputs go, refusing to overwrite what is there unless told to.
Result<fs::path> destination(const fs::path& dir, const std::string& name, const FetchOptions& o) {
    const fs::path dest = dir / (o.tar ? name + "-outputs.tar" : name);
    std::error_code ec;
    if (fs::exists(fs::symlink_status(dest, ec)) && !(fs::is_directory(dest, ec) && fs::is_empty(dest, ec))) {
        if (!o.force) {
            return make_error(ErrorCode::conflict,
                              dest.string() + " exists: --force replaces it, or fetch into another DIR", "dir");
        }
        fs::remove_all(dest, ec);
        if (ec) {
            return make_error(ErrorCode::io, "cannot remove " + dest.string() + ": " + ec.message());
        }
    }
    return dest;
}

// Downloads and writes one job's outputs; the JSON line describes what was written.
Result<json> fetch_one(client::ApiClient& api, const NamedJob& job, const fs::path& dest, bool tar) {
    auto data = client::JobsClient(api).outputs(job.id);
    if (!data) {
        return data.error();
    }
    if (tar) {
        std::ofstream out(dest, std::ios::binary);
        out << *data;
        if (!out) {
            return make_error(ErrorCode::io, "cannot write " + dest.string());
        }
        return Result<json>(boost::system::in_place_value, json{{"job", job.id.value()}, {"name", job.name}, {"path", dest.string()}, {"bytes", data->size()}});
    }
    // Unpacked into DEST/ (the archive cannot write outside it).
    auto unpacked = archive::unpack_archive(*data, dest);
    if (!unpacked) {
        return unpacked.error();
    }
    for (const auto& s : unpacked->skipped) {
        std::cerr << "warning: skipped " << printable(s) << '\n';
    }
    return Result<json>(boost::system::in_place_value, json{{"job", job.id.value()}, {"name", job.name}, {"dir", dest.string()}, {"files", unpacked->written}});
}

void print_fetched(const json& r, bool list_files) {
    if (r.contains("path")) {
        std::cout << "wrote " << printable(r["path"]) << " (" << r["bytes"] << " bytes)\n";
        return;
    }
    const auto n = r["files"].size();
    std::cout << "job " << r["job"] << " " << printable(r["name"]) << ": " << n << (n == 1 ? " file" : " files")
              << " into " << printable(r["dir"]) << "/\n";
    if (list_files) {
        for (const auto& f : r["files"]) {
            std::cout << "  " << printable(f) << '\n';
        }
    }
}

} // namespace

int run_fetch(const FetchOptions& o) {
    const GlobalOptions& global = o.global;
    std::vector<std::int64_t> ids;
    std::string dir = ".";
    const std::size_t dir_at = o.sweep > 0 ? 0 : 1;
    if (o.args.size() > dir_at + 1 || (o.sweep == 0 && o.args.empty())) {
        report_error(global, make_error(ErrorCode::invalid_input,
                                        "expected `fetch JOB [DIR]` or `fetch --sweep ID [DIR]`", "job"));
        return k_exit_usage;
    }
    if (o.sweep == 0) {
        const std::string& text = o.args[0];
        char* end = nullptr;
        const long long id = std::strtoll(text.c_str(), &end, 10);
        if (text.empty() || *end != '\0' || id <= 0) {
            report_error(global, make_error(ErrorCode::invalid_input, "expected a job id, got \"" + text + "\"", "job"));
            return k_exit_usage;
        }
        ids.push_back(id);
    }
    if (o.args.size() > dir_at) {
        dir = o.args[dir_at];
    }
    auto api = connect(global);
    if (!api) {
        return k_exit_failed;
    }
    auto jobs = chosen_jobs(*api, ids, o.sweep);
    if (!jobs) {
        report_error(global, jobs.error());
        return k_exit_failed;
    }
    std::error_code ec;
    fs::create_directories(dir, ec);
    const auto names = folder_names(*jobs);
    json results = json::array();
    int missing = 0;
    for (std::size_t i = 0; i < jobs->size(); ++i) {
        const NamedJob& job = (*jobs)[i];
        auto dest = destination(dir, names[i], o);
        auto got = dest ? fetch_one(*api, job, *dest, o.tar) : Result<json>(boost::system::in_place_error, dest.error());
        if (!got) {
            // One job's outputs missing (not run, failed, cancelled) does not stop the others.
            ++missing;
            Error e = got.error();
            if (o.sweep == 0) {
                report_error(global, e);
            } else if (global.json) {
                results.push_back({{"job", job.id.value()}, {"name", job.name}, {"error", e.describe()}});
            } else {
                std::cerr << "error: " << printable(job.name) << ": " << printable(e.describe()) << '\n';
            }
            continue;
        }
        if (!global.json) {
            print_fetched(*got, o.sweep == 0);
        }
        results.push_back(std::move(*got));
    }
    if (global.json && !results.empty()) {
        std::cout << (o.sweep > 0 ? results : results[0]).dump() << '\n';
    }
    if (o.sweep > 0 && !global.json) {
        std::cout << "fetched " << jobs->size() - static_cast<std::size_t>(missing) << " of " << jobs->size() << " jobs"
                  << (missing > 0 ? " (see above for the others)" : "") << '\n';
    }
    return missing == 0 ? k_exit_ok : k_exit_failed;
}

void register_fetch(Cli& cli) {
    auto o = std::make_shared<FetchOptions>();
    CLI::App* sub = add_command(cli, "fetch",
                                "Download finished jobs' outputs into DIR/<job name>/ (a job, or a whole sweep)");
    sub->add_option("args", o->args, "JOB [DIR] (or [DIR] with --sweep); DIR defaults to the current directory");
    sub->add_option("--sweep", o->sweep, "Every job of this sweep, each into DIR/<job name>/")
        ->check(CLI::PositiveNumber);
    sub->add_flag("--tar", o->tar, "Keep each archive as it came (DIR/<job name>-outputs.tar) instead of unpacking it");
    sub->add_flag("--force", o->force, "Replace what is already at DIR/<job name>");
    add_help_footer(sub,
                    "gpupool fetch 12 results/           # results/<name of job 12>/\n"
                    "gpupool fetch --sweep 4 results/    # results/eval-n0/, results/eval-n1/, ... (-INDEX where a "
                    "name repeats)",
                    "README.md (Client commands), docs/recipes.md ([outputs])", Reach::coordinator);
    sub->callback([&cli, o] {
        o->global = cli.global;
        cli.exit_code = run_fetch(*o);
    });
}

} // namespace gpupool::cmd
