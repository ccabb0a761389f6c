// PostgreSQL's rows: every record kind read and written through its description (record_columns.hpp),
// with PostgreSQL's own part here: `$n` placeholders, text parameters and results, and balances ordered
// byte by byte (COLLATE "C", the order SQLite sorts them in).
#include "core/store/postgres_internal.hpp"

namespace gpupool::store::pg {

namespace {

// Each table's statements, built once from its description.
template <class R>
const std::string& insert_sql(const columns::Table<R>& t) {
    static const std::string sql = columns::insert_sql(columns::info(t), columns::Placeholders::numbered);
    return sql;
}

template <class R>
const std::string& select_sql(const columns::Table<R>& t) {
    static const std::string sql = columns::select_sql(columns::info(t), " COLLATE \"C\"");
    return sql;
}

// One statement per record (as libpq runs them: each is sent with its parameters).
template <class R>
void write_table(Connection& db, const columns::Table<R>& t, const std::vector<R>& records) {
    for (const R& r : records) {
        Params p;
        ParamsBinder out(p);
        columns::write_row(t, r, out);
        db.exec(insert_sql(t).c_str(), p);
    }
}

} // namespace

Snapshot load_records(Connection& db) {
    Snapshot s;
    columns::for_each_table([&](const auto& t) {
        if (t.order_by != nullptr) {
            s.*t.records = read_rows(db.exec(select_sql(t).c_str()), t);
        }
    });
    return s;
}

void write_records(Connection& db, const Changes& c) {
    columns::for_each_table([&](const auto& t) { write_table(db, t, c.*t.records); });
}

} // namespace gpupool::store::pg
