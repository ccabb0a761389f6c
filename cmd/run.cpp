#include "cmd/cli.hpp"

namespace gpupool::cmd {

void register_run(Cli& cli) {
    register_pending(cli, "run", "Run a recipe locally: in-process coordinator + worker, logs and outputs here", "issue #4 (worker, local mode)");
}

} // namespace gpupool::cmd
