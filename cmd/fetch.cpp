#include "cmd/cli_app.hpp"
#include "cmd/remote.hpp"

#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>

namespace gpupool::cmd {

struct FetchOptions {
    std::int64_t job = 0;
    std::string dir = ".";
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
    CLI::App* sub = add_command(cli, "fetch", "Download a finished job's outputs (the archive its worker uploaded)");
    sub->add_option("job", o->job, "Job id")->required();
    sub->add_option("dir", o->dir, "Where to put it")->capture_default_str();
    sub->callback([&cli, o] { cli.exit_code = run_fetch(cli.global, *o); });
}

} // namespace gpupool::cmd
