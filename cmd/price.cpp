#include "cmd/cli.hpp"

namespace gpupool::cmd {

void register_price(Cli& cli) {
    register_pending(cli, "price", "Estimate a recipe's cost in credits and at cloud prices", "issue #6 (credits)");
}

} // namespace gpupool::cmd
