#include "cmd/cli.hpp"

namespace gpupool::cmd {

void register_credits(Cli& cli) {
    register_pending(cli, "credits", "Show your team's credit balance, escrow and recent movements", "issue #6 (credits)");
}

} // namespace gpupool::cmd
