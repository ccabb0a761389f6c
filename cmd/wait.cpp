#include "cmd/cli.hpp"

namespace gpupool::cmd {

void register_wait(Cli& cli) {
    register_pending(cli, "wait", "Wait until jobs finish; exit non-zero if any failed", "issue #3 (coordinator)");
}

} // namespace gpupool::cmd
