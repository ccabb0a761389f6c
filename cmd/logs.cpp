#include "cmd/cli.hpp"

namespace gpupool::cmd {

void register_logs(Cli& cli) {
    register_pending(cli, "logs", "Print (or follow with -f) a job's logs", "issue #3 (coordinator)");
}

} // namespace gpupool::cmd
