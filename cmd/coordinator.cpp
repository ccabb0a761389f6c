#include "cmd/cli.hpp"

namespace gpupool::cmd {

void register_coordinator(Cli& cli) {
    register_pending(cli, "coordinator", "Run the pool's coordinator: HTTP API, scheduler, SQLite store, credit ledger", "issue #3 (coordinator)");
}

} // namespace gpupool::cmd
