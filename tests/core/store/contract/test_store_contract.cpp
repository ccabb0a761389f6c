// The Store contract (core/store/store.hpp), run against every implementation in
// stores_under_test(): what a successful call wrote is there after the store is closed and
// reopened, or after the process writing it was killed; a failed call wrote nothing; upserts
// update in place; logs page by offset; blobs keep their bytes and the store's cap; a pool written
// by any earlier schema version loads after the upgrade with its data.
#include "core/store/store.hpp"
#include "tests/core/store/contract/stores_under_test.hpp"
#include "tests/support.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <csignal>
#include <sys/wait.h>
#include <unistd.h>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_store_contract {

using namespace gpupool;
using namespace gpupool::store;
using test::StoreUnderTest;
namespace fs = std::filesystem;

namespace {

// Each case runs once per store, as a section named after it.
#define FOR_EACH_STORE(store_var)                                                                                      \
    for (const StoreUnderTest& store_var : test::stores_under_test())                                                  \
        if (test::store_skipped(store_var)) {                                                                          \
        } else                                                                                                         \
            DYNAMIC_SECTION(store_var.kind)

std::unique_ptr<Store> open(const StoreUnderTest& kind, const fs::path& dir, test::StoreOpenOptions o = {}) {
    auto s = kind.open(dir, o);
    INFO(kind.kind << ": " << (s ? std::string() : s.error().describe()));
    REQUIRE(s);
    return std::move(*s);
}

recipe::JobSpec spec(const std::string& name) {
    recipe::JobSpec s;
    s.name = name;
    s.image = "busybox";
    s.command = {"sh", "-c", "echo hi"};
    s.resources.gpus = 1;
    s.resources.gpu_milli = 500;
    s.params = {{"lr", "0.1"}};
    return s;
}

credits::Entry grant_entry(std::int64_t id, std::int64_t team, std::int64_t amount) {
    credits::Entry e;
    e.id = id;
    e.at_ms = 1000 + id;
    e.debit = credits::Account::issuer();
    e.credit = credits::Account::of_team(team);
    e.amount = amount;
    e.reason = credits::EntryReason::grant;
    e.grant = id;
    e.note = "grant " + std::to_string(id);
    return e;
}

// A pool with one of every record kind, every optional field set somewhere.
Records every_kind() {
    Records c;
    c.teams.push_back({TeamId(1), "owners", 3, 100, 9'000'000, 40'000'000});
    c.teams.push_back({TeamId(2), "fellows", 1, 101, std::nullopt, std::nullopt});
    c.workers.push_back(
        {WorkerId(1), TeamId(1), "box", R"({"gpus":[{"index":0}]})", WorkerState::active, 102, 103, TokenId(3)});
    c.tokens.push_back(
        {TokenId(1), "h-admin", Role::admin, std::nullopt, std::nullopt, "root", 100, std::nullopt, std::nullopt});
    c.tokens.push_back(
        {TokenId(2), "h-worker", Role::worker, TeamId(1), WorkerId(1), "box", 102, std::nullopt, std::nullopt});
    c.tokens.push_back({TokenId(3), "h-enroll", Role::enroll, TeamId(1), std::nullopt, "enroll", 101, 180, 0});
    c.tokens.push_back({TokenId(4), "h-member", Role::member, TeamId(2), std::nullopt, "ada", 101, std::nullopt,
                        std::nullopt, 1'000'000, 5'000'000});
    c.sweeps.push_back({SweepId(1), TeamId(2), TokenId(4), "eval.toml", 2, 1, 104, "key-1"});
    for (int i = 1; i <= 2; ++i) {
        JobRecord j;
        j.id = JobId(i);
        j.sweep_id = SweepId(1);
        j.team = TeamId(2);
        j.spec = spec("eval-" + std::to_string(i));
        j.spec.sweep_index = i - 1;
        j.created_at = j.updated_at = 104;
        j.reason = "waiting for a GPU";
        c.jobs.push_back(j);
    }
    c.jobs[0].state = JobState::running;
    c.jobs[0].attempts = 2;
    c.jobs[0].retries = 1; // its first run's attempt is not in the records
    c.jobs[0].retry_key = "retry-1";
    AttemptRecord a;
    a.id = AttemptId(1);
    a.job = JobId(1);
    a.worker = WorkerId(1);
    a.gpu_index = 0;
    a.gpu_milli = 500;
    a.state = AttemptState::running;
    a.lease_expires_at = 200;
    a.assigned_at = 105;
    a.started_at = 106;
    a.price_micro_per_hour = 1'500'000;
    a.retry = 1;
    c.attempts.push_back(a);
    c.ledger.push_back(grant_entry(1, 2, 7'000'000));
    c.balances.push_back({credits::Account::issuer(), -7'000'000});
    c.balances.push_back({credits::Account::of_team(2), 7'000'000});
    c.grants.push_back({1, TeamId(2), 7'000'000, 99'000, "grant 1", 1001, std::nullopt});
    return c;
}

std::vector<BalanceRecord> sorted(std::vector<BalanceRecord> b) {
    std::sort(b.begin(), b.end(), [](const auto& x, const auto& y) { return x.account < y.account; });
    return b;
}

void check_same(const Records& got, const Records& want) {
    CHECK(got.teams == want.teams);
    CHECK(got.tokens == want.tokens);
    CHECK(got.workers == want.workers);
    CHECK(got.sweeps == want.sweeps);
    CHECK(got.jobs == want.jobs);
    CHECK(got.attempts == want.attempts);
    CHECK(got.ledger == want.ledger);
    CHECK(sorted(got.balances) == sorted(want.balances));
    CHECK(got.grants == want.grants);
}

fs::path file_with(const fs::path& dir, const std::string& name, const std::string& bytes) {
    test::write_file(dir / name, bytes);
    return dir / name;
}

} // namespace

TEST_CASE("store contract: a new store loads empty", "[store][contract]") {
    FOR_EACH_STORE(kind) {
        test::TempDir dir;
        auto s = open(kind, dir.path());
        auto snap = s->load();
        REQUIRE(snap);
        CHECK(snap->empty());
        CHECK(s->max_blob_bytes() > 0);
    }
}

TEST_CASE("store contract: every record kind survives close and reopen", "[store][contract]") {
    FOR_EACH_STORE(kind) {
        test::TempDir dir;
        const Records c = every_kind();
        {
            auto s = open(kind, dir.path());
            REQUIRE(s->apply(c));
        }
        auto s = open(kind, dir.path());
        auto snap = s->load();
        REQUIRE(snap);
        check_same(*snap, c);
    }
}

TEST_CASE("store contract: upserts change the mutable fields in place and keep the rest", "[store][contract]") {
    FOR_EACH_STORE(kind) {
        test::TempDir dir;
        const Records c = every_kind();
        auto s = open(kind, dir.path());
        REQUIRE(s->apply(c));
        Records u;
        TeamRecord team = c.teams[1];
        team.weight = 5;
        team.budget_week_micro = 12;
        u.teams.push_back(team);
        WorkerRecord worker = c.workers[0];
        worker.state = WorkerState::banned;
        worker.last_seen_at = 999;
        u.workers.push_back(worker);
        TokenRecord token = c.tokens[3];
        token.revoked_at = 500;
        token.budget_day_micro = std::nullopt; // a removed cap
        u.tokens.push_back(token);
        JobRecord job = c.jobs[0];
        job.state = JobState::succeeded;
        job.finished_at = job.updated_at = 300;
        job.exit_code = 0;
        job.reason = "exited 0";
        job.retries = 2; // retried again
        job.retry_key = "retry-2";
        u.jobs.push_back(job);
        AttemptRecord attempt = c.attempts[0];
        attempt.state = AttemptState::succeeded;
        attempt.ended_at = 300;
        attempt.exit_code = 0;
        attempt.voided_at = 400;
        u.attempts.push_back(attempt);
        GrantRecord grant = c.grants[0];
        grant.expired_at = 99'001;
        u.grants.push_back(grant);
        u.balances.push_back({credits::Account::of_team(2), 6'000'000});
        // A sweep is written once: a repeated one changes nothing.
        SweepRecord sweep = c.sweeps[0];
        sweep.source = "other.toml";
        u.sweeps.push_back(sweep);
        REQUIRE(s->apply(u));

        Records want = c;
        want.teams[1] = team;
        want.workers[0] = worker;
        want.tokens[3] = token;
        want.jobs[0] = job;
        want.attempts[0] = attempt;
        want.grants[0] = grant;
        want.balances[1].balance = 6'000'000;
        s.reset();
        auto reopened = open(kind, dir.path());
        auto snap = reopened->load();
        REQUIRE(snap);
        check_same(*snap, want);
    }
}

TEST_CASE("store contract: a failing apply writes nothing of itself", "[store][contract]") {
    FOR_EACH_STORE(kind) {
        test::TempDir dir;
        auto s = open(kind, dir.path());
        Records base;
        base.teams.push_back({TeamId(1), "owners", 1, 100, std::nullopt, std::nullopt});
        base.ledger.push_back(grant_entry(1, 1, 5));
        base.balances.push_back({credits::Account::of_team(1), 5});
        REQUIRE(s->apply(base));
        // A second entry with id 1 fails the whole batch: the new team and the balance stay unwritten.
        Records bad;
        bad.teams.push_back({TeamId(2), "fellows", 1, 101, std::nullopt, std::nullopt});
        bad.ledger.push_back(grant_entry(1, 1, 9));
        bad.balances.push_back({credits::Account::of_team(1), 14});
        auto st = s->apply(bad);
        REQUIRE_FALSE(st);
        CHECK(st.error().code == ErrorCode::io);
        // So does a job that names no sweep.
        Records orphan = every_kind();
        orphan.jobs[1].sweep_id = SweepId(99);
        REQUIRE_FALSE(s->apply(orphan));
        s.reset();
        auto reopened = open(kind, dir.path());
        auto snap = reopened->load();
        REQUIRE(snap);
        check_same(*snap, base);
    }
}

TEST_CASE("store contract: the audit log is appended in order, read newest first, never loaded", "[store][contract]") {
    FOR_EACH_STORE(kind) {
        test::TempDir dir;
        auto audit = [](std::int64_t at, std::optional<TokenId> actor, std::string action, std::string target) {
            AuditRecord a;
            a.at_ms = at;
            a.actor = actor;
            a.action = std::move(action);
            a.target = std::move(target);
            a.detail = R"({"weight":2})";
            return a;
        };
        {
            auto s = open(kind, dir.path());
            Records c;
            c.teams.push_back({TeamId(1), "owners", 2, 100, std::nullopt, std::nullopt});
            c.audit.push_back(audit(100, TokenId(1), "team.create", "team `owners`"));
            REQUIRE(s->apply(c));
            Records more;
            more.audit.push_back(audit(200, TokenId(1), "credits.grant", "team `owners`"));
            more.audit.push_back(audit(300, std::nullopt, "token.recover_admin", "token 5"));
            more.audit.push_back(audit(400, TokenId(5), "team_x.odd", "100% _literal_"));
            REQUIRE(s->apply(more));
            // A failed apply appends nothing.
            Records bad;
            bad.audit.push_back(audit(500, TokenId(1), "team.create", "team `broken`"));
            bad.jobs.push_back(every_kind().jobs[0]); // names a sweep that does not exist
            REQUIRE_FALSE(s->apply(bad));
        }
        auto s = open(kind, dir.path());
        auto snap = s->load();
        REQUIRE(snap);
        CHECK(snap->audit.empty());
        auto all = s->read_audit({});
        REQUIRE(all);
        REQUIRE(all->size() == 4);
        // newest first, ids ascending in the order appended
        CHECK((*all)[0].action == "team_x.odd");
        CHECK((*all)[3].action == "team.create");
        CHECK((*all)[3].detail == R"({"weight":2})");
        CHECK((*all)[3].actor == std::optional<TokenId>(TokenId(1)));
        CHECK_FALSE((*all)[1].actor);
        CHECK((*all)[0].id > (*all)[1].id);
        CHECK((*all)[1].id > (*all)[2].id);
        CHECK((*all)[2].id > (*all)[3].id);

        AuditQuery recent;
        recent.since_ms = 200;
        recent.limit = 2;
        auto page = s->read_audit(recent);
        REQUIRE(page);
        REQUIRE(page->size() == 2);
        CHECK((*page)[0].at_ms == 400);
        CHECK((*page)[1].at_ms == 300);
        AuditQuery next = recent;
        next.before_id = page->back().id;
        auto page2 = s->read_audit(next);
        REQUIRE(page2);
        REQUIRE(page2->size() == 1);
        CHECK((*page2)[0].at_ms == 200);

        AuditQuery teams;
        teams.action_prefix = "team.";
        auto t = s->read_audit(teams);
        REQUIRE(t);
        REQUIRE(t->size() == 1); // `_` is not a wildcard: "team_x.odd" does not match "team."
        CHECK((*t)[0].target == "team `owners`");
    }
}

TEST_CASE("store contract: utilisation samples are appended, read oldest first since a time, pruned, never loaded",
          "[store][contract]") {
    FOR_EACH_STORE(kind) {
        test::TempDir dir;
        const auto sample = [](std::int64_t at, std::int64_t allocated) {
            return Sample{at, 2, 3, 3000, allocated, 4, 5};
        };
        {
            auto s = open(kind, dir.path());
            Records c;
            c.teams.push_back({TeamId(1), "owners", 1, 100, std::nullopt, std::nullopt});
            c.samples.push_back(sample(1000, 0));
            c.samples.push_back(sample(2000, 500));
            REQUIRE(s->apply(c));
            Records more;
            more.samples.push_back(sample(3000, 1500));
            more.samples.push_back(sample(3000, 2000)); // the same moment twice: in the order appended
            more.samples.push_back(sample(4000, 3000));
            REQUIRE(s->apply(more));
            // A failed apply appends nothing.
            Records bad;
            bad.samples.push_back(sample(5000, 1));
            bad.jobs.push_back(every_kind().jobs[0]); // names a sweep that does not exist
            REQUIRE_FALSE(s->apply(bad));
        }
        auto s = open(kind, dir.path()); // reopened: they were committed
        auto snap = s->load();
        REQUIRE(snap);
        CHECK(snap->samples.empty());
        auto all = s->read_samples(0, 100);
        REQUIRE(all);
        REQUIRE(all->size() == 5);
        CHECK((*all)[0] == sample(1000, 0));
        CHECK((*all)[2] == sample(3000, 1500));
        CHECK((*all)[3] == sample(3000, 2000));
        CHECK((*all)[4] == sample(4000, 3000));
        // Since a time, inclusive; with a limit, the newest ones, still oldest first.
        auto since = s->read_samples(2000, 100);
        REQUIRE(since);
        REQUIRE(since->size() == 4);
        CHECK(since->front().at_ms == 2000);
        auto newest = s->read_samples(0, 2);
        REQUIRE(newest);
        REQUIRE(newest->size() == 2);
        CHECK((*newest)[0] == sample(3000, 2000));
        CHECK((*newest)[1] == sample(4000, 3000));
        CHECK(s->read_samples(0, 0).value().empty());
        // Pruning deletes those taken before the time, and only those.
        auto pruned = s->prune_samples(3000);
        REQUIRE(pruned);
        CHECK(*pruned == 2);
        CHECK(s->prune_samples(3000).value() == 0);
        auto left = s->read_samples(0, 100);
        REQUIRE(left);
        REQUIRE(left->size() == 3);
        CHECK(left->front().at_ms == 3000);
        s.reset();
        CHECK(open(kind, dir.path())->read_samples(0, 100).value().size() == 3);
    }
}

TEST_CASE("store contract: an attempt's evidence is upserted by kind, read one attempt at a time, never loaded",
          "[store][contract][evidence]") {
    FOR_EACH_STORE(kind) {
        test::TempDir dir;
        {
            auto s = open(kind, dir.path());
            Records c = every_kind();
            c.evidence.push_back({AttemptId(1), "run", R"({"runtime":"podman"})"});
            REQUIRE(s->apply(c));
            Records more;
            more.evidence.push_back({AttemptId(1), "outputs", R"({"entry_count":2})"});
            more.evidence.push_back({AttemptId(1), "run", R"({"runtime":"docker"})"}); // replaces the first
            REQUIRE(s->apply(more));
            // Evidence of an attempt that does not exist is refused, and the apply writes nothing.
            Records bad;
            bad.evidence.push_back({AttemptId(1), "check", "{}"});
            bad.evidence.push_back({AttemptId(99), "run", "{}"});
            REQUIRE_FALSE(s->apply(bad));
        }
        auto s = open(kind, dir.path());
        auto snap = s->load();
        REQUIRE(snap);
        CHECK(snap->evidence.empty());
        auto got = s->read_evidence(AttemptId(1));
        REQUIRE(got);
        REQUIRE(got->size() == 2);
        CHECK((*got)[0] == EvidenceRecord{AttemptId(1), "outputs", R"({"entry_count":2})"});
        CHECK((*got)[1] == EvidenceRecord{AttemptId(1), "run", R"({"runtime":"docker"})"});
        auto none = s->read_evidence(AttemptId(2));
        REQUIRE(none);
        CHECK(none->empty());
    }
}

TEST_CASE("store contract: a long log pages by offset, retried chunks are stored once", "[store][contract]") {
    FOR_EACH_STORE(kind) {
        test::TempDir dir;
        const AttemptId a(1);
        std::string whole;
        {
            auto s = open(kind, dir.path());
            REQUIRE(s->apply(every_kind()));
            for (int i = 0; i < 200; ++i) {
                const std::string line = "line " + std::to_string(i) + "\n";
                const auto offset = static_cast<std::int64_t>(whole.size());
                auto r = s->append_log(a, offset, line);
                REQUIRE(r);
                CHECK(r->stored_bytes == static_cast<std::int64_t>(line.size()));
                whole += line;
                if (i % 50 == 0) { // the same chunk again: acknowledged, not stored twice
                    auto again = s->append_log(a, offset, line);
                    REQUIRE(again);
                    CHECK(again->stored_bytes == 0);
                    CHECK(again->length == static_cast<std::int64_t>(whole.size()));
                }
            }
            auto gap = s->append_log(a, static_cast<std::int64_t>(whole.size()) + 10, "x");
            REQUIRE_FALSE(gap);
            CHECK(gap.error().code == ErrorCode::conflict);
        }
        auto s = open(kind, dir.path());
        REQUIRE(s->log_length(a).value() == static_cast<std::int64_t>(whole.size()));
        // Pages of 97 bytes from offset 0 put the log back together, the last page short.
        std::string paged;
        for (std::int64_t offset = 0;;) {
            auto page = s->read_log(a, offset, 97);
            REQUIRE(page);
            if (page->empty()) {
                break;
            }
            CHECK(page->size() <= 97);
            paged += *page;
            offset += static_cast<std::int64_t>(page->size());
        }
        CHECK(paged == whole);
        CHECK(s->read_log(AttemptId(2), 0, 100).value().empty()); // another attempt's log is its own
    }
}

TEST_CASE("store contract: a dropped middle of a log keeps the offsets of the rest", "[store][contract]") {
    FOR_EACH_STORE(kind) {
        test::TempDir dir;
        const AttemptId a(1);
        auto s = open(kind, dir.path());
        REQUIRE(s->apply(every_kind()));
        for (const std::string chunk : {"aaaa", "bbbb", "cccc", "dddd"}) {
            REQUIRE(s->append_log(a, s->log_length(a).value(), chunk));
        }
        REQUIRE(s->drop_log_range(a, 4, 12)); // the b and c chunks
        s.reset();
        auto reopened = open(kind, dir.path());
        CHECK(reopened->log_length(a).value() == 16);
        CHECK(reopened->read_log(a, 0, 100).value() == "aaaadddd");
        CHECK(reopened->log_resume_offset(a, 2).value() == std::optional<std::int64_t>(2));
        CHECK(reopened->log_resume_offset(a, 5).value() == std::optional<std::int64_t>(12));
        CHECK(reopened->read_log(a, 13, 100).value() == "ddd");
        CHECK_FALSE(reopened->log_resume_offset(a, 16).value().has_value());
    }
}

TEST_CASE("store contract: blobs keep their bytes across reopen, scoped to their team", "[store][contract]") {
    FOR_EACH_STORE(kind) {
        test::TempDir dir;
        std::string big(3 * 1024 * 1024 + 5, '\0'); // more than one piece of a streamed write
        for (std::size_t i = 0; i < big.size(); ++i) {
            big[i] = static_cast<char>((i * 7919) % 251);
        }
        {
            auto s = open(kind, dir.path());
            REQUIRE(s->apply(every_kind()));
            REQUIRE(s->put_output(AttemptId(1), file_with(dir.path(), "first.tar", "first"), "sha-first"));
            REQUIRE(s->put_output(AttemptId(1), file_with(dir.path(), "out.tar", big), "sha-big")); // replaced whole
            const auto in = file_with(dir.path(), "in.tar", std::string("in\0put", 6));
            REQUIRE(s->put_input_blob(TeamId(2), "d1", in, 110));
            REQUIRE(s->put_input_blob(TeamId(2), "d1", file_with(dir.path(), "other.tar", "other"), 111)); // kept
        }
        auto s = open(kind, dir.path());
        CHECK(s->get_output(AttemptId(1)).value() == std::optional<std::string>(big));
        CHECK_FALSE(s->get_output(AttemptId(2)).value().has_value());
        CHECK(s->get_input_blob(TeamId(2), "d1").value() == std::optional<std::string>(std::string("in\0put", 6)));
        CHECK(s->input_blob_size(TeamId(2), "d1").value() == std::optional<std::int64_t>(6));
        CHECK_FALSE(s->get_input_blob(TeamId(1), "d1").value().has_value());
        CHECK_FALSE(s->input_blob_size(TeamId(1), "d1").value().has_value());
    }
}

TEST_CASE("store contract: a blob over the store's cap is refused and stores nothing", "[store][contract]") {
    FOR_EACH_STORE(kind) {
        test::TempDir dir;
        constexpr std::int64_t k_cap = 1000;
        auto s = open(kind, dir.path(), test::StoreOpenOptions{k_cap});
        CHECK(s->max_blob_bytes() == k_cap);
        REQUIRE(s->apply(every_kind()));
        const auto at_cap = file_with(dir.path(), "at.tar", std::string(k_cap, 'a'));
        const auto over = file_with(dir.path(), "over.tar", std::string(k_cap + 1, 'b'));
        REQUIRE(s->put_output(AttemptId(1), at_cap, "sha-a"));
        REQUIRE(s->put_input_blob(TeamId(2), "at", at_cap, 1));

        auto out = s->put_output(AttemptId(1), over, "sha-b");
        REQUIRE_FALSE(out);
        CHECK(out.error().code == ErrorCode::invalid_input);
        CHECK_THAT(out.error().message, Catch::Contains(std::to_string(k_cap)));
        auto in = s->put_input_blob(TeamId(2), "over", over, 2);
        REQUIRE_FALSE(in);
        CHECK(in.error().code == ErrorCode::invalid_input);

        CHECK(s->get_output(AttemptId(1)).value() == std::optional<std::string>(std::string(k_cap, 'a')));
        CHECK_FALSE(s->input_blob_size(TeamId(2), "over").value().has_value());
        CHECK(s->input_blob_size(TeamId(2), "at").value() == std::optional<std::int64_t>(k_cap));
    }
}

TEST_CASE("store contract: input archives are listed by team, then digest", "[store][contract]") {
    FOR_EACH_STORE(kind) {
        test::TempDir dir;
        auto s = open(kind, dir.path());
        CHECK(s->list_input_blobs().value().empty());
        REQUIRE(s->apply(every_kind()));
        REQUIRE(s->put_input_blob(TeamId(2), "d2", file_with(dir.path(), "a", "four"), 120));
        REQUIRE(s->put_input_blob(TeamId(2), "D1", file_with(dir.path(), "b", "fives"), 121));
        REQUIRE(s->put_input_blob(TeamId(1), "d9", file_with(dir.path(), "c", ""), 122));
        REQUIRE(s->put_input_blob(TeamId(2), "d2", file_with(dir.path(), "d", "again"), 123)); // kept once
        s.reset();
        auto listed = open(kind, dir.path())->list_input_blobs();
        REQUIRE(listed);
        // Digests compare byte by byte: "D1" before "d2".
        CHECK(*listed == std::vector<InputBlobRef>{
                             {TeamId(1), "d9", 0, 122}, {TeamId(2), "D1", 5, 121}, {TeamId(2), "d2", 4, 120}});
    }
}

TEST_CASE("store contract: one store takes, renews, reads and releases the lease", "[store][contract]") {
    FOR_EACH_STORE(kind) {
        test::TempDir dir;
        auto s = open(kind, dir.path());
        CHECK(s->shared() == (kind.kind != "sqlite"));
        const auto before = s->read_lease();
        REQUIRE(before);
        CHECK(before->epoch == 0);
        CHECK(before->expires_in_ms == 0);
        auto unheld = s->renew_lease(1000); // nothing to renew
        REQUIRE_FALSE(unheld);
        CHECK(is_fenced(unheld.error()));

        auto taken = s->acquire_lease({"coordinator-a", "https://a.example:8443", 60'000});
        REQUIRE(taken);
        CHECK(taken->holder == "coordinator-a");
        CHECK(taken->address == "https://a.example:8443");
        CHECK(taken->epoch == 1);
        CHECK(taken->expires_in_ms > 0);
        CHECK(taken->expires_in_ms <= 60'000);
        REQUIRE(s->apply(every_kind())); // the holder writes
        REQUIRE(s->renew_lease(120'000));
        const auto renewed = s->read_lease();
        REQUIRE(renewed);
        CHECK(renewed->epoch == 1);
        CHECK(renewed->expires_in_ms > 60'000);

        REQUIRE(s->release_lease());
        const auto released = s->read_lease();
        REQUIRE(released);
        CHECK(released->holder == "coordinator-a");
        CHECK(released->expires_in_ms == 0);
        // Free again: another holder takes it at the next epoch, and this store writes under it.
        auto next = s->acquire_lease({"coordinator-b", "https://b.example", 60'000});
        REQUIRE(next);
        CHECK(next->holder == "coordinator-b");
        CHECK(next->epoch == 2);
        REQUIRE(s->append_log(AttemptId(1), 0, "after the hand-over\n"));
    }
}

TEST_CASE("store contract: a pool from every earlier schema version loads after the upgrade", "[store][contract]") {
    FOR_EACH_STORE(kind) {
        for (const test::OldVersion& v : kind.old_versions) {
            DYNAMIC_SECTION("from version " << v.label) {
                test::TempDir dir;
                const Records old = test::old_pool_records(v);
                kind.write_old(dir.path(), v, old);
                {
                    auto s = open(kind, dir.path());
                    auto snap = s->load();
                    REQUIRE(snap);
                    check_same(*snap, old);
                    CHECK(s->read_log(AttemptId(1), 0, 100).value() == "hello\n");
                    CHECK(s->get_output(AttemptId(1)).value() == std::optional<std::string>("tar bytes"));
                    if (v.schema_version >= 3) { // input archives came with version 3
                        CHECK(s->get_input_blob(TeamId(2), "d1").value() == std::optional<std::string>("in1"));
                    }
                    // An upload without a team (version 3) cannot be named by any team after the upgrade.
                    CHECK_FALSE(s->get_input_blob(TeamId(1), "d0").value().has_value());
                    CHECK_FALSE(s->get_input_blob(TeamId(2), "d0").value().has_value());
                    // The upgraded store takes today's records: fields the old version had no place for.
                    Records now;
                    SweepRecord sweep{SweepId(2), TeamId(2), TokenId(1), "again.toml", 0, 0, 600, "key-2"};
                    now.sweeps.push_back(sweep);
                    TokenRecord member{TokenId(4),   "h4", Role::member, TeamId(2), std::nullopt, "ada", 600,
                                       std::nullopt, 3,    1'000,        2'000};
                    now.tokens.push_back(member);
                    REQUIRE(s->apply(now));
                }
                auto s = open(kind, dir.path());
                auto snap = s->load();
                REQUIRE(snap);
                REQUIRE(snap->sweeps.size() == 2);
                CHECK(snap->sweeps[1].idempotency_key == "key-2");
                REQUIRE(snap->tokens.size() == 4);
                CHECK(snap->tokens[3].budget_week_micro == std::optional<std::int64_t>(2'000));
                CHECK(snap->teams == old.teams);
            }
        }
    }
}

namespace {

// The child: writes one batch after another (a team, its grant, the grant's ledger entry and the
// balances it moved, and a line of the attempt's log) and acknowledges each on `ack_fd` only once
// the store has returned success, until it is killed. Exits 3 at the first failure.
[[noreturn]] void write_until_killed(const StoreUnderTest& kind, const fs::path& dir, int ack_fd) {
    auto opened = kind.open(dir, {});
    if (!opened) {
        ::_exit(3);
    }
    Store& s = **opened;
    std::int64_t issued = 0;
    std::int64_t log_length = 0;
    for (std::int64_t i = 1;; ++i) {
        Records c;
        const std::int64_t team = 100 + i;
        c.teams.push_back({TeamId(team), "t" + std::to_string(i), 1, i, std::nullopt, std::nullopt});
        c.ledger.push_back(grant_entry(i, team, i));
        c.grants.push_back({i, TeamId(team), i, std::nullopt, "grant " + std::to_string(i), 1000 + i, std::nullopt});
        issued += i;
        c.balances.push_back({credits::Account::issuer(), -issued});
        c.balances.push_back({credits::Account::of_team(team), i});
        const std::string line = "line " + std::to_string(i) + "\n";
        if (!s.apply(c) || !s.append_log(AttemptId(1), log_length, line)) {
            ::_exit(3);
        }
        log_length += static_cast<std::int64_t>(line.size());
        if (::write(ack_fd, &i, sizeof i) != static_cast<ssize_t>(sizeof i)) {
            ::_exit(3);
        }
    }
}

} // namespace

TEST_CASE("store contract: every acknowledged write is there after the writer is killed with SIGKILL",
          "[store][contract]") {
    FOR_EACH_STORE(kind) {
        test::TempDir fresh;
        {
            // Attempt 1 for the log; no ledger yet: the writer's entries start at id 1.
            auto s = open(kind, fresh.path());
            Records base = every_kind();
            base.ledger.clear();
            base.balances.clear();
            base.grants.clear();
            REQUIRE(s->apply(base));
        }
        int fds[2];
        REQUIRE(::pipe(fds) == 0);
        const pid_t child = ::fork();
        REQUIRE(child >= 0);
        if (child == 0) {
            ::close(fds[0]);
            write_until_killed(kind, fresh.path(), fds[1]);
        }
        ::close(fds[1]);
        std::int64_t acked = 0;
        std::int64_t next = 0;
        while (acked < 40 && ::read(fds[0], &next, sizeof next) == static_cast<ssize_t>(sizeof next)) {
            acked = next;
        }
        REQUIRE(::kill(child, SIGKILL) == 0);
        int status = 0;
        REQUIRE(::waitpid(child, &status, 0) == child);
        // Acknowledgements it wrote before the kill count too.
        while (::read(fds[0], &next, sizeof next) == static_cast<ssize_t>(sizeof next)) {
            acked = next;
        }
        ::close(fds[0]);
        REQUIRE(WIFSIGNALED(status));
        CHECK(WTERMSIG(status) == SIGKILL);
        REQUIRE(acked >= 40);

        auto s = open(kind, fresh.path()); // the killed writer's lock (if any) went with it
        auto snap = s->load();
        REQUIRE(snap);
        // Batches 1..acked are all there; the one in flight (acked + 1) is there whole or not at all.
        const auto written = static_cast<std::int64_t>(snap->ledger.size());
        CHECK(written >= acked);
        CHECK(written <= acked + 1);
        CHECK(static_cast<std::int64_t>(snap->grants.size()) == written);
        CHECK(static_cast<std::int64_t>(snap->teams.size()) == 2 + written);
        std::int64_t issued = 0;
        for (std::int64_t i = 1; i <= written; ++i) {
            REQUIRE(snap->ledger[static_cast<std::size_t>(i - 1)] == grant_entry(i, 100 + i, i));
            issued += i;
        }
        std::optional<std::int64_t> issuer_balance;
        for (const auto& b : snap->balances) {
            if (b.account == credits::Account::issuer()) {
                issuer_balance = b.balance;
            }
        }
        CHECK(issuer_balance == std::optional<std::int64_t>(-issued)); // balances moved with their entries
        std::string log;
        for (std::int64_t i = 1; i <= acked; ++i) {
            log += "line " + std::to_string(i) + "\n";
        }
        CHECK(s->read_log(AttemptId(1), 0, std::int64_t{1} << 20).value().starts_with(log));
    }
}

} // namespace test_store_contract
} // namespace
