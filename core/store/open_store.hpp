// open_store: the one place that turns the coordinator's --db into a Store, so that the service and
// the tools are handed a store and never name an engine.
//
// Specs: a file path (`pool.db`, `/var/lib/gpupool/pool.db`) or `sqlite:PATH` is the embedded SQLite
// store; `postgresql://...` (or `postgres://`) is the planned PostgreSQL store, refused for now with
// ErrorCode::not_implemented; any other `SCHEME://...` is refused naming the scheme. A path that
// merely contains a colon (`pool:1.db`) is a path.
//
// The store is opened exclusively: SQLite holds `<path>.lock` for as long as the store is open (a
// second coordinator, or an admin-token recovery while one runs, is a conflict that says so).
#pragma once

#include "core/store/store.hpp"

#include <memory>
#include <string>
#include <string_view>

namespace gpupool::store {

enum class Engine : std::uint8_t { sqlite, postgresql };

struct StoreSpec {
    Engine engine = Engine::sqlite;
    std::string location; // SQLite: the file's path; PostgreSQL: the connection URL
};

// Parses a --db value. Errors are invalid_input (or not_implemented) with the field "--db".
Result<StoreSpec> parse_store_spec(std::string_view spec);

struct OpenOptions {
    bool create = true; // false: a store that does not exist yet is not_found
};

Result<std::unique_ptr<Store>> open_store(const StoreSpec& spec, const OpenOptions& options = {});
Result<std::unique_ptr<Store>> open_store(std::string_view spec, const OpenOptions& options = {});

// Checks a file Store::backup wrote (`gpupool admin backup`): a pool database whose pages all check
// out (SQLite's integrity_check) and whose schema this gpupool can read. Returns its schema version.
// ErrorCode::invalid_input names what is wrong; the file is only read.
Result<int> check_backup_file(const std::filesystem::path& file);

} // namespace gpupool::store
