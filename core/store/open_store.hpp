// open_store: the one place that turns the coordinator's --db into a Store, so that the service and
// the tools are handed a store and never name an engine.
//
// Specs: a file path (`pool.db`, `/var/lib/gpupool/pool.db`) or `sqlite:PATH` is the embedded SQLite
// store; `postgresql://...` (or `postgres://`) is the PostgreSQL store (postgres_store.hpp), whose
// URL may not carry a password (command lines are visible to every user of the machine: the password
// comes from OpenOptions::password, PGPASSWORD, ~/.pgpass or a `passfile=` parameter); any other
// `SCHEME://...` is refused naming the scheme. A path that merely contains a colon (`pool:1.db`) is a
// path. A gpupool built without PostgreSQL (the static build) refuses its URLs as not_implemented.
//
// SQLite is opened exclusively: it holds `<path>.lock` for as long as the store is open (a second
// coordinator, or an admin-token recovery while one runs, is a conflict that says so). PostgreSQL is
// shared: several coordinators open it and take turns through its lease (Store::acquire_lease).
#pragma once

#include "core/store/store.hpp"
#include "core/store/wal_checkpointer.hpp"

#include <chrono>
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
    // SQLite: hold `<path>.lock` while open (lock_database); false where the caller holds it already or
    // the file is a private copy (a restore checking a backup). PostgreSQL has no such lock.
    bool lock = true;
    std::string password; // PostgreSQL: the password (e.g. read from --db-password-file); empty: libpq's own
    // SQLite: background checkpoints this long after a commit (SqliteOptions::checkpoint_delay); 0: none.
    std::chrono::milliseconds sqlite_checkpoint_delay = k_checkpoint_delay;
};

// Whether this gpupool was built with the PostgreSQL store.
bool postgres_available();

// `spec` fit for a log line: a PostgreSQL URL without any password in it.
std::string printable_spec(std::string_view spec);

Result<std::unique_ptr<Store>> open_store(const StoreSpec& spec, const OpenOptions& options = {});
Result<std::unique_ptr<Store>> open_store(std::string_view spec, const OpenOptions& options = {});

// Checks a file Store::backup wrote (`gpupool admin backup`): a pool database whose pages all check
// out (SQLite's integrity_check) and whose schema this gpupool can read. Returns its schema version.
// ErrorCode::invalid_input names what is wrong; the file is only read.
Result<int> check_backup_file(const std::filesystem::path& file);

} // namespace gpupool::store
