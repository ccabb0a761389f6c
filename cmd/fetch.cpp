#include "cmd/cli_app.hpp"
#include "cmd/remote.hpp"
#include "worker/agent/archive.hpp"

#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>

namespace gpupool::cmd {

struct FetchOptions {
    std::int64_t job = 0;
    std::string dir = ".";
    bool tar = false;
};

int run_fetch(const GlobalOptions& global, const FetchOptions& o) {
    auto api = connect(global);
    if (!api) {
        return k_exit_failed;
    }
    auto data = api->get_bytes("/v1/jobs/" + std::to_string(o.job) + "/outputs");
    if (!data) {
        report_error(global, data.error());
        return k_exit_failed;
    }
    std::error_code ec;
    std::filesystem::create_directories(o.dir, ec);
    if (!o.tar) {
        // Unpacked into DIR/job-N/ (the archive cannot write outside it).
        const auto dest = std::filesystem::path(o.dir) / ("job-" + std::to_string(o.job));
        auto unpacked = worker::unpack_archive(*data, dest);
        if (!unpacked) {
            report_error(global, unpacked.error());
            return k_exit_failed;
        }
        for (const auto& s : unpacked->skipped) {
            std::cerr << "warning: skipped " << printable(s) << '\n';
        }
        const auto& files = unpacked->written;
        if (global.json) {
            std::cout << nlohmann::json{{"dir", dest.string()}, {"files", files}}.dump() << '\n';
        } else {
            std::cout << "unpacked " << files.size() << (files.size() == 1 ? " file" : " files") << " into "
                      << dest.string() << "/\n";
            for (const auto& f : files) {
                std::cout << "  " << printable(f) << '\n';
            }
        }
        return k_exit_ok;
    }
    auto path = std::filesystem::path(o.dir) / ("job-" + std::to_string(o.job) + "-outputs.tar");
    std::ofstream out(path, std::ios::binary);
    out << *data;
    if (!out) {
        report_error(global, make_error(ErrorCode::io, "cannot write " + path.string()));
        return k_exit_failed;
    }
    std::cout << (global.json ? nlohmann::json{{"path", path.string()}, {"bytes", data->size()}}.dump()
                              : "wrote " + path.string() + " (" + std::to_string(data->size()) + " bytes)")
              << '\n';
    return k_exit_ok;
}

void register_fetch(Cli& cli) {
    auto o = std::make_shared<FetchOptions>();
    CLI::App* sub = add_command(cli, "fetch", "Download a finished job's outputs into DIR/job-N/");
    sub->add_option("job", o->job, "Job id")->required();
    sub->add_option("dir", o->dir, "Where to put it: DIR/job-N/ (or DIR/job-N-outputs.tar with --tar)")
        ->capture_default_str();
    sub->add_flag("--tar", o->tar, "Keep the archive as it came instead of unpacking it");
    sub->callback([&cli, o] { cli.exit_code = run_fetch(cli.global, *o); });
}

} // namespace gpupool::cmd
