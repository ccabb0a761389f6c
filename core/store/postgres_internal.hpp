// The pieces PostgresStore's files share (postgres_store.cpp, postgres_schema.cpp,
// postgres_records.cpp): a connection that runs parameterised statements, a transaction guard and
// typed access to result rows. Not part of the Store interface, included by nothing outside
// core/store/postgres_*.cpp. Functions here throw pg::Failure (never anything else on purpose); the
// PostgresStore method that calls them catches it and returns its Error.
#pragma once

#include "core/store/postgres_store.hpp"
#include "core/store/record_columns.hpp"

#include <cstdint>
#include <libpq-fe.h>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace gpupool::store::pg {

// A failed statement (ErrorCode::io), a fenced write (conflict, field "lease") or a missing pool
// (not_found) on its way to the method that returns it.
class Failure : public std::runtime_error {
public:
    explicit Failure(Error error) : std::runtime_error(error.message), m_error(std::move(error)) {}
    const Error& error() const noexcept { return m_error; }

private:
    Error m_error;
};

// The SQLSTATE gpupool_fence raises: the database refused a write of a coordinator without the lease.
inline constexpr const char* k_fenced_sqlstate = "GP001";

struct ResultDeleter {
    void operator()(PGresult* r) const noexcept { PQclear(r); }
};
using Rows = std::unique_ptr<PGresult, ResultDeleter>;

// A statement's parameters, in order ($1, $2, ...): numbers and text go as text, bytes as binary
// (bytea), nullopt as NULL. Values are copied in.
class Params {
public:
    Params& add(std::int64_t v);
    Params& add(std::string_view text);
    Params& add(const std::optional<std::int64_t>& v);
    Params& add_bytes(std::string_view bytes);
    Params& add_null();

    int size() const { return static_cast<int>(m_values.size()); }
    bool empty() const { return m_values.empty(); }
    std::vector<const char*> pointers() const;
    const int* lengths() const { return m_lengths.data(); }
    const int* formats() const { return m_formats.data(); }

private:
    std::vector<std::string> m_values;
    std::vector<bool> m_null;
    std::vector<int> m_lengths;
    std::vector<int> m_formats;
};

template <class... T>
Params params(const T&... values) {
    Params p;
    (p.add(values), ...);
    return p;
}

// One row of a result: columns by index. Text results parse numbers; binary results (`binary` in
// Connection::exec) give bytea columns as their bytes and BIGINT columns as 8 big-endian bytes.
class Row {
public:
    Row(const PGresult* result, int row) : m_result(result), m_row(row) {}
    bool is_null(int col) const { return PQgetisnull(m_result, m_row, col) != 0; }
    std::int64_t integer(int col) const;
    std::optional<std::int64_t> opt_integer(int col) const;
    std::string text(int col) const;
    std::string_view bytes(int col) const;
    std::int64_t binary_integer(int col) const;

private:
    const PGresult* m_result;
    int m_row;
};

// Row as columns::read_row reads it (a text result).
class RowReader final : public columns::ValueSource {
public:
    explicit RowReader(const Row& row) : m_row(row) {}
    std::int64_t integer(int index) const override { return m_row.integer(index); }
    std::optional<std::int64_t> optional_integer(int index) const override { return m_row.opt_integer(index); }
    std::string text(int index) const override { return m_row.text(index); }

private:
    const Row& m_row;
};

// A row's values as the parameters of the INSERT columns::insert_sql built (they come in order).
class ParamsBinder final : public columns::ValueSink {
public:
    explicit ParamsBinder(Params& p) : m_p(p) {}
    void integer(int /*index*/, std::int64_t v) override { m_p.add(v); }
    void null(int /*index*/) override { m_p.add_null(); }
    void text(int /*index*/, const std::string& v) override { m_p.add(std::string_view(v)); }

private:
    Params& m_p;
};

inline int row_count(const Rows& r) {
    return PQntuples(r.get());
}
// Rows changed by an INSERT, UPDATE or DELETE.
std::int64_t affected(const Rows& r);

// One libpq connection. Statements that fail throw Failure: io with the server's message, or the
// fenced conflict. A statement that finds the connection broken before anything of this call's
// transaction ran on it (it was idle, or already broken) resets the connection once and runs again.
class Connection {
public:
    // Connects; the error names the server (host, port, database) and never the password.
    static Result<std::unique_ptr<Connection>> connect(const std::string& url, const std::string& password);
    ~Connection();
    Connection(const Connection&) = delete;
    Connection& operator=(const Connection&) = delete;

    // `sql` is one statement when there are parameters or a binary result; without, it may be several.
    Rows exec(const char* sql, const Params& p = {}, bool binary = false);
    // A snapshot's connection is never reset: the moment it reads at would be lost.
    void forbid_reset() { m_may_reset = false; }
    // Ends an open transaction quietly (a guard's destructor): never throws, never resets.
    void rollback_quietly() noexcept;
    // "host:port/database", for messages.
    std::string describe() const;

private:
    explicit Connection(PGconn* conn) : m_conn(conn) {}
    Rows run(const char* sql, const Params& p, bool binary);
    [[noreturn]] void fail(const PGresult* r) const;

    PGconn* m_conn;
    bool m_may_reset = true;
};

// One transaction: BEGIN (or `begin`) now, ROLLBACK when it goes out of scope uncommitted.
class Transaction {
public:
    explicit Transaction(Connection& db, const char* begin = "BEGIN");
    ~Transaction();
    Transaction(const Transaction&) = delete;
    Transaction& operator=(const Transaction&) = delete;
    void commit();

private:
    Connection& m_db;
    bool m_open = true;
};

// Refuses (throws the fenced Failure) unless a writer at `epoch` may write now; holds the lease row
// FOR SHARE until the caller's transaction ends. Epoch 0: a store without the lease.
void fence(Connection& db, std::int64_t epoch);

int schema_version(Connection& db);
// Takes the database forward to k_postgres_schema_version (creating the pool when `create`); refuses
// a newer one. Its own transaction, under an advisory lock.
void migrate(Connection& db, bool create);

// Every row of `r` (a query that selected `t`'s columns::column_list), read; a value the record cannot
// hold throws the io Failure.
template <class R>
std::vector<R> read_rows(const Rows& r, const columns::Table<R>& t) {
    std::vector<R> out;
    out.reserve(static_cast<std::size_t>(row_count(r)));
    for (int i = 0; i < row_count(r); ++i) {
        const Row row(r.get(), i);
        const RowReader in(row);
        R record{};
        if (auto st = columns::read_row(t, i + 1, in, record); !st) {
            throw Failure(st.error());
        }
        out.push_back(std::move(record));
    }
    return out;
}

// Every record, each kind in id order, read inside the caller's transaction.
Snapshot load_records(Connection& db);
// Upserts the changes (ledger entries are inserted) inside the caller's transaction.
void write_records(Connection& db, const Changes& c);

} // namespace gpupool::store::pg
