// The columns of each record kind, described once for every engine: for each table, its columns in
// order, what kind of value each holds, how to read the field from a record and set it when loading,
// and what a write does to it when the row exists already. SqliteStore and PostgresStore both build
// their statements (INSERT ... ON CONFLICT, SELECT ... ORDER BY) from these descriptions and move
// values through them; each engine keeps only how it binds and reads a value of each kind and its SQL
// dialect (placeholders, collation). Adding a field to a record is one line here (plus the schemas'
// migrations); tests/core/store/contract/ checks every description against both engines' live tables.
//
// The descriptions are constants, safe to read from any thread. Reading a value that the record
// cannot hold (an account or entry reason that does not exist, a job spec that does not parse) is an
// Error (ErrorCode::io) naming the table, the row and the column; a spec that is not JSON at all
// throws nlohmann's exception, which the engine's store method catches like any database failure.
#pragma once

#include "core/store/store.hpp"

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace gpupool::store::columns {

// What a column holds. Integers are 64-bit (BIGINT, SQLite's INTEGER); text is TEXT in both engines.
enum class Kind : std::uint8_t {
    integer,          // a number or a typed id, never NULL
    optional_integer, // NULL when the field is unset (std::optional, or a ledger reference of 0)
    text,             // a string, never NULL
    enum_text,        // an enumeration (or account) by its name
    json_text,        // a value serialised as JSON text (a job's spec)
};
bool is_integer(Kind k);
bool is_nullable(Kind k);
const char* kind_name(Kind k);

// What a write does to a column of a row that exists already.
enum class OnUpdate : std::uint8_t {
    key,       // the row's identity: the conflict target of an upsert
    kept,      // written when the row is inserted, never changed after
    updated,   // replaced by every write of the record
    generated, // numbered by the database when the row is appended; read back, never written
};

// How a table's rows are written.
enum class Write : std::uint8_t {
    upsert,      // INSERT ... ON CONFLICT (key) DO UPDATE SET each `updated` column
    insert_once, // INSERT ... ON CONFLICT (key) DO NOTHING: a record written again changes nothing
    insert,      // plain INSERT: a row whose key exists fails the write (ledger entries), or appended
};

// Where an engine puts the values of one row it writes, column by column (`index` counts from 0 over
// the written columns).
class ValueSink {
public:
    virtual void integer(int index, std::int64_t v) = 0;
    virtual void null(int index) = 0;
    virtual void text(int index, const std::string& v) = 0;

protected:
    ~ValueSink() = default;
};

// Where an engine reads one row of a SELECT the descriptions built (`index` counts from 0 over every
// column of the table). An integer column's NULL reads as 0, a text column's as "".
class ValueSource {
public:
    virtual std::int64_t integer(int index) const = 0;
    virtual std::optional<std::int64_t> optional_integer(int index) const = 0;
    virtual std::string text(int index) const = 0;

protected:
    ~ValueSource() = default;
};

struct ColumnInfo {
    const char* name;
    Kind kind;
    OnUpdate role;
};

template <class R>
struct Column {
    ColumnInfo info;
    void (*put)(const R& record, int index, ValueSink& out);
    Status (*take)(R& record, int index, const ValueSource& in);
};

template <class R>
struct Table {
    const char* name;
    std::span<const Column<R>> columns;
    Write write;
    // The column load() returns the rows in order of; nullptr: never loaded whole (the audit log and
    // the samples, read a page at a time by the store's own queries).
    const char* order_by;
    std::vector<R> Records::*records; // where a Records holds this kind
};

// A table without its record type: for building statements and for the schema checks.
struct TableInfo {
    const char* name = "";
    std::vector<ColumnInfo> columns;
    Write write = Write::insert;
    const char* order_by = nullptr;
};

template <class R>
TableInfo info(const Table<R>& t) {
    TableInfo out{t.name, {}, t.write, t.order_by};
    for (const Column<R>& c : t.columns) {
        out.columns.push_back(c.info);
    }
    return out;
}

// The description of each kind's table (explicitly specialised in record_columns.cpp for the records
// of store.hpp's Records, plus nothing else).
template <class R>
const Table<R>& table();
template <>
const Table<TeamRecord>& table<TeamRecord>();
template <>
const Table<TokenRecord>& table<TokenRecord>();
template <>
const Table<WorkerRecord>& table<WorkerRecord>();
template <>
const Table<SweepRecord>& table<SweepRecord>();
template <>
const Table<JobRecord>& table<JobRecord>();
template <>
const Table<AttemptRecord>& table<AttemptRecord>();
template <>
const Table<LedgerEntry>& table<LedgerEntry>();
template <>
const Table<BalanceRecord>& table<BalanceRecord>();
template <>
const Table<GrantRecord>& table<GrantRecord>();
template <>
const Table<AuditRecord>& table<AuditRecord>();
template <>
const Table<Sample>& table<Sample>();
template <>
const Table<EvidenceRecord>& table<EvidenceRecord>();

// Calls f(table<R>()) for each table that Records holds, in the order writes must go for the foreign
// keys: teams, workers (worker tokens name them), tokens, sweeps, jobs, attempts, evidence, grants, the ledger,
// balances, the audit log, samples.
template <class F>
void for_each_table(F&& f) {
    f(table<TeamRecord>());
    f(table<WorkerRecord>());
    f(table<TokenRecord>());
    f(table<SweepRecord>());
    f(table<JobRecord>());
    f(table<AttemptRecord>());
    f(table<EvidenceRecord>());
    f(table<GrantRecord>());
    f(table<LedgerEntry>());
    f(table<BalanceRecord>());
    f(table<AuditRecord>());
    f(table<Sample>());
}

std::vector<TableInfo> all_tables();

// ---- statements ---------------------------------------------------------------------------------

enum class Placeholders : std::uint8_t {
    question_marks, // SQLite: ?, ?, ...
    numbered,       // PostgreSQL: $1, $2, ...
};

// "id, name, weight, ...": every column, in order (what read_row reads).
std::string column_list(const TableInfo& t);
// The INSERT of one row with the table's conflict rule; its parameters are the written columns in
// order (every column but the generated ones), as write_row puts them.
std::string insert_sql(const TableInfo& t, Placeholders p);
// SELECT of every column of every row, ordered by order_by (`text_collation`, e.g. ` COLLATE "C"`, is
// appended where that column holds text).
std::string select_sql(const TableInfo& t, std::string_view text_collation = {});

// Puts the written columns of `r` in order.
template <class R>
void write_row(const Table<R>& t, const R& r, ValueSink& out) {
    int index = 0;
    for (const Column<R>& c : t.columns) {
        if (c.info.role != OnUpdate::generated) {
            c.put(r, index++, out);
        }
    }
}

// Reads a row of select_sql (or of any query that selects column_list) into `r`; `row` (counting
// from 1) is for the message.
Error unreadable_row(const char* table, std::int64_t row, const char* column, const Error& why);
template <class R>
Status read_row(const Table<R>& t, std::int64_t row, const ValueSource& in, R& r) {
    int index = 0;
    for (const Column<R>& c : t.columns) {
        if (auto st = c.take(r, index++, in); !st) {
            return unreadable_row(t.name, row, c.info.name, st.error());
        }
    }
    return {};
}

} // namespace gpupool::store::columns
