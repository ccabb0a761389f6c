#include "cmd/version.hpp"

#include "cmd/cli_app.hpp"

#include <nlohmann/json.hpp>

#include <iostream>

namespace gpupool::cmd {

int run_version(const VersionOptions& options) {
    if (options.global.json) {
        std::cout << nlohmann::json{{"version", GPUPOOL_VERSION}, {"recipe_format", 1}}.dump() << '\n';
    } else {
        std::cout << "gpupool " << GPUPOOL_VERSION << " (recipe format 1)\n";
    }
    return k_exit_ok;
}

void register_version(Cli& cli) {
    CLI::App* sub = add_command(cli, "version", "Print the version");
    add_help_footer(sub, "gpupool version", "README.md", Reach::local);
    sub->callback([&cli] { cli.exit_code = run_version(VersionOptions{cli.global}); });
}

} // namespace gpupool::cmd
