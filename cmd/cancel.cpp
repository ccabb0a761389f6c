#include "cmd/cli.hpp"

namespace gpupool::cmd {

void register_cancel(Cli& cli) {
    register_pending(cli, "cancel", "Cancel a job or a whole sweep", "issue #3 (coordinator)");
}

} // namespace gpupool::cmd
