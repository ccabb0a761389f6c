#include "cmd/cli.hpp"

namespace gpupool::cmd {

void register_status(Cli& cli) {
    register_pending(cli, "status", "Show a job's state, attempts and why it is waiting", "issue #3 (coordinator)");
}

} // namespace gpupool::cmd
