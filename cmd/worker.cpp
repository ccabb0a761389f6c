#include "cmd/cli.hpp"

namespace gpupool::cmd {

void register_worker(Cli& cli) {
    register_pending(cli, "worker", "Share this machine's GPU with the pool (outbound connections only)", "issue #4 (worker)");
}

} // namespace gpupool::cmd
