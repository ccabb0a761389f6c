// The pieces SqliteStore's files share (sqlite_store.cpp, sqlite_schema.cpp, sqlite_records.cpp):
// not part of the Store interface, included by nothing outside core/store/sqlite_*.cpp.
// Functions that touch the database throw SQLiteCpp's exceptions unless they return a Status;
// the SqliteStore method that calls them catches and converts (db_error).
#pragma once

#include "core/store/sqlite_store.hpp"

#include <SQLiteCpp/Column.h>
#include <SQLiteCpp/Statement.h>

#include <cstdint>
#include <exception>
#include <optional>
#include <string>

namespace gpupool::store::sqlite {

Error db_error(const std::string& what, const std::exception& e);

int schema_version(SQLite::Database& db);
// Takes the file forward to k_schema_version; refuses a newer one.
Status migrate(SQLite::Database& db);

// Every record, each kind in id order.
Result<Snapshot> load_records(SQLite::Database& db);
// Upserts the changes (ledger entries are inserted) inside the caller's transaction.
void write_records(SQLite::Database& db, const Changes& c);

template <class T>
void bind_opt(SQLite::Statement& q, int index, const std::optional<T>& v) {
    if (v) {
        q.bind(index, static_cast<std::int64_t>(*v));
    } else {
        q.bind(index);
    }
}

inline std::optional<std::int64_t> opt_int(const SQLite::Column& c) {
    if (c.isNull()) {
        return std::nullopt;
    }
    return c.getInt64();
}

} // namespace gpupool::store::sqlite
