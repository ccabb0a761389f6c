// The pieces SqliteStore's files share (sqlite_store.cpp, sqlite_schema.cpp, sqlite_records.cpp):
// not part of the Store interface, included by nothing outside core/store/sqlite_*.cpp.
// Functions that touch the database throw SQLiteCpp's exceptions unless they return a Status;
// the SqliteStore method that calls them catches and converts (db_error).
#pragma once

#include "core/store/record_columns.hpp"
#include "core/store/sqlite_store.hpp"

#include <SQLiteCpp/Column.h>
#include <SQLiteCpp/Statement.h>

#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <vector>

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

// The current row of a statement that selects a table's columns::column_list, for columns::read_row.
class RowReader final : public columns::ValueSource {
public:
    explicit RowReader(const SQLite::Statement& q) : m_q(q) {}
    std::int64_t integer(int index) const override { return m_q.getColumn(index).getInt64(); }
    std::optional<std::int64_t> optional_integer(int index) const override {
        const SQLite::Column c = m_q.getColumn(index);
        return c.isNull() ? std::nullopt : std::optional<std::int64_t>(c.getInt64());
    }
    std::string text(int index) const override { return m_q.getColumn(index).getString(); }

private:
    const SQLite::Statement& m_q;
};

// Runs `q` (a query that selects `t`'s columns::column_list) and reads every row it returns; a value a
// record cannot hold is an io Error.
template <class R>
Result<std::vector<R>> read_rows(SQLite::Statement& q, const columns::Table<R>& t) {
    const RowReader in(q);
    std::vector<R> out;
    std::int64_t row = 0;
    while (q.executeStep()) {
        R r{};
        if (auto st = columns::read_row(t, ++row, in, r); !st) {
            return make_error(ErrorCode::io, "database: " + st.error().message);
        }
        out.push_back(std::move(r));
    }
    return out;
}

} // namespace gpupool::store::sqlite
