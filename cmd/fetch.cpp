#include "cmd/fetch.hpp"

#include "cmd/cli_app.hpp"
#include "cmd/remote.hpp"
#include "cmd/sweeps.hpp"
#include "core/archive/archive.hpp"
#include "core/client/jobs_client.hpp"
#include "core/util/sha256.hpp"

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

// The job's manifest, checked against the archive that came (the coordinator listed that archive
// when its worker uploaded it), written to `path`; an empty JSON object for a coordinator that keeps
// no manifests (older than this client), with a warning.
Result<json> fetch_manifest(client::ApiClient& api, const NamedJob& job, const std::string& archive,
                            const fs::path& path) {
    auto m = client::JobsClient(api).manifest(job.id);
    if (!m) {
        if (m.error().code == ErrorCode::not_found) {
            std::cerr << "warning: no manifest for job " << job.id.value() << ": " << printable(m.error().describe())
                      << '\n';
            return Result<json>(boost::system::in_place_value, json::object());
        }
        return m.error();
    }
    const json& outputs = m->value("outputs", json::object());
    const std::string expected = outputs.is_object() ? outputs.value("archive_sha256", "") : "";
    if (!expected.empty() && util::sha256_hex(archive) != expected) {
        return make_error(ErrorCode::internal, "the outputs of job " + std::to_string(job.id.value()) +
                                                   " that came are not the ones its manifest records (sha256 " +
                                                   expected + "): nothing written");
    }
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << m->dump(2, ' ', false, json::error_handler_t::replace) << '\n';
    if (!out) {
        return make_error(ErrorCode::io, "cannot write " + path.string());
    }
    return m;
}

// Downloads and writes one job's outputs, and its manifest beside them (`manifest`); the JSON line
// describes what was written.
Result<json> fetch_one(client::ApiClient& api, const NamedJob& job, const fs::path& dest, bool tar,
                       const fs::path& manifest) {
    auto data = client::JobsClient(api).outputs(job.id);
    if (!data) {
        return data.error();
    }
    auto m = fetch_manifest(api, job, *data, manifest);
    if (!m) {
        return m.error();
    }
    if (tar) {
        std::ofstream out(dest, std::ios::binary);
        out << *data;
        if (!out) {
            return make_error(ErrorCode::io, "cannot write " + dest.string());
        }
        return Result<json>(boost::system::in_place_value, json{{"job", job.id.value()},
                                                                {"name", job.name},
                                                                {"path", dest.string()},
                                                                {"bytes", data->size()},
                                                                {"manifest", manifest.string()}});
    }
    // Unpacked into DEST/ (the archive cannot write outside it).
    auto unpacked = archive::unpack_archive(*data, dest);
    if (!unpacked) {
        return unpacked.error();
    }
    for (const auto& s : unpacked->skipped) {
        std::cerr << "warning: skipped " << printable(s) << '\n';
    }
    return Result<json>(boost::system::in_place_value, json{{"job", job.id.value()},
                                                            {"name", job.name},
                                                            {"dir", dest.string()},
                                                            {"files", unpacked->written},
                                                            {"manifest", manifest.string()}});
}

void print_fetched(const json& r, bool list_files) {
    if (r.contains("path")) {
        std::cout << "wrote " << printable(r["path"]) << " (" << r["bytes"] << " bytes) and its manifest "
                  << printable(r["manifest"]) << "\n";
        return;
    }
    const auto n = r["files"].size();
    std::cout << "job " << r["job"] << " " << printable(r["name"]) << ": " << n << (n == 1 ? " file" : " files")
              << " into " << printable(r["dir"]) << "/, its manifest " << printable(r["manifest"]) << "\n";
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
        const fs::path manifest = fs::path(dir) / (names[i] + ".manifest.json");
        auto got = dest ? fetch_one(*api, job, *dest, o.tar, manifest)
                        : Result<json>(boost::system::in_place_error, dest.error());
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
                                "Download finished jobs' outputs into DIR/<job name>/ (a job, or a whole sweep), each "
                                "with its manifest (DIR/<job name>.manifest.json)");
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
