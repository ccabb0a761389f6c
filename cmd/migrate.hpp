// `gpupool admin migrate --from SPEC --to SPEC`: copies a whole pool from one store to another (SQLite
// to PostgreSQL when a pool outgrows one machine, or back), verified before it reports success
// (store::copy_pool). It opens both stores itself, so it runs where the databases are, with no
// coordinator serving either: the source's coordinator is stopped (SQLite's lock, PostgreSQL's lease
// say so otherwise) and the target is empty.
#pragma once

#include "cmd/cli.hpp"

#include <string>

namespace CLI {
class App;
}

namespace gpupool::cmd {

struct MigrateOptions {
    std::string from;
    std::string to;
    std::string from_password_file; // PostgreSQL passwords, one line each (never on the command line)
    std::string to_password_file;
};

int run_migrate(const GlobalOptions& global, const MigrateOptions& o);

// `admin migrate` under `admin`.
void register_admin_migrate(Cli& cli, CLI::App* admin);

} // namespace gpupool::cmd
