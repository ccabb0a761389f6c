#include "cmd/cli.hpp"

namespace gpupool::cmd {

void register_fetch(Cli& cli) {
    register_pending(cli, "fetch", "Download a finished job's outputs", "issue #3 (coordinator)");
}

} // namespace gpupool::cmd
