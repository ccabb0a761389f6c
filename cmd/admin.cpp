#include "cmd/cli.hpp"

namespace gpupool::cmd {

void register_admin(Cli& cli) {
    register_pending(cli, "admin", "Administer the pool: teams, tokens, workers, grants", "issue #3 (coordinator)");
}

} // namespace gpupool::cmd
