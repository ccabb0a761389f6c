#include "cmd/cli_app.hpp"
#include "cmd/remote.hpp"

#include <iostream>
#include <memory>

namespace gpupool::cmd {

int run_wait(const GlobalOptions& global, const std::vector<std::int64_t>& ids) {
    auto api = connect(global);
    if (!api) {
        return k_exit_failed;
    }
    auto done = wait_for_jobs(global, *api, ids);
    if (!done) {
        return k_exit_failed;
    }
    const int failed = count_unsuccessful(*done);
    for (const auto& j : *done) {
        if (!global.json) {
            std::cout << "job " << j["id"] << ": " << printable(j["state"]) << '\n';
        }
    }
    if (global.json) {
        std::cout << nlohmann::json(*done).dump(2) << '\n';
    }
    return failed == 0 ? k_exit_ok : k_exit_failed;
}

void register_wait(Cli& cli) {
    auto ids = std::make_shared<std::vector<std::int64_t>>();
    CLI::App* sub = add_command(cli, "wait", "Wait until jobs finish; exit 1 if any did not succeed");
    sub->add_option("jobs", *ids, "Job ids")->required();
    sub->callback([&cli, ids] { cli.exit_code = run_wait(cli.global, *ids); });
}

} // namespace gpupool::cmd
