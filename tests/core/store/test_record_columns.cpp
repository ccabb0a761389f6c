// The records' column descriptions (core/store/record_columns.hpp): the statements both engines build
// from them, and a row put and read back through them in memory. The descriptions against the
// engines' live tables, and random records through both engines, are in contract/.
#include "core/store/record_columns.hpp"

#include <catch2/catch.hpp>

#include <map>
#include <set>
#include <variant>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_record_columns {

using namespace gpupool;
using namespace gpupool::store;

namespace {

// One row held in memory: what a sink is given, and what a source reads back.
using Cell = std::variant<std::monostate, std::int64_t, std::string>;

class MemoryRow final : public columns::ValueSink, public columns::ValueSource {
public:
    void integer(int index, std::int64_t v) override { set(index, v); }
    void null(int index) override { set(index, std::monostate{}); }
    void text(int index, const std::string& v) override { set(index, v); }
    std::int64_t integer(int index) const override {
        const auto* v = std::get_if<std::int64_t>(&m_cells.at(static_cast<std::size_t>(index)));
        return v != nullptr ? *v : 0;
    }
    std::optional<std::int64_t> optional_integer(int index) const override {
        const auto* v = std::get_if<std::int64_t>(&m_cells.at(static_cast<std::size_t>(index)));
        return v != nullptr ? std::optional<std::int64_t>(*v) : std::nullopt;
    }
    std::string text(int index) const override {
        const auto* v = std::get_if<std::string>(&m_cells.at(static_cast<std::size_t>(index)));
        return v != nullptr ? *v : std::string();
    }
    std::vector<Cell> m_cells;

private:
    void set(int index, Cell v) {
        REQUIRE(index == static_cast<int>(m_cells.size())); // written in order, each once
        m_cells.push_back(std::move(v));
    }
};

template <class R>
R round_trip(const R& r) {
    const auto& t = columns::table<R>();
    MemoryRow row;
    columns::write_row(t, r, row);
    R back{};
    auto st = columns::read_row(t, 1, row, back);
    INFO((st ? std::string() : st.error().message));
    REQUIRE(st);
    return back;
}

} // namespace

TEST_CASE("record columns: the statements of an upserted, a written-once and an appended table",
          "[store][record_columns]") {
    const auto teams = columns::info(columns::table<TeamRecord>());
    CHECK(columns::insert_sql(teams, columns::Placeholders::question_marks) ==
          "INSERT INTO teams (id, name, weight, created_at, budget_day_micro, budget_week_micro) "
          "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET name = excluded.name, weight = excluded.weight, "
          "budget_day_micro = excluded.budget_day_micro, budget_week_micro = excluded.budget_week_micro");
    CHECK(columns::select_sql(teams) ==
          "SELECT id, name, weight, created_at, budget_day_micro, budget_week_micro FROM teams ORDER BY id");

    const auto sweeps = columns::info(columns::table<SweepRecord>());
    CHECK(columns::insert_sql(sweeps, columns::Placeholders::numbered) ==
          "INSERT INTO sweeps (id, team_id, submitter_token_id, source, job_count, max_parallel, created_at, "
          "idempotency_key) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (id) DO NOTHING");

    const auto ledger = columns::info(columns::table<LedgerEntry>());
    CHECK(columns::insert_sql(ledger, columns::Placeholders::numbered) ==
          "INSERT INTO ledger_entries (id, at, debit, credit, amount, reason, attempt_id, grant_id, payer_team_id, "
          "note) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)");

    // The audit log's id is the database's: selected, never written.
    const auto audit = columns::info(columns::table<AuditRecord>());
    CHECK(columns::insert_sql(audit, columns::Placeholders::question_marks) ==
          "INSERT INTO audit_log (at, token_id, action, target, detail) VALUES (?, ?, ?, ?, ?)");
    CHECK(columns::column_list(audit) == "id, at, token_id, action, target, detail");
}

TEST_CASE("record columns: a text key is ordered with the engine's collation, a number without",
          "[store][record_columns]") {
    const auto balances = columns::info(columns::table<BalanceRecord>());
    CHECK(columns::select_sql(balances, " COLLATE \"C\"") ==
          "SELECT account, balance FROM account_balances ORDER BY account COLLATE \"C\"");
    CHECK(columns::select_sql(balances) == "SELECT account, balance FROM account_balances ORDER BY account");
    CHECK(columns::select_sql(columns::info(columns::table<JobRecord>()), " COLLATE \"C\"").ends_with("ORDER BY id"));
}

TEST_CASE("record columns: every table has its key or is appended, and names each column once",
          "[store][record_columns]") {
    const auto tables = columns::all_tables();
    CHECK(tables.size() == 12);
    std::set<std::string> names;
    for (const auto& t : tables) {
        INFO(t.name);
        CHECK(names.insert(t.name).second);
        std::set<std::string> seen;
        int keys = 0;
        int updated = 0;
        for (const auto& c : t.columns) {
            CHECK(seen.insert(c.name).second);
            keys += c.role == columns::OnUpdate::key ? 1 : 0;
            updated += c.role == columns::OnUpdate::updated ? 1 : 0;
        }
        // An upsert needs a key (one column, or two: an attempt's evidence by attempt and kind) and
        // something to update; an append has no key to conflict on.
        CHECK((t.write == columns::Write::insert || keys == (t.name == std::string("attempt_evidence") ? 2 : 1)));
        CHECK((t.write == columns::Write::upsert) == (updated > 0));
        if (t.order_by != nullptr) {
            CHECK(seen.count(t.order_by) == 1);
        }
    }
}

TEST_CASE("record columns: optional fields are NULL when unset, ledger references of 0 too",
          "[store][record_columns]") {
    TokenRecord t{TokenId(4), "h", Role::enroll, TeamId(2), std::nullopt, "ada", 7, std::nullopt, 3};
    MemoryRow row;
    columns::write_row(columns::table<TokenRecord>(), t, row);
    REQUIRE(row.m_cells.size() == 11);
    CHECK(row.m_cells[2] == Cell(std::string("enroll")));
    CHECK(row.m_cells[3] == Cell(std::int64_t{2}));
    CHECK(std::holds_alternative<std::monostate>(row.m_cells[4])); // worker_id
    CHECK(std::holds_alternative<std::monostate>(row.m_cells[7])); // revoked_at
    CHECK(row.m_cells[8] == Cell(std::int64_t{3}));
    CHECK(round_trip(t) == t);

    LedgerEntry e;
    e.id = 9;
    e.debit = credits::Account::escrow();
    e.credit = credits::Account::of_team(3);
    e.amount = 5;
    e.reason = credits::EntryReason::release;
    e.attempt = 12;
    e.payer = 3;
    MemoryRow entry;
    columns::write_row(columns::table<LedgerEntry>(), e, entry);
    CHECK(entry.m_cells[2] == Cell(std::string("escrow")));
    CHECK(entry.m_cells[3] == Cell(std::string("team:3")));
    CHECK(entry.m_cells[6] == Cell(std::int64_t{12}));
    CHECK(std::holds_alternative<std::monostate>(entry.m_cells[7])); // grant_id: none
    CHECK(round_trip(e) == e);
}

TEST_CASE("record columns: every kind of record comes back whole from its row", "[store][record_columns]") {
    recipe::JobSpec spec;
    spec.name = "eval";
    spec.image = "busybox";
    spec.command = {"sh", "-c", "echo 'hi'"};
    spec.params = {{"lr", "0.1"}};
    JobRecord j{JobId(3), SweepId(2), TeamId(1), spec, JobState::failed, 2, 10, 20, 30, -1, "exited 1", 1, "k"};
    CHECK(round_trip(j) == j);
    AttemptRecord a{AttemptId(5), JobId(3), WorkerId(2), -1, 0, AttemptState::preempted, 40, 41, 42, 43,
                    std::nullopt, "owner",  1'500'000,   44, 1};
    CHECK(round_trip(a) == a);
    WorkerRecord w{WorkerId(2), TeamId(1), "box", "{}", WorkerState::draining, 1, 2, TokenId(7)};
    CHECK(round_trip(w) == w);
    BalanceRecord b{credits::Account::settling_of(4), -12};
    CHECK(round_trip(b) == b);
    AuditRecord u{8, 100, TokenId(1), "team.create", "team `a`", R"({"x":1})"};
    // Its id is the database's: not written, read first.
    MemoryRow written;
    columns::write_row(columns::table<AuditRecord>(), u, written);
    REQUIRE(written.m_cells.size() == 5);
    MemoryRow selected;
    selected.m_cells.push_back(std::int64_t{8});
    selected.m_cells.insert(selected.m_cells.end(), written.m_cells.begin(), written.m_cells.end());
    AuditRecord back{};
    REQUIRE(columns::read_row(columns::table<AuditRecord>(), 1, selected, back));
    CHECK(back == u);
    Sample x{1, 2, 3, 4, 5, 6, 7};
    CHECK(round_trip(x) == x);
}

TEST_CASE("record columns: an unknown state falls back as ever, an unknown account is an error naming the row",
          "[store][record_columns]") {
    MemoryRow worker;
    columns::write_row(columns::table<WorkerRecord>(),
                       WorkerRecord{WorkerId(1), TeamId(1), "w", "{}", WorkerState::active, 1, 2, std::nullopt},
                       worker);
    worker.m_cells[4] = std::string("retired");
    WorkerRecord w{};
    REQUIRE(columns::read_row(columns::table<WorkerRecord>(), 1, worker, w));
    CHECK(w.state == WorkerState::active);

    MemoryRow balance;
    columns::write_row(columns::table<BalanceRecord>(), BalanceRecord{credits::Account::issuer(), 1}, balance);
    balance.m_cells[0] = std::string("treasury");
    BalanceRecord b{};
    auto st = columns::read_row(columns::table<BalanceRecord>(), 3, balance, b);
    REQUIRE_FALSE(st);
    CHECK(st.error().code == ErrorCode::io);
    CHECK(st.error().message == "table account_balances, row 3, column account: unknown value `treasury`");
}

} // namespace test_record_columns
} // namespace
