// SqliteStore's rows: every record kind read and written through its description (record_columns.hpp),
// with SQLite's own part here: `?` placeholders, and how a value of each kind is bound and read.
#include "core/store/sqlite_internal.hpp"

#include <SQLiteCpp/SQLiteCpp.h>

namespace gpupool::store::sqlite {

namespace {

class Binder final : public columns::ValueSink {
public:
    explicit Binder(SQLite::Statement& q) : m_q(q) {}
    void integer(int index, std::int64_t v) override { m_q.bind(index + 1, v); }
    void null(int index) override { m_q.bind(index + 1); }
    void text(int index, const std::string& v) override { m_q.bind(index + 1, v); }

private:
    SQLite::Statement& m_q;
};

// Each table's statements, built once from its description.
template <class R>
const std::string& insert_sql(const columns::Table<R>& t) {
    static const std::string sql = columns::insert_sql(columns::info(t), columns::Placeholders::question_marks);
    return sql;
}

template <class R>
const std::string& select_sql(const columns::Table<R>& t) {
    static const std::string sql = columns::select_sql(columns::info(t));
    return sql;
}

template <class R>
Status load_table(SQLite::Database& db, const columns::Table<R>& t, std::vector<R>& out) {
    SQLite::Statement q(db, select_sql(t));
    auto rows = read_rows(q, t);
    if (!rows) {
        return rows.error();
    }
    out = std::move(*rows);
    return {};
}

// One statement per table and call, bound and run once per record.
template <class R>
void write_table(SQLite::Database& db, const columns::Table<R>& t, const std::vector<R>& records) {
    if (records.empty()) {
        return;
    }
    SQLite::Statement q(db, insert_sql(t));
    Binder out(q);
    for (const R& r : records) {
        columns::write_row(t, r, out);
        q.exec();
        q.reset();
    }
}

} // namespace

Result<Snapshot> load_records(SQLite::Database& db) {
    Snapshot s;
    Status st;
    columns::for_each_table([&](const auto& t) {
        if (st && t.order_by != nullptr) {
            st = load_table(db, t, s.*t.records);
        }
    });
    if (!st) {
        return st.error();
    }
    return s;
}

void write_records(SQLite::Database& db, const Changes& c) {
    columns::for_each_table([&](const auto& t) { write_table(db, t, c.*t.records); });
}

} // namespace gpupool::store::sqlite
