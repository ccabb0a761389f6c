#include "cmd/cli.hpp"

namespace gpupool::cmd {

void register_sim(Cli& cli) {
    register_pending(cli, "sim", "Replay a cluster trace through the scheduler and report allocation and fragmentation", "issue #5 (scheduler)");
}

} // namespace gpupool::cmd
