// Random records of every kind through every store (the contract's property test): whatever values
// the records hold (any 64-bit number, text with quotes, backslashes, newlines and non-ASCII letters,
// every optional field set or unset, every state and account), what apply() wrote comes back equal
// from load(), read_audit() and read_samples() after the store is reopened; and a second apply of the
// same records changed at random leaves every engine with the same pool.
#include "core/store/record_columns.hpp"
#include "tests/core/store/contract/stores_under_test.hpp"
#include "tests/support.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <limits>
#include <random>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_store_round_trip {

using namespace gpupool;
using namespace gpupool::store;
using test::StoreUnderTest;

namespace {

class Dice {
public:
    explicit Dice(std::uint64_t seed) : m_rng(seed) {}

    std::int64_t between(std::int64_t lo, std::int64_t hi) {
        return std::uniform_int_distribution<std::int64_t>(lo, hi)(m_rng);
    }
    bool coin() { return between(0, 1) == 1; }
    // Any 64-bit number, the extremes and small ones more often than chance would give them.
    std::int64_t number() {
        switch (between(0, 3)) {
        case 0:
            return between(-3, 3);
        case 1:
            return coin() ? std::numeric_limits<std::int64_t>::max() : std::numeric_limits<std::int64_t>::min();
        default:
            return between(std::numeric_limits<std::int64_t>::min(), std::numeric_limits<std::int64_t>::max());
        }
    }
    std::optional<std::int64_t> maybe() { return coin() ? std::optional<std::int64_t>(number()) : std::nullopt; }
    std::string text() {
        static const char* const k_pieces[] = {"a",  "Z",  "0",  " ", "'", "\"",   "\\", "%",  "_", ";",
                                               "--", "\n", "\t", "é", "✓", "日本", "{}", "$1", "?"};
        std::string s;
        for (std::int64_t n = between(0, 12); n > 0; --n) {
            s += k_pieces[between(0, static_cast<std::int64_t>(std::size(k_pieces)) - 1)];
        }
        return s;
    }
    template <class E>
    E pick(std::initializer_list<E> values) {
        return *(values.begin() + between(0, static_cast<std::int64_t>(values.size()) - 1));
    }
    credits::Account account() {
        using credits::Account;
        switch (between(0, 4)) {
        case 0:
            return Account::of_team(between(1, 1'000'000));
        case 1:
            return Account::settling_of(between(1, 1'000'000));
        case 2:
            return Account::issuer();
        case 3:
            return Account::pool_fee();
        default:
            return Account::escrow();
        }
    }

private:
    std::mt19937_64 m_rng;
};

recipe::JobSpec random_spec(Dice& d, std::int64_t n) {
    recipe::JobSpec s;
    s.name = "job-" + std::to_string(n);
    s.image = d.pick({"busybox", "ghcr.io/acme/train:1.2", "pytorch/pytorch"});
    s.command = {"sh", "-c", "echo " + std::to_string(d.number())};
    s.resources.gpus = d.between(0, 1);
    s.resources.gpu_milli = s.resources.gpus == 1 ? d.between(1, 1000) : 0;
    s.params = {{"lr", std::to_string(d.between(1, 9)) + "e-3"}};
    s.sweep_index = d.between(0, 5);
    return s;
}

// Teams, workers and sweeps first: the other kinds name them (the foreign keys).
Records random_pool(Dice& d) {
    Records r;
    const std::int64_t teams = d.between(1, 4);
    for (std::int64_t i = 1; i <= teams; ++i) {
        r.teams.push_back(
            {TeamId(i), "team " + std::to_string(i) + d.text(), d.number(), d.number(), d.maybe(), d.maybe()});
    }
    auto team = [&] { return TeamId(d.between(1, teams)); };
    const std::int64_t workers = d.between(1, 4);
    for (std::int64_t i = 1; i <= workers; ++i) {
        r.workers.push_back({WorkerId(i), team(), d.text(), d.text(),
                             d.pick({WorkerState::active, WorkerState::draining, WorkerState::banned}), d.number(),
                             d.number(), d.coin() ? std::optional<TokenId>(TokenId(d.number())) : std::nullopt});
    }
    auto worker = [&] { return WorkerId(d.between(1, workers)); };
    for (std::int64_t i = 1, n = d.between(1, 6); i <= n; ++i) {
        r.tokens.push_back({TokenId(i), "hash-" + std::to_string(i),
                            d.pick({Role::admin, Role::member, Role::worker, Role::enroll}),
                            d.coin() ? std::optional<TeamId>(team()) : std::nullopt,
                            d.coin() ? std::optional<WorkerId>(worker()) : std::nullopt, d.text(), d.number(),
                            d.maybe(), d.maybe(), d.maybe(), d.maybe()});
    }
    const std::int64_t sweeps = d.between(1, 3);
    for (std::int64_t i = 1; i <= sweeps; ++i) {
        r.sweeps.push_back(
            {SweepId(i), team(), TokenId(d.number()), d.text(), d.number(), d.number(), d.number(), d.text()});
    }
    const std::int64_t jobs = d.between(1, 5);
    for (std::int64_t i = 1; i <= jobs; ++i) {
        r.jobs.push_back({JobId(i), SweepId(d.between(1, sweeps)), team(), random_spec(d, i),
                          d.pick({JobState::queued, JobState::assigned, JobState::running, JobState::succeeded,
                                  JobState::failed, JobState::cancelled}),
                          d.number(), d.number(), d.number(), d.maybe(), d.maybe(), d.text(), d.number(), d.text()});
    }
    for (std::int64_t i = 1, n = d.between(0, 6); i <= n; ++i) {
        r.attempts.push_back(
            {AttemptId(i), JobId(d.between(1, jobs)), worker(), d.number(), d.number(),
             d.pick({AttemptState::assigned, AttemptState::running, AttemptState::succeeded, AttemptState::failed,
                     AttemptState::cancelled, AttemptState::lost, AttemptState::preempted}),
             d.number(), d.number(), d.maybe(), d.maybe(), d.maybe(), d.text(), d.number(), d.maybe(), d.number()});
    }
    for (std::int64_t i = 1, n = d.between(0, 4); i <= n; ++i) {
        r.grants.push_back({i, team(), d.number(), d.maybe(), d.text(), d.number(), d.maybe()});
    }
    for (std::int64_t i = 1, n = d.between(0, 6); i <= n; ++i) {
        using credits::EntryReason;
        LedgerEntry e;
        e.id = i;
        e.at_ms = d.number();
        e.debit = d.account();
        e.credit = d.account();
        e.amount = d.between(1, std::numeric_limits<std::int64_t>::max()); // the table checks amount > 0
        e.reason = d.pick({EntryReason::grant, EntryReason::adjustment, EntryReason::expiry, EntryReason::hold,
                           EntryReason::charge, EntryReason::fee, EntryReason::release, EntryReason::payout,
                           EntryReason::refund});
        e.attempt = d.coin() ? d.number() : 0;
        e.grant = d.coin() ? d.number() : 0;
        e.payer = d.coin() ? d.number() : 0;
        e.note = d.text();
        r.ledger.push_back(e);
    }
    for (std::int64_t i = 0, n = d.between(0, 6); i < n; ++i) {
        const credits::Account a = d.account();
        const bool taken =
            std::any_of(r.balances.begin(), r.balances.end(), [&](const auto& b) { return b.account == a; });
        if (!taken) {
            r.balances.push_back({a, d.number()});
        }
    }
    for (std::int64_t i = 1, n = d.between(0, 4); i <= n; ++i) {
        r.audit.push_back({i, d.number(), d.coin() ? std::optional<TokenId>(TokenId(d.number())) : std::nullopt,
                           d.text(), d.text(), d.text()});
    }
    for (std::int64_t i = 0, n = d.between(0, 4); i < n; ++i) {
        r.samples.push_back(
            {d.between(0, 1'000'000), d.number(), d.number(), d.number(), d.number(), d.number(), d.number()});
    }
    return r;
}

// Every field of every record changed at random, keys and the records they name kept.
Records random_changes(Dice& d, const Records& pool) {
    Records fresh = random_pool(d);
    Records c = pool;
    auto change = [&d](auto& mine, const auto& theirs, auto keep_references) {
        for (std::size_t i = 0; i < mine.size() && i < theirs.size(); ++i) {
            auto next = theirs[i];
            keep_references(next, mine[i]);
            if (d.coin()) {
                mine[i] = next;
            }
        }
    };
    change(c.teams, fresh.teams, [](TeamRecord& n, const TeamRecord& o) {
        n.id = o.id;
        n.name = o.name;
    });
    change(c.workers, fresh.workers, [](WorkerRecord& n, const WorkerRecord& o) {
        n.id = o.id;
        n.team = o.team;
    });
    change(c.tokens, fresh.tokens, [](TokenRecord& n, const TokenRecord& o) {
        n.id = o.id;
        n.hash = o.hash;
        n.team = o.team;
        n.worker = o.worker;
    });
    change(c.jobs, fresh.jobs, [](JobRecord& n, const JobRecord& o) {
        n.id = o.id;
        n.sweep_id = o.sweep_id;
        n.team = o.team;
    });
    change(c.attempts, fresh.attempts, [](AttemptRecord& n, const AttemptRecord& o) {
        n.id = o.id;
        n.job = o.job;
        n.worker = o.worker;
    });
    change(c.grants, fresh.grants, [](GrantRecord& n, const GrantRecord& o) {
        n.id = o.id;
        n.team = o.team;
    });
    for (auto& b : c.balances) {
        b.balance = d.number();
    }
    c.sweeps = {}; // written once: nothing to change
    c.ledger = {}; // likewise, and a repeated entry fails the apply
    c.audit = {};
    c.samples = {};
    return c;
}

std::vector<BalanceRecord> by_account(std::vector<BalanceRecord> b) {
    std::sort(b.begin(), b.end(), [](const auto& x, const auto& y) { return x.account < y.account; });
    return b;
}

// Named by record and column where they differ (the records' == says whether; the columns say where).
template <class R>
void check_same_rows(const std::vector<R>& got, const std::vector<R>& want) {
    const auto& t = columns::table<R>();
    REQUIRE(got.size() == want.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
        INFO(t.name << ", record " << i);
        CHECK(got[i] == want[i]);
    }
}

void check_same(const Records& got, const Records& want) {
    check_same_rows(got.teams, want.teams);
    check_same_rows(got.tokens, want.tokens);
    check_same_rows(got.workers, want.workers);
    check_same_rows(got.sweeps, want.sweeps);
    check_same_rows(got.jobs, want.jobs);
    check_same_rows(got.attempts, want.attempts);
    check_same_rows(got.ledger, want.ledger);
    check_same_rows(by_account(got.balances), by_account(want.balances));
    check_same_rows(got.grants, want.grants);
}

std::unique_ptr<Store> open(const StoreUnderTest& kind, const std::filesystem::path& dir) {
    auto s = kind.open(dir, {});
    INFO(kind.kind << ": " << (s ? std::string() : s.error().describe()));
    REQUIRE(s);
    return std::move(*s);
}

constexpr std::uint64_t k_seeds = 12;

} // namespace

TEST_CASE("store contract: random records of every kind come back equal after reopening", "[store][contract]") {
    for (const StoreUnderTest& kind : test::stores_under_test()) {
        if (test::store_skipped(kind)) {
            continue;
        }
        for (std::uint64_t seed = 1; seed <= k_seeds; ++seed) {
            DYNAMIC_SECTION(kind.kind << ", seed " << seed) {
                Dice d(seed);
                const Records pool = random_pool(d);
                test::TempDir dir;
                {
                    auto s = open(kind, dir.path());
                    auto st = s->apply(pool);
                    INFO((st ? std::string() : st.error().describe()));
                    REQUIRE(st);
                }
                auto s = open(kind, dir.path());
                auto loaded = s->load();
                REQUIRE(loaded);
                CHECK(loaded->audit.empty());
                CHECK(loaded->samples.empty());
                check_same(*loaded, pool);
                // The audit log comes back newest first with the ids the store numbered it by; the
                // samples oldest first (in the order written where their times tie).
                auto audit = s->read_audit({std::nullopt, std::nullopt, "", 1000});
                REQUIRE(audit);
                std::vector<AuditRecord> want_audit(pool.audit.rbegin(), pool.audit.rend());
                check_same_rows(*audit, want_audit);
                auto samples = s->read_samples(0, 1000);
                REQUIRE(samples);
                std::vector<Sample> want_samples = pool.samples;
                std::stable_sort(want_samples.begin(), want_samples.end(),
                                 [](const Sample& a, const Sample& b) { return a.at_ms < b.at_ms; });
                check_same_rows(*samples, want_samples);
            }
        }
    }
}

// No sections here: each seed's pools of every engine are compared in one run.
TEST_CASE("store contract: the same random upserts leave every engine with the same pool", "[store][contract]") {
    for (std::uint64_t seed = 1; seed <= k_seeds; ++seed) {
        std::optional<Records> first; // the first engine's pool after the changes
        for (const StoreUnderTest& kind : test::stores_under_test()) {
            if (test::store_skipped(kind)) {
                continue;
            }
            INFO(kind.kind << ", seed " << seed);
            Dice d(seed);
            const Records pool = random_pool(d);
            const Records changes = random_changes(d, pool);
            test::TempDir dir;
            auto s = open(kind, dir.path());
            REQUIRE(s->apply(pool));
            auto st = s->apply(changes);
            INFO((st ? std::string() : st.error().describe()));
            REQUIRE(st);
            s.reset();
            auto loaded = open(kind, dir.path())->load();
            REQUIRE(loaded);
            // A sweep, a ledger entry and what a write keeps are as first written.
            check_same_rows(loaded->sweeps, pool.sweeps);
            check_same_rows(loaded->ledger, pool.ledger);
            REQUIRE(loaded->teams.size() == pool.teams.size());
            for (std::size_t i = 0; i < loaded->teams.size(); ++i) {
                CHECK(loaded->teams[i].created_at == pool.teams[i].created_at);
            }
            if (first) {
                INFO("against " << test::stores_under_test().front().kind);
                check_same(*loaded, *first);
            } else {
                first = *loaded;
            }
        }
    }
}

} // namespace test_store_round_trip
} // namespace
