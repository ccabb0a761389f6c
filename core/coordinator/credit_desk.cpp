#include "core/coordinator/credit_desk.hpp"

#include "core/coordinator/internal.hpp"

#include <algorithm>
#include <cassert>

namespace gpupool::coordinator {

using namespace gpupool::store;
using namespace gpupool::coordinator::detail;

namespace {

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

} // namespace

std::int64_t CreditDesk::next_entry_id(const Changes& changes) const {
    return m_ledger.next_id() + static_cast<std::int64_t>(changes.ledger.size());
}

// ---- budgets ------------------------------------------------------------------------------------

std::optional<std::int64_t> CreditDesk::team_caps_room(TeamId team, std::int64_t now) const {
    const TeamRecord& t = m_tokens->teams().at(team);
    if (!t.budget_day_micro && !t.budget_week_micro) {
        return std::nullopt;
    }
    return room_under_caps(t.budget_day_micro, t.budget_week_micro, m_ledger.spent_since(team.value(), now - k_day_ms),
                           m_ledger.spent_since(team.value(), now - k_week_ms), m_ledger.held_by_team(team.value()));
}

std::int64_t CreditDesk::budget_room(TeamId team, std::int64_t now) const {
    const Micro balance = m_ledger.balance(credits::Account::of_team(team.value()));
    return std::min(balance, team_caps_room(team, now).value_or(k_unlimited));
}

MemberBudget CreditDesk::member_budget(const TokenRecord& token, std::int64_t now) const {
    MemberBudget b;
    b.token_id = token.id;
    b.label = token.label;
    b.day_micro = token.budget_day_micro;
    b.week_micro = token.budget_week_micro;
    // The member's attempts: those of the jobs in the sweeps it submitted. Linear in the attempts
    // held in memory, and only for members with caps.
    for (const auto& [aid, a] : m_jobs->attempts()) {
        const JobRecord& j = m_jobs->jobs().at(a.job);
        if (m_jobs->sweeps().at(j.sweep_id).submitter_token != token.id) {
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

std::optional<std::int64_t> CreditDesk::member_room(TokenId token, std::int64_t now) const {
    const TokenRecord* t = m_tokens->token(token);
    if (t == nullptr || (!t->budget_day_micro && !t->budget_week_micro)) {
        return std::nullopt;
    }
    const MemberBudget b = member_budget(*t, now);
    return room_under_caps(b.day_micro, b.week_micro, b.spent_day_micro, b.spent_week_micro, b.held_micro);
}

std::string CreditDesk::team_can_hold(TeamId team, Micro left, std::int64_t now) const {
    const TeamRecord& t = m_tokens->teams().at(team);
    std::string out = "team `" + t.name + "` can hold " + credits_text(std::max<Micro>(left, 0)) + " now (balance " +
                      format_credits(m_ledger.balance(credits::Account::of_team(team.value())));
    const Micro held = m_ledger.held_by_team(team.value());
    if (t.budget_day_micro) {
        out += "; budget " + format_credits(*t.budget_day_micro) + "/day, " +
               format_credits(m_ledger.spent_since(team.value(), now - k_day_ms) + held) + " spent or held";
    }
    if (t.budget_week_micro) {
        out += "; budget " + format_credits(*t.budget_week_micro) + "/week, " +
               format_credits(m_ledger.spent_since(team.value(), now - k_week_ms) + held) + " spent or held";
    }
    return out + ")";
}

std::string CreditDesk::member_can_hold(TokenId token, std::int64_t left, std::int64_t placing,
                                        std::int64_t now) const {
    const TokenRecord* t = m_tokens->token(token);
    if (t == nullptr) {
        return {};
    }
    const MemberBudget b = member_budget(*t, now);
    std::string out = "member `" + b.label + "` can hold " + credits_text(std::max<Micro>(left, 0)) + " now (";
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

// ---- costs --------------------------------------------------------------------------------------

std::int64_t CreditDesk::cost_micro(const AttemptRecord& a, std::int64_t now) const {
    if (a.ended_at) {
        return m_ledger.charged(a.id.value());
    }
    if (!a.started_at) {
        return 0;
    }
    const Micro accrued = credits::cost_of(a.price_micro_per_hour, now - *a.started_at);
    return std::min(accrued, m_ledger.held(a.id.value()));
}

std::int64_t CreditDesk::job_cost_micro(JobId job, std::int64_t now) const {
    std::int64_t total = 0;
    for (AttemptId id : m_jobs->attempt_ids_of(job)) {
        total += cost_micro(m_jobs->attempts().at(id), now);
    }
    return total;
}

std::int64_t CreditDesk::held_micro(JobId job) const {
    const auto& latest = m_jobs->latest_attempt();
    auto it = latest.find(job);
    return it == latest.end() ? 0 : m_ledger.held(it->second.value());
}

std::pair<std::int64_t, std::int64_t> CreditDesk::history(TeamId team, const std::string& source) const {
    const auto& runs = m_jobs->runtimes_by_source();
    auto it = runs.find({team, source});
    if (it == runs.end() || it->second.empty()) {
        return {0, 0};
    }
    return {median_of(it->second), static_cast<std::int64_t>(it->second.size())};
}

// ---- staging ------------------------------------------------------------------------------------

void CreditDesk::stage_balances(Changes& changes) const {
    std::map<credits::Account, Micro> touched;
    for (const auto& e : changes.ledger) {
        touched.try_emplace(e.debit, m_ledger.balance(e.debit)).first->second -= e.amount;
        touched.try_emplace(e.credit, m_ledger.balance(e.credit)).first->second += e.amount;
    }
    for (const auto& [account, balance] : touched) {
        changes.balances.push_back({account, balance});
    }
}

void CreditDesk::stage_settlement(const AttemptRecord& attempt, TeamId payer, TeamId provider, bool chargeable,
                                  std::int64_t runtime_ms, std::int64_t now, Changes& changes) const {
    const std::int64_t aid = attempt.id.value();
    if (!m_ledger.has_hold(aid) || m_ledger.closed(aid)) {
        return;
    }
    assert(std::none_of(changes.ledger.begin(), changes.ledger.end(),
                        [&](const credits::Entry& e) { return e.attempt == aid; }));
    const auto s = credits::settle(m_ledger.held(aid), credits::cost_of(attempt.price_micro_per_hour, runtime_ms),
                                   chargeable, m_options->pool_fee_ppm, provider == payer);
    // Another team's earnings settle first (so a lying worker's results can still be voided).
    const bool settle_later = m_options->settle_ms > 0 && provider != payer;
    auto entries = credits::Ledger::settlement_entries(next_entry_id(changes), now, aid, payer.value(),
                                                       provider.value(), s, settle_later);
    changes.ledger.insert(changes.ledger.end(), entries.begin(), entries.end());
}

void CreditDesk::stage_check_pay(const AttemptRecord& attempt, TeamId payer, TeamId provider, bool chargeable,
                                 std::int64_t runtime_ms, std::int64_t max_runtime_ms, std::int64_t now,
                                 Changes& changes) const {
    const Micro pay = credits::cost_of(attempt.price_micro_per_hour, std::min(runtime_ms, max_runtime_ms));
    if (!chargeable || pay <= 0) {
        return;
    }
    changes.ledger.push_back(credits::Ledger::check_pay_entry(next_entry_id(changes), now, attempt.id.value(),
                                                              payer.value(), provider.value(), pay));
}

void CreditDesk::stage_payouts(std::int64_t now, Changes& c) const {
    if (m_options->settle_ms <= 0) {
        return;
    }
    for (std::int64_t attempt : m_ledger.settling_due(now - m_options->settle_ms)) {
        if (auto e = m_ledger.payout_entry(next_entry_id(c), now, attempt)) {
            c.ledger.push_back(*e);
        }
    }
}

void CreditDesk::stage_grant_expiries(std::int64_t now, Changes& c) const {
    for (const auto& [id, g] : m_grants) {
        if (g.expired_at || !g.expires_at || *g.expires_at > now) {
            continue;
        }
        GrantRecord done = g;
        done.expired_at = now;
        c.grants.push_back(done);
        // What is left of it: up to the team's positive balance (spending is not traced per grant).
        const Micro left = std::min(g.amount, m_ledger.balance(credits::Account::of_team(g.team.value())));
        if (left > 0) {
            credits::Entry e;
            e.id = next_entry_id(c);
            e.at_ms = now;
            e.debit = credits::Account::of_team(g.team.value());
            e.credit = credits::Account::issuer();
            e.amount = left;
            e.reason = credits::EntryReason::expiry;
            e.grant = g.id;
            e.note = "grant " + std::to_string(g.id) + " expired";
            c.ledger.push_back(e);
        }
    }
}

Result<GrantRecord> CreditDesk::stage_grant(TeamId team, std::int64_t amount_micro,
                                            std::optional<std::int64_t> expires_at, const std::string& note,
                                            std::int64_t now, Changes& c) const {
    if (amount_micro <= 0 || amount_micro > credits::k_max_amount) {
        return invalid("a grant is a positive amount", "amount_micro");
    }
    if (expires_at && *expires_at <= now) {
        return invalid("the expiry date is in the past", "expires_at");
    }
    credits::Entry e;
    e.id = next_entry_id(c);
    e.at_ms = now;
    e.debit = credits::Account::issuer();
    e.credit = credits::Account::of_team(team.value());
    e.amount = amount_micro;
    e.reason = credits::EntryReason::grant;
    e.grant = e.id;
    e.note = note;
    c.ledger.push_back(e);
    GrantRecord g{e.id, team, amount_micro, expires_at, note, now, std::nullopt};
    c.grants.push_back(g);
    return g;
}

Result<credits::Entry> CreditDesk::stage_adjustment(TeamId team, std::int64_t amount_micro, const std::string& note,
                                                    std::int64_t now, Changes& c) const {
    if (amount_micro == 0 || amount_micro > credits::k_max_amount || amount_micro < -credits::k_max_amount) {
        return invalid("an adjustment is a non-zero amount", "amount_micro");
    }
    if (note.empty()) {
        return invalid("say why: an adjustment needs a note", "note");
    }
    credits::Entry e;
    e.id = next_entry_id(c);
    e.at_ms = now;
    const auto t = credits::Account::of_team(team.value());
    e.debit = amount_micro > 0 ? credits::Account::issuer() : t;
    e.credit = amount_micro > 0 ? t : credits::Account::issuer();
    e.amount = amount_micro > 0 ? amount_micro : -amount_micro;
    e.reason = credits::EntryReason::adjustment;
    e.note = note;
    c.ledger.push_back(e);
    return e;
}

// ---- learning of commits ------------------------------------------------------------------------

Status CreditDesk::load(const std::vector<credits::Entry>& entries, const std::vector<BalanceRecord>& cached_rows) {
    for (const auto& e : entries) {
        if (auto why = m_ledger.check(e)) {
            return make_error(ErrorCode::io, "credits ledger: entry " + std::to_string(e.id) + " breaks a rule (" +
                                                 *why + "); refusing to start");
        }
        m_ledger.apply(e);
    }
    std::map<credits::Account, Micro> cached;
    for (const auto& b : cached_rows) {
        cached[b.account] = b.balance;
    }
    if (auto why = m_ledger.verify(cached)) {
        return make_error(ErrorCode::io, "credits ledger: " + *why +
                                             "; refusing to start: the cached balances disagree with the ledger rows "
                                             "(restore a backup of the database, or investigate)");
    }
    return {};
}

void CreditDesk::absorb(const Changes& changes) {
    for (const auto& g : changes.grants) {
        m_grants[g.id] = g;
    }
    for (const auto& e : changes.ledger) {
        assert(!m_ledger.check(e));
        m_ledger.apply(e);
    }
}

std::optional<std::string> CreditDesk::first_difference(const CreditDesk& rebuilt) const {
    const auto& mine = m_ledger.entries();
    const auto& theirs = rebuilt.m_ledger.entries();
    for (std::size_t i = 0; i < std::min(mine.size(), theirs.size()); ++i) {
        if (!(mine[i] == theirs[i])) {
            return "ledger entry " + std::to_string(theirs[i].id) + " differs";
        }
    }
    if (mine.size() != theirs.size()) {
        return "ledger: " + std::to_string(mine.size()) + " entries kept, " + std::to_string(theirs.size()) +
               " in the store";
    }
    if (m_ledger.balances() != rebuilt.m_ledger.balances()) {
        return std::string("ledger balances differ");
    }
    if (m_grants != rebuilt.m_grants) {
        return "grants: " + std::to_string(m_grants.size()) + " kept, " + std::to_string(rebuilt.m_grants.size()) +
               " in the store, or one differs";
    }
    return std::nullopt;
}

} // namespace gpupool::coordinator
