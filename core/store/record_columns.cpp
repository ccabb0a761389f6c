// The record kinds' columns (record_columns.hpp): one line per column, in the order the tables' SELECT
// and INSERT statements name them.
#include "core/store/record_columns.hpp"

#include "core/recipe/recipe_json.hpp"

#include <concepts>
#include <type_traits>

namespace gpupool::store::columns {

namespace {

// ---- how a field of each type goes to and comes from a column -----------------------------------

template <class M>
struct MemberOf;
template <class R, class T>
struct MemberOf<T R::*> {
    using Record = R;
    using Type = T;
};
template <auto M>
using RecordOf = typename MemberOf<decltype(M)>::Record;
template <auto M>
using TypeOf = typename MemberOf<decltype(M)>::Type;

template <class T>
concept TypedId = requires(const T& id) {
    { id.value() } -> std::same_as<std::int64_t>;
};

template <class T>
std::int64_t raw(const T& v) {
    if constexpr (TypedId<T>) {
        return v.value();
    } else {
        return v;
    }
}

template <class T>
T cooked(std::int64_t v) {
    return T(v);
}

template <class T>
struct IsOptional : std::false_type {};
template <class T>
struct IsOptional<std::optional<T>> : std::true_type {};

// A number or a typed id (`TeamId`); an optional one is NULL when unset.
template <auto M>
constexpr Column<RecordOf<M>> integer(const char* name, OnUpdate role) {
    using R = RecordOf<M>;
    using T = TypeOf<M>;
    if constexpr (IsOptional<T>::value) {
        using V = typename T::value_type;
        return {{name, Kind::optional_integer, role},
                [](const R& r, int i, ValueSink& out) {
                    if (const T& v = r.*M) {
                        out.integer(i, raw(*v));
                    } else {
                        out.null(i);
                    }
                },
                [](R& r, int i, const ValueSource& in) -> Status {
                    const auto v = in.optional_integer(i);
                    r.*M = v ? T(cooked<V>(*v)) : T();
                    return {};
                }};
    } else {
        return {{name, Kind::integer, role},
                [](const R& r, int i, ValueSink& out) { out.integer(i, raw(r.*M)); },
                [](R& r, int i, const ValueSource& in) -> Status {
                    r.*M = cooked<T>(in.integer(i));
                    return {};
                }};
    }
}

// A reference kept as a plain number with 0 for none (the ledger's attempt, grant and payer): NULL
// in the column.
template <auto M>
constexpr Column<RecordOf<M>> zero_as_null(const char* name, OnUpdate role) {
    using R = RecordOf<M>;
    return {{name, Kind::optional_integer, role},
            [](const R& r, int i, ValueSink& out) {
                if (r.*M != 0) {
                    out.integer(i, r.*M);
                } else {
                    out.null(i);
                }
            },
            [](R& r, int i, const ValueSource& in) -> Status {
                r.*M = in.optional_integer(i).value_or(0);
                return {};
            }};
}

template <auto M>
constexpr Column<RecordOf<M>> text(const char* name, OnUpdate role) {
    using R = RecordOf<M>;
    return {{name, Kind::text, role},
            [](const R& r, int i, ValueSink& out) { out.text(i, r.*M); },
            [](R& r, int i, const ValueSource& in) -> Status {
                r.*M = in.text(i);
                return {};
            }};
}

// An enumeration by its name (to_string and `parse`). A name it does not know reads as `fallback`
// when one is given (the states and roles, as ever), else it is an error (the ledger's accounts and
// reasons: money is never guessed).
template <auto M, auto parse, auto... fallback>
constexpr Column<RecordOf<M>> enum_text(const char* name, OnUpdate role) {
    static_assert(sizeof...(fallback) <= 1);
    using R = RecordOf<M>;
    return {{name, Kind::enum_text, role},
            [](const R& r, int i, ValueSink& out) { out.text(i, std::string(to_string(r.*M))); },
            [](R& r, int i, const ValueSource& in) -> Status {
                const std::string s = in.text(i);
                auto v = parse(s);
                if constexpr (sizeof...(fallback) == 1) {
                    r.*M = v.value_or(fallback...);
                } else {
                    if (!v) {
                        return make_error(ErrorCode::io, "unknown value `" + s + "`");
                    }
                    r.*M = *v;
                }
                return {};
            }};
}

// A job's spec as its JSON text (recipe_json.hpp).
template <auto M>
constexpr Column<RecordOf<M>> job_spec(const char* name, OnUpdate role) {
    using R = RecordOf<M>;
    return {{name, Kind::json_text, role},
            [](const R& r, int i, ValueSink& out) { out.text(i, recipe::to_json(r.*M).dump()); },
            [](R& r, int i, const ValueSource& in) -> Status {
                auto spec = recipe::job_from_json(nlohmann::json::parse(in.text(i)));
                if (!spec) {
                    return make_error(ErrorCode::io, "unreadable spec: " + spec.error().describe());
                }
                r.*M = std::move(*spec);
                return {};
            }};
}

constexpr OnUpdate key = OnUpdate::key;
constexpr OnUpdate kept = OnUpdate::kept;
constexpr OnUpdate updated = OnUpdate::updated;
constexpr OnUpdate generated = OnUpdate::generated;

// ---- the tables -----------------------------------------------------------------------------------

constexpr Column<TeamRecord> k_teams[] = {
    integer<&TeamRecord::id>("id", key),
    text<&TeamRecord::name>("name", updated),
    integer<&TeamRecord::weight>("weight", updated),
    integer<&TeamRecord::created_at>("created_at", kept),
    integer<&TeamRecord::budget_day_micro>("budget_day_micro", updated),
    integer<&TeamRecord::budget_week_micro>("budget_week_micro", updated),
};

constexpr Column<TokenRecord> k_tokens[] = {
    integer<&TokenRecord::id>("id", key),
    text<&TokenRecord::hash>("hash", kept),
    enum_text<&TokenRecord::role, role_from_string, Role::member>("role", kept),
    integer<&TokenRecord::team>("team_id", kept),
    integer<&TokenRecord::worker>("worker_id", updated),
    text<&TokenRecord::label>("label", updated),
    integer<&TokenRecord::created_at>("created_at", kept),
    integer<&TokenRecord::revoked_at>("revoked_at", updated),
    integer<&TokenRecord::uses_left>("uses_left", updated),
    integer<&TokenRecord::budget_day_micro>("budget_day_micro", updated),
    integer<&TokenRecord::budget_week_micro>("budget_week_micro", updated),
};

constexpr Column<WorkerRecord> k_workers[] = {
    integer<&WorkerRecord::id>("id", key),
    integer<&WorkerRecord::team>("team_id", kept),
    text<&WorkerRecord::name>("name", updated),
    text<&WorkerRecord::inventory_json>("inventory", updated),
    enum_text<&WorkerRecord::state, worker_state_from_string, WorkerState::active>("state", updated),
    integer<&WorkerRecord::registered_at>("registered_at", kept),
    integer<&WorkerRecord::last_seen_at>("last_seen_at", updated),
    integer<&WorkerRecord::enrolled_by>("enrolled_by", kept),
    integer<&WorkerRecord::checks_agreed>("checks_agreed", updated),
    integer<&WorkerRecord::checks_disagreed>("checks_disagreed", updated),
};

constexpr Column<SweepRecord> k_sweeps[] = {
    integer<&SweepRecord::id>("id", key),
    integer<&SweepRecord::team>("team_id", kept),
    integer<&SweepRecord::submitter_token>("submitter_token_id", kept),
    text<&SweepRecord::source>("source", kept),
    integer<&SweepRecord::job_count>("job_count", kept),
    integer<&SweepRecord::max_parallel>("max_parallel", kept),
    integer<&SweepRecord::created_at>("created_at", kept),
    text<&SweepRecord::idempotency_key>("idempotency_key", kept),
};

constexpr Column<JobRecord> k_jobs[] = {
    integer<&JobRecord::id>("id", key),
    integer<&JobRecord::sweep_id>("sweep_id", kept),
    integer<&JobRecord::team>("team_id", kept),
    job_spec<&JobRecord::spec>("spec", kept),
    enum_text<&JobRecord::state, job_state_from_string, JobState::queued>("state", updated),
    integer<&JobRecord::attempts>("attempts", updated),
    integer<&JobRecord::created_at>("created_at", kept),
    integer<&JobRecord::updated_at>("updated_at", updated),
    integer<&JobRecord::finished_at>("finished_at", updated),
    integer<&JobRecord::exit_code>("exit_code", updated),
    text<&JobRecord::reason>("reason", updated),
    integer<&JobRecord::retries>("retries", updated),
    text<&JobRecord::retry_key>("retry_key", updated),
    integer<&JobRecord::check_of>("check_of", kept),
    integer<&JobRecord::check_against>("check_against", kept),
};

constexpr Column<AttemptRecord> k_attempts[] = {
    integer<&AttemptRecord::id>("id", key),
    integer<&AttemptRecord::job>("job_id", kept),
    integer<&AttemptRecord::worker>("worker_id", kept),
    integer<&AttemptRecord::gpu_index>("gpu_index", kept),
    integer<&AttemptRecord::gpu_milli>("gpu_milli", kept),
    enum_text<&AttemptRecord::state, attempt_state_from_string, AttemptState::lost>("state", updated),
    integer<&AttemptRecord::lease_expires_at>("lease_expires_at", updated),
    integer<&AttemptRecord::assigned_at>("assigned_at", kept),
    integer<&AttemptRecord::started_at>("started_at", updated),
    integer<&AttemptRecord::ended_at>("ended_at", updated),
    integer<&AttemptRecord::exit_code>("exit_code", updated),
    text<&AttemptRecord::reason>("reason", updated),
    integer<&AttemptRecord::price_micro_per_hour>("price_micro_per_hour", kept),
    integer<&AttemptRecord::voided_at>("voided_at", updated),
    integer<&AttemptRecord::retry>("retry", kept),
};

constexpr Column<LedgerEntry> k_ledger[] = {
    integer<&LedgerEntry::id>("id", key),
    integer<&LedgerEntry::at_ms>("at", kept),
    enum_text<&LedgerEntry::debit, credits::account_from_string>("debit", kept),
    enum_text<&LedgerEntry::credit, credits::account_from_string>("credit", kept),
    integer<&LedgerEntry::amount>("amount", kept),
    enum_text<&LedgerEntry::reason, credits::entry_reason_from_string>("reason", kept),
    zero_as_null<&LedgerEntry::attempt>("attempt_id", kept),
    zero_as_null<&LedgerEntry::grant>("grant_id", kept),
    zero_as_null<&LedgerEntry::payer>("payer_team_id", kept),
    text<&LedgerEntry::note>("note", kept),
};

constexpr Column<BalanceRecord> k_balances[] = {
    enum_text<&BalanceRecord::account, credits::account_from_string>("account", key),
    integer<&BalanceRecord::balance>("balance", updated),
};

constexpr Column<GrantRecord> k_grants[] = {
    integer<&GrantRecord::id>("id", key),
    integer<&GrantRecord::team>("team_id", kept),
    integer<&GrantRecord::amount>("amount", kept),
    integer<&GrantRecord::expires_at>("expires_at", kept),
    text<&GrantRecord::note>("note", kept),
    integer<&GrantRecord::created_at>("created_at", kept),
    integer<&GrantRecord::expired_at>("expired_at", updated),
};

constexpr Column<AuditRecord> k_audit[] = {
    integer<&AuditRecord::id>("id", generated),     integer<&AuditRecord::at_ms>("at", kept),
    integer<&AuditRecord::actor>("token_id", kept), text<&AuditRecord::action>("action", kept),
    text<&AuditRecord::target>("target", kept),     text<&AuditRecord::detail>("detail", kept),
};

// No id of its own in the record: the table numbers the rows, and the store's queries order by it.
constexpr Column<Sample> k_samples[] = {
    integer<&Sample::at_ms>("at", kept),
    integer<&Sample::workers_online>("workers_online", kept),
    integer<&Sample::gpus_online>("gpus_online", kept),
    integer<&Sample::gpu_milli_online>("gpu_milli_online", kept),
    integer<&Sample::gpu_milli_allocated>("gpu_milli_allocated", kept),
    integer<&Sample::jobs_queued>("jobs_queued", kept),
    integer<&Sample::jobs_running>("jobs_running", kept),
};

// Keyed by (attempt, kind): a repeated report replaces the piece it repeats.
constexpr Column<EvidenceRecord> k_evidence[] = {
    integer<&EvidenceRecord::attempt>("attempt_id", key),
    text<&EvidenceRecord::kind>("kind", key),
    text<&EvidenceRecord::json>("body", updated),
};

} // namespace

// clang-format off
template <> const Table<TeamRecord>& table<TeamRecord>() {
    static constexpr Table<TeamRecord> t{"teams", k_teams, Write::upsert, "id", &Records::teams};
    return t;
}
template <> const Table<TokenRecord>& table<TokenRecord>() {
    static constexpr Table<TokenRecord> t{"tokens", k_tokens, Write::upsert, "id", &Records::tokens};
    return t;
}
template <> const Table<WorkerRecord>& table<WorkerRecord>() {
    static constexpr Table<WorkerRecord> t{"workers", k_workers, Write::upsert, "id", &Records::workers};
    return t;
}
template <> const Table<SweepRecord>& table<SweepRecord>() {
    static constexpr Table<SweepRecord> t{"sweeps", k_sweeps, Write::insert_once, "id", &Records::sweeps};
    return t;
}
template <> const Table<JobRecord>& table<JobRecord>() {
    static constexpr Table<JobRecord> t{"jobs", k_jobs, Write::upsert, "id", &Records::jobs};
    return t;
}
template <> const Table<AttemptRecord>& table<AttemptRecord>() {
    static constexpr Table<AttemptRecord> t{"attempts", k_attempts, Write::upsert, "id", &Records::attempts};
    return t;
}
// Entries are written once and never changed: an id that exists fails the apply.
template <> const Table<LedgerEntry>& table<LedgerEntry>() {
    static constexpr Table<LedgerEntry> t{"ledger_entries", k_ledger, Write::insert, "id", &Records::ledger};
    return t;
}
template <> const Table<BalanceRecord>& table<BalanceRecord>() {
    static constexpr Table<BalanceRecord> t{"account_balances", k_balances, Write::upsert, "account",
                                            &Records::balances};
    return t;
}
template <> const Table<GrantRecord>& table<GrantRecord>() {
    static constexpr Table<GrantRecord> t{"grants", k_grants, Write::upsert, "id", &Records::grants};
    return t;
}
// Appended, numbered by the database in the order written; read a page at a time (read_audit).
template <> const Table<AuditRecord>& table<AuditRecord>() {
    static constexpr Table<AuditRecord> t{"audit_log", k_audit, Write::insert, nullptr, &Records::audit};
    return t;
}
// Upserted by (attempt, kind), never loaded whole (read_evidence reads one attempt's).
template <> const Table<EvidenceRecord>& table<EvidenceRecord>() {
    static constexpr Table<EvidenceRecord> t{"attempt_evidence", k_evidence, Write::upsert, nullptr, &Records::evidence};
    return t;
}
template <> const Table<Sample>& table<Sample>() {
    static constexpr Table<Sample> t{"pool_samples", k_samples, Write::insert, nullptr, &Records::samples};
    return t;
}
// clang-format on

bool is_integer(Kind k) {
    return k == Kind::integer || k == Kind::optional_integer;
}

bool is_nullable(Kind k) {
    return k == Kind::optional_integer;
}

const char* kind_name(Kind k) {
    switch (k) {
    case Kind::integer:
        return "integer";
    case Kind::optional_integer:
        return "optional integer";
    case Kind::text:
        return "text";
    case Kind::enum_text:
        return "enum text";
    case Kind::json_text:
        return "JSON text";
    }
    return "?";
}

std::vector<TableInfo> all_tables() {
    std::vector<TableInfo> out;
    for_each_table([&out](const auto& t) { out.push_back(info(t)); });
    return out;
}

std::string column_list(const TableInfo& t) {
    std::string out;
    for (const ColumnInfo& c : t.columns) {
        out += (out.empty() ? "" : ", ") + std::string(c.name);
    }
    return out;
}

std::string insert_sql(const TableInfo& t, Placeholders p) {
    std::string names;
    std::string values;
    std::string target;
    std::string assignments;
    int n = 0;
    for (const ColumnInfo& c : t.columns) {
        if (c.role == OnUpdate::generated) {
            continue;
        }
        const std::string sep = n == 0 ? "" : ", ";
        names += sep + c.name;
        values += sep + (p == Placeholders::numbered ? "$" + std::to_string(n + 1) : std::string("?"));
        ++n;
        if (c.role == OnUpdate::key) {
            target += (target.empty() ? "" : ", ") + std::string(c.name);
        } else if (c.role == OnUpdate::updated) {
            assignments += (assignments.empty() ? "" : ", ") + std::string(c.name) + " = excluded." + c.name;
        }
    }
    std::string sql = "INSERT INTO " + std::string(t.name) + " (" + names + ") VALUES (" + values + ")";
    switch (t.write) {
    case Write::upsert:
        sql += " ON CONFLICT (" + target + ") DO UPDATE SET " + assignments;
        break;
    case Write::insert_once:
        sql += " ON CONFLICT (" + target + ") DO NOTHING";
        break;
    case Write::insert:
        break;
    }
    return sql;
}

std::string select_sql(const TableInfo& t, std::string_view text_collation) {
    std::string sql = "SELECT " + column_list(t) + " FROM " + t.name;
    if (t.order_by != nullptr) {
        sql += " ORDER BY " + std::string(t.order_by);
        for (const ColumnInfo& c : t.columns) {
            if (std::string_view(c.name) == t.order_by && !is_integer(c.kind)) {
                sql += text_collation;
            }
        }
    }
    return sql;
}

Error unreadable_row(const char* table, std::int64_t row, const char* column, const Error& why) {
    return make_error(ErrorCode::io, std::string("table ") + table + ", row " + std::to_string(row) + ", column " +
                                         column + ": " + why.message);
}

} // namespace gpupool::store::columns
