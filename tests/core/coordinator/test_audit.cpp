// The audit log: every admin action leaves one record, written with the change it records, naming
// the token that acted; nothing else does, members cannot read it, and it survives a restart (real
// coordinator on a SQLite file, manual clock).
#include "core/coordinator/admin_ops.hpp"
#include "core/coordinator/credit_ops.hpp"
#include "tests/core/coordinator/credit_pool.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_audit {

using namespace gpupool;
using namespace gpupool::coordinator;
using namespace gpupool::test::credit_pool;
using json = nlohmann::json;

namespace {

std::vector<store::AuditRecord> all(CreditPool& p) {
    store::AuditQuery q;
    q.limit = 1000;
    auto r = p.coord->audit_log(p.admin, q);
    REQUIRE(r);
    return *r;
}

std::vector<std::string> actions(const std::vector<store::AuditRecord>& records) {
    std::vector<std::string> out;
    for (auto it = records.rbegin(); it != records.rend(); ++it) {
        out.push_back(it->action); // oldest first
    }
    return out;
}

} // namespace

TEST_CASE("each admin action leaves one audit record naming the token that acted", "[coordinator][audit]") {
    CreditPool p;
    // The pool's set-up: the first admin (made on the machine itself), two teams, two tokens.
    CHECK(actions(all(p)) ==
          std::vector<std::string>{"token.first_admin", "team.create", "team.create", "token.create", "token.create"});
    const auto setup = all(p);
    CHECK_FALSE(setup.back().actor); // the first admin token: no token acted
    CHECK(setup.front().actor == std::optional<TokenId>(p.admin.token_id));
    CHECK(setup.front().target.starts_with("token "));
    const json enroll = json::parse(setup.front().detail);
    CHECK(enroll["role"] == "enroll");
    CHECK(enroll["team"] == "owners");
    CHECK(enroll["uses"] == 1);
    CHECK(setup.front().detail.find("gpp_") == std::string::npos); // never a secret

    const std::size_t before = setup.size();
    p.clock.advance_ms(1000);
    REQUIRE(grant_credits(*p.coord, p.admin, "fellows", 5 * k_credit, std::nullopt, "cohort 3"));
    REQUIRE(adjust_credits(*p.coord, p.admin, "fellows", -k_credit, "refund for outage"));
    REQUIRE(set_budget(*p.coord, p.admin, "fellows", 2 * k_credit, std::nullopt));
    BudgetChange member_cap{"fellows", "f"};
    member_cap.day = CapChange::set(k_credit);
    REQUIRE(change_budget(*p.coord, p.admin, member_cap));
    const WorkerId w = p.owner_worker.worker.value();
    REQUIRE(set_worker_state(*p.coord, p.admin, w, store::WorkerState::draining));
    REQUIRE(set_worker_state(*p.coord, p.admin, w, store::WorkerState::active));
    REQUIRE(revoke_token(*p.coord, p.admin, p.fellow.token_id));
    REQUIRE(ban_worker(*p.coord, p.admin, w, std::int64_t{0}));
    REQUIRE(record_audit(*p.coord, p.admin, "pool.backup", "pool", R"({"bytes":1})"));
    REQUIRE(recover_admin(*p.coord));

    auto records = all(p);
    REQUIRE(records.size() == before + 10);
    records.resize(10); // the new ones, newest first
    CHECK(actions(records) == std::vector<std::string>{"credits.grant", "credits.adjust", "budget.team",
                                                       "budget.member", "worker.drain", "worker.activate",
                                                       "token.revoke", "worker.ban", "pool.backup",
                                                       "token.recover_admin"});
    for (const auto& r : records) {
        CHECK(r.at_ms == p.clock.now_ms());
        if (r.action != "token.recover_admin") {
            CHECK(r.actor == std::optional<TokenId>(p.admin.token_id));
        }
    }
    const auto find = [&](const std::string& action) {
        auto it = std::find_if(records.begin(), records.end(), [&](const auto& r) { return r.action == action; });
        REQUIRE(it != records.end());
        return std::pair{it->target, json::parse(it->detail)};
    };
    auto [grant_target, grant] = find("credits.grant");
    CHECK(grant_target == "team `fellows`");
    CHECK(grant["amount_micro"] == 5 * k_credit);
    CHECK(grant["note"] == "cohort 3");
    CHECK(find("credits.adjust").second["amount_micro"] == -k_credit);
    CHECK(find("budget.team").second["day_micro"] == 2 * k_credit);
    CHECK(find("budget.team").second["week_micro"].is_null());
    CHECK(find("budget.member").first ==
          "member token " + std::to_string(p.fellow.token_id.value()) + " `f` of team `fellows`");
    CHECK(find("worker.drain").first == "worker " + std::to_string(w.value()) + " `l4-box`");
    CHECK(find("worker.drain").second == json{{"from", "active"}, {"to", "draining"}});
    CHECK(find("worker.ban").second["void_since"] == 0);
    CHECK(find("token.revoke").second["label"] == "f");

    // A refused action leaves nothing; neither does anything a member or a worker does.
    CHECK_FALSE(grant_credits(*p.coord, p.admin, "nobody", k_credit, std::nullopt, ""));
    CHECK_FALSE(create_team(*p.coord, p.fellow, "sneaky", 1));
    CHECK(all(p).size() == before + 10);

    // Members cannot read it; pages go by id; it is durable.
    auto member =
        p.coord->authenticate(create_token(*p.coord, p.admin, store::Role::member, "owners", "m").value().secret)
            .value();
    auto denied = p.coord->audit_log(member, {});
    REQUIRE_FALSE(denied);
    CHECK(denied.error().code == ErrorCode::forbidden);
    store::AuditQuery grants;
    grants.action_prefix = "credits.";
    auto credit_actions = p.coord->audit_log(p.admin, grants);
    REQUIRE(credit_actions);
    CHECK(actions(*credit_actions) == std::vector<std::string>{"credits.grant", "credits.adjust"});
    store::AuditQuery bad;
    bad.limit = 0;
    CHECK_FALSE(p.coord->audit_log(p.admin, bad));
    const std::size_t total = all(p).size();
    REQUIRE(p.restart());
    CHECK(all(p).size() == total);
}

} // namespace test_audit
} // namespace
