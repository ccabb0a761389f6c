// Budgets: spend caps of a team and of its members (Coordinator's budget methods).
//
// A team's caps bound what all of its jobs spend and hold over a rolling day and week. A member's
// caps (on a member token) bound what the jobs that token submitted spend and hold, within the
// team's: a job waits when either is used up, and its waiting reason names the one that binds.
#include "core/coordinator/coordinator.hpp"
#include "core/coordinator/internal.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>

namespace gpupool::coordinator {

using namespace gpupool::store;
using namespace gpupool::coordinator::detail;

namespace {

// A budget as the audit log records it: the caps after the change (null: none).
std::string budget_detail(const std::optional<std::int64_t>& day, const std::optional<std::int64_t>& week) {
    return nlohmann::json{{"day_micro", day ? nlohmann::json(*day) : nlohmann::json()},
                          {"week_micro", week ? nlohmann::json(*week) : nlohmann::json()}}
        .dump();
}

std::optional<std::int64_t> applied(const CapChange& change, const std::optional<std::int64_t>& now) {
    switch (change.kind) {
    case CapChange::Kind::keep:
        return now;
    case CapChange::Kind::remove:
        return std::nullopt;
    case CapChange::Kind::set:
        return change.micro;
    }
    return now;
}

} // namespace

Status Coordinator::set_budget(const Principal& who, const std::string& team, std::optional<std::int64_t> day_micro,
                               std::optional<std::int64_t> week_micro) {
    BudgetChange change{team};
    change.day = day_micro ? CapChange::set(*day_micro) : CapChange::remove();
    change.week = week_micro ? CapChange::set(*week_micro) : CapChange::remove();
    auto r = change_budget(who, change);
    return r ? Status{} : Status(r.error());
}

Result<MemberBudget> Coordinator::change_budget(const Principal& who, const BudgetChange& change) {
    if (who.role != Role::admin) {
        return denied("only admins set budgets");
    }
    auto id = m_tokens.team_named(change.team);
    if (!id) {
        return id.error();
    }
    for (const auto& [cap, field] : {std::pair{&change.day, "day_micro"}, std::pair{&change.week, "week_micro"}}) {
        if (cap->kind == CapChange::Kind::set && cap->micro < 0) {
            return make_error(ErrorCode::invalid_input, "a budget is 0 or more", field);
        }
    }
    Changes c;
    const std::int64_t now = m_clock.now_ms();
    if (change.member.empty()) {
        TeamRecord t = m_tokens.teams().at(*id);
        t.budget_day_micro = applied(change.day, t.budget_day_micro);
        t.budget_week_micro = applied(change.week, t.budget_week_micro);
        c.teams.push_back(t);
        audit(who.token_id, "budget.team", "team `" + change.team + "`",
              budget_detail(t.budget_day_micro, t.budget_week_micro), c);
        if (auto st = commit(c); !st) {
            return st.error();
        }
        MemberBudget out;
        out.day_micro = t.budget_day_micro;
        out.week_micro = t.budget_week_micro;
        out.spent_day_micro = m_credits.ledger().spent_since(id->value(), now - k_day_ms);
        out.spent_week_micro = m_credits.ledger().spent_since(id->value(), now - k_week_ms);
        out.held_micro = m_credits.ledger().held_by_team(id->value());
        return out;
    }
    auto token = m_tokens.member_token(*id, change.member);
    if (!token) {
        return token.error();
    }
    TokenRecord t = **token;
    t.budget_day_micro = applied(change.day, t.budget_day_micro);
    t.budget_week_micro = applied(change.week, t.budget_week_micro);
    c.tokens.push_back(t);
    audit(who.token_id, "budget.member",
          "member token " + std::to_string(t.id.value()) + " `" + t.label + "` of team `" + change.team + "`",
          budget_detail(t.budget_day_micro, t.budget_week_micro), c);
    if (auto st = commit(c); !st) {
        return st.error();
    }
    return m_credits.member_budget(t, now);
}

} // namespace gpupool::coordinator
