#include "cmd/cli.hpp"

namespace gpupool::cmd {

void register_jobs(Cli& cli) {
    register_pending(cli, "jobs", "List your team's jobs", "issue #3 (coordinator)");
}

} // namespace gpupool::cmd
