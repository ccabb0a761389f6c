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

// What caps leave now: the smallest of cap - spent in its window - held, over the caps that are set.
Micro room_under_caps(const std::optional<Micro>& day, const std::optional<Micro>& week, Micro spent_day,
                      Micro spent_week, Micro held) {
    Micro room = k_unlimited;
    if (day) {
        room = std::min(room, *day - spent_day - held);
    }
    if (week) {
        room = std::min(room, *week - spent_week - held);
    }
    return room;
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

std::optional<std::int64_t> Coordinator::team_caps_room(TeamId team, std::int64_t now) const {
    const TeamRecord& t = m_tokens.teams().at(team);
    if (!t.budget_day_micro && !t.budget_week_micro) {
        return std::nullopt;
    }
    return room_under_caps(t.budget_day_micro, t.budget_week_micro, m_ledger.spent_since(team.value(), now - k_day_ms),
                           m_ledger.spent_since(team.value(), now - k_week_ms), m_ledger.held_by_team(team.value()));
}

std::int64_t Coordinator::budget_room(TeamId team, std::int64_t now) const {
    const Micro balance = m_ledger.balance(credits::Account::of_team(team.value()));
    return std::min(balance, team_caps_room(team, now).value_or(k_unlimited));
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
        out.spent_day_micro = m_ledger.spent_since(id->value(), now - k_day_ms);
        out.spent_week_micro = m_ledger.spent_since(id->value(), now - k_week_ms);
        out.held_micro = m_ledger.held_by_team(id->value());
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
    return member_budget(t, now);
}

MemberBudget Coordinator::member_budget(const TokenRecord& token, std::int64_t now) const {
    MemberBudget b;
    b.token_id = token.id;
    b.label = token.label;
    b.day_micro = token.budget_day_micro;
    b.week_micro = token.budget_week_micro;
    // The member's attempts: those of the jobs in the sweeps it submitted. Linear in the attempts
    // held in memory, and only for members with caps.
    for (const auto& [aid, a] : m_attempts) {
        const JobRecord& j = m_jobs.at(a.job);
        if (m_sweeps.at(j.sweep_id).submitter_token != token.id) {
            continue;
        }
        b.held_micro += m_ledger.held(aid.value());
        if (a.ended_at) {
            const Micro charged = m_ledger.charged(aid.value());
            b.spent_day_micro += *a.ended_at >= now - k_day_ms ? charged : 0;
            b.spent_week_micro += *a.ended_at >= now - k_week_ms ? charged : 0;
        }
    }
    return b;
}

std::optional<std::int64_t> Coordinator::member_room(TokenId token_id, std::int64_t now) const {
    const TokenRecord* t = m_tokens.token(token_id);
    if (t == nullptr || (!t->budget_day_micro && !t->budget_week_micro)) {
        return std::nullopt;
    }
    const MemberBudget b = member_budget(*t, now);
    return room_under_caps(b.day_micro, b.week_micro, b.spent_day_micro, b.spent_week_micro, b.held_micro);
}

std::string Coordinator::member_can_hold(TokenId token_id, std::int64_t left, std::int64_t placing,
                                         std::int64_t now) const {
    const TokenRecord* t = m_tokens.token(token_id);
    if (t == nullptr) {
        return {};
    }
    const MemberBudget b = member_budget(*t, now);
    const Micro shown = std::max<Micro>(left, 0);
    std::string out = "member `" + b.label + "` can hold " + format_credits(shown) +
                      (shown == 1'000'000 ? " credit" : " credits") + " now (";
    if (b.day_micro) {
        out += "budget " + format_credits(*b.day_micro) + "/day, " +
               format_credits(b.spent_day_micro + b.held_micro + placing) + " spent or held";
    }
    if (b.week_micro) {
        out += std::string(b.day_micro ? "; " : "") + "budget " + format_credits(*b.week_micro) + "/week, " +
               format_credits(b.spent_week_micro + b.held_micro + placing) + " spent or held";
    }
    return out + ")";
}

} // namespace gpupool::coordinator
