#include "core/coordinator/coordinator.hpp"

#include "core/coordinator/auth.hpp"
#include "core/coordinator/internal.hpp"
#include "core/resources/quantity.hpp"

#include <algorithm>
#include <iterator>
#include <cassert>
#include <limits>

namespace gpupool::coordinator {

using namespace gpupool::store;

using namespace gpupool::coordinator::detail;

namespace {

Error fenced(AttemptId id, const std::string& why) {
    return make_error(ErrorCode::conflict,
                      "attempt " + std::to_string(id.value()) + " is no longer current (" + why + "); refused");
}

bool is_active(AttemptState s) { return s == AttemptState::assigned || s == AttemptState::running; }

// Reads the worker's registered inventory: GPUs, CPU, RAM. Bad fields were refused at register.
void parse_inventory(const nlohmann::json& inv, std::vector<sched::Gpu>& gpus, std::vector<std::string>& models,
                     std::int64_t& cpu_milli, std::int64_t& memory_mib, std::int64_t& slots) {
    gpus.clear();
    models.clear();
    cpu_milli = inv.value("cpu_milli", std::int64_t{0});
    memory_mib = inv.value("memory_mib", std::int64_t{0});
    slots = inv.value("slots", std::int64_t{0});
    if (inv.contains("gpus") && inv["gpus"].is_array()) {
        for (const auto& g : inv["gpus"]) {
            sched::Gpu gpu;
            gpu.memory_mib = g.value("memory_mib", std::int64_t{0});
            gpus.push_back(gpu);
            models.push_back(g.value("model", std::string("unknown")));
        }
    }
}

Status validate_inventory(const nlohmann::json& inv) {
    if (!inv.is_object()) {
        return invalid("expected an object", "inventory");
    }
    auto positive_int = [&](const char* key) -> Status {
        auto it = inv.find(key);
        if (it == inv.end() || !it->is_number_integer() || it->get<std::int64_t>() <= 0) {
            return invalid("expected a positive integer", std::string("inventory.") + key);
        }
        return {};
    };
    if (auto st = positive_int("cpu_milli"); !st) {
        return st;
    }
    if (auto st = positive_int("memory_mib"); !st) {
        return st;
    }
    if (auto it = inv.find("slots");
        it != inv.end() && (!it->is_number_integer() || it->get<std::int64_t>() < 0)) {
        return invalid("expected a non-negative integer (0: no cap)", "inventory.slots");
    }
    if (inv.contains("gpus")) {
        if (!inv["gpus"].is_array()) {
            return invalid("expected an array", "inventory.gpus");
        }
        for (std::size_t i = 0; i < inv["gpus"].size(); ++i) {
            const auto& g = inv["gpus"][i];
            std::string field = "inventory.gpus[" + std::to_string(i) + "]";
            if (!g.is_object() || !g.contains("memory_mib") || !g["memory_mib"].is_number_integer() ||
                g["memory_mib"].get<std::int64_t>() <= 0) {
                return invalid("expected {model, memory_mib > 0}", field + ".memory_mib");
            }
            if (!g.contains("model") || !g["model"].is_string()) {
                return invalid("expected a string", field + ".model");
            }
        }
    }
    return {};
}

std::string no_team_message(const std::string& name) {
    return "no team named `" + name + "`; create it first (`gpupool admin team create " + name +
           "`) or see `gpupool admin team list`";
}

} // namespace

Coordinator::Coordinator(Store& store, const Clock& clock, CoordinatorOptions options)
    : m_store(store), m_clock(clock), m_options(std::move(options)),
      m_usage(m_options.policy.ordering.half_life_s) {}

void Coordinator::record_usage(const AttemptRecord& a) {
    if (!a.started_at || !a.ended_at || a.gpu_milli <= 0) {
        return;
    }
    const double seconds = static_cast<double>(*a.ended_at - *a.started_at) / 1000.0;
    const double gpu_seconds = seconds * static_cast<double>(a.gpu_milli) / 1000.0;
    m_usage.record(m_jobs.at(a.job).team, gpu_seconds, *a.ended_at / 1000);
}

// ---- persistence --------------------------------------------------------------------------------

Status Coordinator::commit(Changes& changes) {
    // The cached balance of every account the new entries move, written in the same transaction.
    std::map<credits::Account, Micro> touched;
    for (const auto& e : changes.ledger) {
        touched.try_emplace(e.debit, m_ledger.balance(e.debit)).first->second -= e.amount;
        touched.try_emplace(e.credit, m_ledger.balance(e.credit)).first->second += e.amount;
    }
    for (const auto& [account, balance] : touched) {
        changes.balances.push_back({account, balance});
    }
    if (auto st = m_store.apply(changes); !st) {
        return st;
    }
    std::vector<AttemptRecord> newly_ended;
    for (const auto& a : changes.attempts) {
        auto old = m_attempts.find(a.id);
        if (a.ended_at && (old == m_attempts.end() || !old->second.ended_at)) {
            newly_ended.push_back(a);
        }
    }
    // Only now does memory change: it never holds anything the store does not.
    absorb(changes);
    for (const auto& a : newly_ended) {
        record_usage(a);
    }
    changes = Changes{};
    return {};
}

void Coordinator::absorb(const Changes& changes) {
    for (const auto& t : changes.teams) {
        m_teams[t.id] = t;
        m_next_team = std::max(m_next_team, t.id.value() + 1);
    }
    for (const auto& t : changes.tokens) {
        m_tokens[t.hash] = t;
        m_token_hash_by_id[t.id] = t.hash;
        m_next_token = std::max(m_next_token, t.id + 1);
    }
    for (const auto& w : changes.workers) {
        auto& live = m_workers[w.id];
        live.record = w;
        auto inv = nlohmann::json::parse(w.inventory_json, nullptr, false);
        parse_inventory(inv, live.gpus, live.gpu_models, live.cpu_milli, live.memory_mib, live.slots);
        m_next_worker = std::max(m_next_worker, w.id.value() + 1);
    }
    for (const auto& sw : changes.sweeps) {
        m_sweeps[sw.id] = sw;
        if (!sw.idempotency_key.empty()) {
            m_sweep_by_key[{sw.team, sw.idempotency_key}] = sw.id;
        }
        m_next_sweep = std::max(m_next_sweep, sw.id + 1);
    }
    for (const auto& j : changes.jobs) {
        m_jobs[j.id] = j;
        if (j.state == JobState::queued) {
            m_queued_jobs.insert(j.id);
        } else {
            m_queued_jobs.erase(j.id);
        }
        m_next_job = std::max(m_next_job, j.id.value() + 1);
    }
    for (const auto& a : changes.attempts) {
        if (m_attempts.insert_or_assign(a.id, a).second) {
            auto& ids = m_attempts_by_job[a.job];
            ids.insert(std::upper_bound(ids.begin(), ids.end(), a.id), a.id);
        }
        if (is_active(a.state)) {
            m_active_attempts.insert(a.id);
        } else {
            m_active_attempts.erase(a.id);
        }
        auto& latest = m_latest_attempt[a.job];
        latest = std::max(latest, a.id);
        m_next_attempt = std::max(m_next_attempt, a.id.value() + 1);
    }
    for (const auto& g : changes.grants) {
        m_grants[g.id] = g;
    }
    for (const auto& e : changes.ledger) {
        assert(!m_ledger.check(e));
        m_ledger.apply(e);
    }
}

Status Coordinator::start() {
    auto snap = m_store.load();
    if (!snap) {
        return snap.error();
    }
    // The ledger first: rebuild every balance from the rows and compare with the cached ones.
    for (const auto& e : snap->ledger) {
        if (auto why = m_ledger.check(e)) {
            return make_error(ErrorCode::io, "credits ledger: entry " + std::to_string(e.id) + " breaks a rule (" + *why +
                                                 "); refusing to start");
        }
        m_ledger.apply(e);
    }
    snap->ledger.clear();
    std::map<credits::Account, Micro> cached;
    for (const auto& b : snap->balances) {
        cached[b.account] = b.balance;
    }
    if (auto why = m_ledger.verify(cached)) {
        return make_error(ErrorCode::io, "credits ledger: " + *why +
                                             "; refusing to start: the cached balances disagree with the ledger rows "
                                             "(restore a backup of the database, or investigate)");
    }
    absorb(*snap); // the store already holds all of it
    std::vector<const AttemptRecord*> ended;
    for (const auto& [id, a] : m_attempts) {
        if (a.ended_at) {
            ended.push_back(&a);
        }
    }
    std::sort(ended.begin(), ended.end(), [](const AttemptRecord* x, const AttemptRecord* y) {
        return *x->ended_at < *y->ended_at;
    });
    for (const AttemptRecord* a : ended) {
        record_usage(*a);
    }
    // While the coordinator was down no worker could renew a lease: give every live attempt a
    // fresh one, so that a restart does not by itself lose work that went on running.
    Changes renewed;
    const std::int64_t now = m_clock.now_ms();
    for (AttemptId id : m_active_attempts) {
        const AttemptRecord& a = m_attempts.at(id);
        if (a.lease_expires_at < now + m_options.lease_ms) {
            AttemptRecord copy = a;
            copy.lease_expires_at = now + m_options.lease_ms;
            renewed.attempts.push_back(copy);
        }
    }
    return renewed.attempts.empty() ? Status{} : commit(renewed);
}

// ---- auth ---------------------------------------------------------------------------------------

Result<Principal> Coordinator::authenticate(std::string_view bearer_secret) const {
    if (bearer_secret.empty()) {
        return make_error(ErrorCode::unauthorized, "missing token: send `Authorization: Bearer <token>`");
    }
    auto it = m_tokens.find(sha256_hex(bearer_secret));
    if (it == m_tokens.end() || it->second.revoked_at) {
        return make_error(ErrorCode::unauthorized, "unknown or revoked token");
    }
    const TokenRecord& t = it->second;
    if (t.worker) {
        auto w = m_workers.find(*t.worker);
        if (w != m_workers.end() && w->second.record.state == WorkerState::banned) {
            return make_error(ErrorCode::forbidden, "this worker is banned from the pool");
        }
    }
    m_token_last_used[t.id] = m_clock.now_ms();
    return Principal{t.role, t.team, t.worker, t.id};
}

Result<std::vector<TokenRecord>> Coordinator::list_tokens(const Principal& who,
                                                          const std::optional<std::string>& team) const {
    if (who.role != Role::admin) {
        return denied("only admins list tokens");
    }
    std::optional<TeamId> only;
    if (team) {
        auto t = team_named(*team);
        if (!t) {
            return t.error();
        }
        only = *t;
    }
    std::vector<TokenRecord> out;
    for (const auto& [hash, t] : m_tokens) {
        if (!only || t.team == only) {
            out.push_back(t);
            out.back().hash.clear();
        }
    }
    std::sort(out.begin(), out.end(), [](const TokenRecord& a, const TokenRecord& b) { return a.id < b.id; });
    return out;
}

std::optional<std::int64_t> Coordinator::last_used(std::int64_t token_id) const {
    auto it = m_token_last_used.find(token_id);
    return it == m_token_last_used.end() ? std::nullopt : std::optional<std::int64_t>(it->second);
}

bool Coordinator::has_admin() const {
    return std::any_of(m_tokens.begin(), m_tokens.end(),
                       [](const auto& kv) { return kv.second.role == Role::admin && !kv.second.revoked_at; });
}

Result<IssuedToken> Coordinator::issue(Role role, std::optional<TeamId> team, std::optional<WorkerId> worker,
                                       const std::string& label, Changes& changes) {
    auto secret = new_token_secret();
    if (!secret) {
        return secret.error();
    }
    TokenRecord t;
    t.id = m_next_token + static_cast<std::int64_t>(changes.tokens.size());
    t.hash = sha256_hex(*secret);
    t.role = role;
    t.team = team;
    t.worker = worker;
    t.label = label;
    t.created_at = m_clock.now_ms();
    changes.tokens.push_back(t);
    return IssuedToken{t.id, *secret, role, team};
}

Result<IssuedToken> Coordinator::recover_admin(const std::string& label) {
    Changes c;
    auto tok = issue(Role::admin, std::nullopt, std::nullopt, label, c);
    if (!tok) {
        return tok;
    }
    if (auto st = commit(c); !st) {
        return st.error();
    }
    return tok;
}

Result<IssuedToken> Coordinator::init_admin() {
    if (has_admin()) {
        return make_error(ErrorCode::conflict, "the pool already has an admin token");
    }
    return recover_admin("first admin");
}

// ---- admin --------------------------------------------------------------------------------------

Result<TeamRecord> Coordinator::create_team(const Principal& who, const std::string& name, std::int64_t weight) {
    if (who.role != Role::admin) {
        return denied("only admins create teams");
    }
    if (name.empty() || name.size() > 64 ||
        !std::all_of(name.begin(), name.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-' || c == '_'; })) {
        return invalid("team names are 1-64 letters, digits, - and _", "name");
    }
    if (weight < 1 || weight > 1000) {
        return invalid("weight must be from 1 to 1000", "weight");
    }
    for (const auto& [id, t] : m_teams) {
        if (t.name == name) {
            return make_error(ErrorCode::conflict, "team `" + name + "` already exists", "name");
        }
    }
    Changes c;
    TeamRecord t{TeamId(m_next_team), name, weight, m_clock.now_ms(), std::nullopt, std::nullopt};
    c.teams.push_back(t);
    if (auto st = commit(c); !st) {
        return st.error();
    }
    return t;
}

Result<std::vector<TeamRecord>> Coordinator::list_teams(const Principal& who) const {
    std::vector<TeamRecord> out;
    for (const auto& [id, t] : m_teams) {
        if (who.role == Role::admin || (who.team && *who.team == id)) {
            out.push_back(t);
        }
    }
    return out;
}

Result<IssuedToken> Coordinator::create_token(const Principal& who, Role role, const std::string& team,
                                              const std::string& label, std::int64_t uses) {
    if (who.role != Role::admin) {
        return denied("only admins create tokens");
    }
    if (uses < 1 || uses > k_max_enroll_uses) {
        return invalid("an enrollment token registers 1 to " + std::to_string(k_max_enroll_uses) + " workers", "uses");
    }
    if (label.size() > k_max_label_chars) {
        return invalid("labels are at most " + std::to_string(k_max_label_chars) + " characters", "label");
    }
    if (role == Role::worker) {
        return invalid("worker tokens are issued when a worker registers with an enrollment token", "role");
    }
    std::optional<TeamId> team_id;
    if (role != Role::admin) {
        auto it = std::find_if(m_teams.begin(), m_teams.end(), [&](const auto& kv) { return kv.second.name == team; });
        if (it == m_teams.end()) {
            return make_error(ErrorCode::not_found, no_team_message(team), "team");
        }
        team_id = it->first;
    }
    Changes c;
    auto tok = issue(role, team_id, std::nullopt, label, c);
    if (!tok) {
        return tok;
    }
    if (role == Role::enroll) {
        c.tokens.back().uses_left = uses;
    }
    if (auto st = commit(c); !st) {
        return st.error();
    }
    return tok;
}

std::int64_t Coordinator::log_cap(const recipe::JobSpec& spec) const {
    return spec.logs.max_size_mib > 0 ? spec.logs.max_size_mib * 1024 * 1024 : m_options.max_log_bytes;
}

std::int64_t Coordinator::log_head_bytes(std::int64_t cap) {
    return std::min(k_log_head_bytes, cap / 2);
}

const TokenRecord* Coordinator::token_by_id(std::int64_t id) const {
    auto hash = m_token_hash_by_id.find(id);
    if (hash == m_token_hash_by_id.end()) {
        return nullptr;
    }
    auto it = m_tokens.find(hash->second);
    return it == m_tokens.end() ? nullptr : &it->second;
}

Status Coordinator::revoke_token(const Principal& who, std::int64_t token_id) {
    if (who.role != Role::admin) {
        return denied("only admins revoke tokens");
    }
    for (const auto& [hash, t] : m_tokens) {
        if (t.id == token_id) {
            Changes c;
            TokenRecord copy = t;
            copy.revoked_at = m_clock.now_ms();
            c.tokens.push_back(copy);
            return commit(c);
        }
    }
    return not_found("no token " + std::to_string(token_id));
}

Result<std::vector<WorkerRecord>> Coordinator::list_workers(const Principal& who) const {
    std::vector<WorkerRecord> out;
    for (const auto& [id, w] : m_workers) {
        if (who.role == Role::admin || (who.role == Role::member && who.team && *who.team == w.record.team)) {
            out.push_back(w.record);
        }
    }
    if (who.role != Role::admin && who.role != Role::member) {
        return denied("workers are listed by admins and team members");
    }
    return out;
}

std::string Coordinator::presence(WorkerId worker) const {
    const LiveWorker& w = m_workers.at(worker);
    if (w.record.state == WorkerState::banned) {
        return "banned";
    }
    if (m_clock.now_ms() - w.record.last_seen_at > m_options.worker_timeout_ms) {
        return "offline";
    }
    if (w.record.state == WorkerState::draining) {
        return "drained";
    }
    if (w.draining) {
        return "draining";
    }
    return w.paused ? "paused" : "online";
}

std::string Coordinator::team_name(TeamId team) const {
    auto it = m_teams.find(team);
    return it == m_teams.end() ? std::to_string(team.value()) : it->second.name;
}

Status Coordinator::set_worker_state(const Principal& who, WorkerId worker, WorkerState state) {
    if (who.role != Role::admin) {
        return denied("only admins drain or ban workers");
    }
    if (m_workers.count(worker) == 0) {
        return not_found("no worker " + std::to_string(worker.value()));
    }
    Changes c;
    worker_state_changes(worker, state, c);
    return commit(c);
}

void Coordinator::worker_state_changes(WorkerId worker, WorkerState state, Changes& c) {
    WorkerRecord w = m_workers.at(worker).record;
    w.state = state;
    c.workers.push_back(w);
    if (state == WorkerState::banned) {
        // The ban sticks to the owner: the enrollment token the worker came in with is revoked, so
        // registering again with it fails.
        if (w.enrolled_by) {
            if (const TokenRecord* enrollment = token_by_id(*w.enrolled_by); enrollment != nullptr && !enrollment->revoked_at) {
                TokenRecord revoked = *enrollment;
                revoked.revoked_at = m_clock.now_ms();
                c.tokens.push_back(revoked);
            }
        }
        for (AttemptId id : m_active_attempts) {
            const AttemptRecord& a = m_attempts.at(id);
            if (a.worker == worker) {
                AttemptRecord copy = a;
                end_attempt(copy, AttemptState::lost, std::nullopt, "worker banned", c);
            }
        }
    }
}

Result<Voided> Coordinator::ban_worker(const Principal& who, WorkerId worker, std::optional<std::int64_t> void_since) {
    if (who.role != Role::admin) {
        return denied("only admins drain or ban workers");
    }
    if (m_workers.count(worker) == 0) {
        return not_found("no worker " + std::to_string(worker.value()));
    }
    Voided out;
    Changes c;
    if (void_since) {
        // Before the ban ends the worker's running attempts (as lost: nothing to void in them).
        void_results(worker, *void_since, out, c);
    }
    worker_state_changes(worker, WorkerState::banned, c);
    if (auto st = commit(c); !st) {
        return st.error();
    }
    return out;
}

void Coordinator::void_results(WorkerId worker, std::int64_t since_ms, Voided& out, Changes& c) {
    const std::int64_t now = m_clock.now_ms();
    const std::string note = "voided: worker " + std::to_string(worker.value()) + " was banned";
    for (const auto& [id, attempt] : m_attempts) {
        if (attempt.worker != worker || !attempt.ended_at || *attempt.ended_at < since_ms || attempt.voided_at ||
            attempt.state == AttemptState::lost) {
            continue;
        }
        AttemptRecord a = attempt;
        a.voided_at = now;
        c.attempts.push_back(a);
        out.attempts.push_back(id);
        auto refunds = m_ledger.refund_entries(next_entry_id(c), now, id.value(), note);
        for (const auto& e : refunds) {
            out.refunded_micro += e.amount;
        }
        c.ledger.insert(c.ledger.end(), refunds.begin(), refunds.end());
        // The job's outcome came from this attempt: it runs again.
        JobRecord job = m_jobs.at(a.job);
        if (m_latest_attempt.at(a.job) == id && (job.state == JobState::succeeded || job.state == JobState::failed)) {
            job.state = JobState::queued;
            job.finished_at.reset();
            job.exit_code.reset();
            job.updated_at = now;
            job.reason = "the result of attempt " + std::to_string(id.value()) + " was voided (worker " +
                         std::to_string(worker.value()) + " was banned); queued to run again";
            c.jobs.push_back(std::move(job));
            out.requeued.push_back(a.job);
        }
    }
}

// ---- jobs ---------------------------------------------------------------------------------------

std::optional<std::string> Coordinator::infeasible_reason(const recipe::JobSpec& spec) const {
    // Only once the pool has workers: an empty pool may still be filling up.
    if (m_workers.empty()) {
        return std::nullopt;
    }
    const auto& r = spec.resources;
    std::int64_t max_cpu = 0;
    std::int64_t max_mem = 0;
    std::int64_t max_gpu_mem = 0;
    bool model_seen = r.gpu_models.empty();
    for (const auto& [id, w] : m_workers) {
        if (w.record.state == WorkerState::banned) {
            continue;
        }
        max_cpu = std::max(max_cpu, w.cpu_milli);
        max_mem = std::max(max_mem, w.memory_mib);
        for (std::size_t g = 0; g < w.gpus.size(); ++g) {
            bool model_ok = r.gpu_models.empty() ||
                            std::find(r.gpu_models.begin(), r.gpu_models.end(), w.gpu_models[g]) != r.gpu_models.end();
            if (model_ok) {
                model_seen = true;
                max_gpu_mem = std::max(max_gpu_mem, w.gpus[g].memory_mib);
            }
        }
    }
    if (r.cpu_milli > max_cpu) {
        return "needs " + resources::format_milli(r.cpu_milli) + " CPUs; the largest worker has " +
               resources::format_milli(max_cpu);
    }
    if (r.memory_mib > max_mem) {
        return "needs " + resources::format_memory_mib(r.memory_mib) + " of memory; the largest worker has " +
               resources::format_memory_mib(max_mem);
    }
    if (r.gpus > 0 && !model_seen) {
        return "no worker has a GPU of the models it accepts";
    }
    if (r.gpus > 0 && max_gpu_mem == 0) {
        return "needs a GPU; no worker in the pool has one";
    }
    if (r.gpu_memory_mib > max_gpu_mem) {
        return "needs " + resources::format_memory_mib(r.gpu_memory_mib) + " of GPU memory; the largest GPU has " +
               resources::format_memory_mib(max_gpu_mem);
    }
    return std::nullopt;
}

Result<SubmitResult> Coordinator::submit(const Principal& who, SubmitRequest request) {
    std::optional<TeamId> team;
    if (who.role == Role::member) {
        team = who.team;
    } else if (who.role == Role::admin) {
        if (!request.team) {
            return invalid("admins submit for a team: set `team`", "team");
        }
        for (const auto& [id, t] : m_teams) {
            if (t.name == *request.team) {
                team = id;
            }
        }
        if (!team) {
            return make_error(ErrorCode::not_found, no_team_message(*request.team), "team");
        }
    } else {
        return denied("only team members and admins submit jobs");
    }
    if (const auto& key = request.idempotency_key; !key.empty()) {
        if (key.size() > 128 || key.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") !=
                                    std::string::npos) {
            return invalid("1 to 128 letters, digits, `_` or `-`", "idempotency_key");
        }
        if (auto it = m_sweep_by_key.find({*team, key}); it != m_sweep_by_key.end()) {
            // Submitted before (the answer was lost): the same sweep again, nothing new.
            SubmitResult again;
            again.sweep_id = it->second;
            for (const auto& [id, j] : m_jobs) {
                if (j.sweep_id == it->second) {
                    again.jobs.push_back(id);
                }
            }
            return again;
        }
    }
    if (request.jobs.empty()) {
        return invalid("a submission needs at least one job", "jobs");
    }
    if (request.jobs.size() > k_max_jobs_per_submission) {
        return invalid("a submission has at most " + std::to_string(k_max_jobs_per_submission) + " jobs, got " +
                           std::to_string(request.jobs.size()),
                       "jobs");
    }
    if (request.max_parallel < 0) {
        return invalid("must be 0 (no limit) or more", "max_parallel");
    }
    for (std::size_t i = 0; i < request.jobs.size(); ++i) {
        if (const auto& sha = request.jobs[i].inputs.archive; !sha.empty()) {
            auto size = m_store.input_blob_size(*team, sha);
            if (!size) {
                return size.error();
            }
            if (!*size) {
                return invalid("no inputs with digest " + sha + " were uploaded for team `" + m_teams.at(*team).name +
                                   "`; upload the archive first (PUT /v1/inputs/" + sha + ")",
                               "jobs[" + std::to_string(i) + "].inputs.archive");
            }
        }
        if (const std::int64_t limit = m_options.max_log_limit_bytes;
            limit > 0 && request.jobs[i].logs.max_size_mib * 1024 * 1024 > limit) {
            return invalid("job `" + request.jobs[i].name + "` asks to keep " +
                               std::to_string(request.jobs[i].logs.max_size_mib) +
                               " MiB of log per attempt; this pool keeps at most " +
                               std::to_string(limit / (1024 * 1024)) + " MiB (its operators set --max-log-limit-mib)",
                           "jobs[" + std::to_string(i) + "].logs.max_size");
        }
        if (auto why = infeasible_reason(request.jobs[i])) {
            Error e = make_error(ErrorCode::invalid_input,
                                 "job `" + request.jobs[i].name + "` can never run on this pool: " + *why,
                                 "jobs[" + std::to_string(i) + "].resources");
            return e;
        }
    }
    if (m_options.credits.enforce && !request.allow_unfunded) {
        const Estimate est = estimate_for(*team, request.source, request.jobs);
        const std::string& name = m_teams.at(*team).name;
        const std::string what = "this submission (" + std::to_string(request.jobs.size()) +
                                 (request.jobs.size() == 1 ? " job" : " jobs") + ") is estimated at " +
                                 credits_text(est.total_estimate_micro) + " (at most " +
                                 credits_text(est.total_max_micro) + ")";
        const std::string hint = "; ask an admin for a grant (`gpupool admin grant " + name +
                                 " AMOUNT`), or submit with --allow-unfunded to queue it until funds arrive";
        if (est.total_estimate_micro > est.available_micro) {
            return make_error(ErrorCode::conflict,
                              what + " but team `" + name + "` has " + credits_text(est.available_micro) +
                                  " available" + hint,
                              "credits");
        }
        if (est.budget_room_micro && est.total_estimate_micro > *est.budget_room_micro) {
            return make_error(ErrorCode::conflict,
                              what + " but team `" + name + "`'s budget allows " +
                                  credits_text(std::max<Micro>(*est.budget_room_micro, 0)) + " more now" + hint,
                              "credits");
        }
        if (auto mine = member_room(who.token_id, m_clock.now_ms()); mine && est.total_estimate_micro > *mine) {
            const TokenRecord* t = token_by_id(who.token_id);
            return make_error(ErrorCode::conflict,
                              what + " but your own budget (member `" + (t ? t->label : std::string()) + "`) allows " +
                                  credits_text(std::max<Micro>(*mine, 0)) + " more now; ask an admin to raise it " +
                                  "(`gpupool admin budget " + name + " --member ...`), or submit with " +
                                  "--allow-unfunded to queue it until your budget has room",
                              "credits");
        }
    }
    const std::int64_t now = m_clock.now_ms();
    Changes c;
    SweepRecord sweep{m_next_sweep, *team, who.token_id, request.source,
                      static_cast<std::int64_t>(request.jobs.size()), request.max_parallel, now,
                      request.idempotency_key};
    c.sweeps.push_back(sweep);
    SubmitResult result;
    result.sweep_id = sweep.id;
    std::int64_t next_job = m_next_job;
    for (auto& spec : request.jobs) {
        JobRecord j;
        j.id = JobId(next_job++);
        j.sweep_id = sweep.id;
        j.team = *team;
        j.spec = std::move(spec);
        j.created_at = j.updated_at = now;
        j.reason = "queued";
        result.jobs.push_back(j.id);
        c.jobs.push_back(std::move(j));
    }
    // All N jobs in one transaction, or none.
    if (auto st = commit(c); !st) {
        return st.error();
    }
    return result;
}

Result<const JobRecord*> Coordinator::visible_job(const Principal& who, JobId id) const {
    auto it = m_jobs.find(id);
    // A job of another team is reported as missing, not forbidden: ids are not a side channel.
    if (it == m_jobs.end() || (who.role != Role::admin && !(who.role == Role::member && who.team == it->second.team))) {
        if (who.role != Role::admin && who.role != Role::member) {
            return denied("only team members and admins read jobs");
        }
        return not_found("no job " + std::to_string(id.value()));
    }
    return &it->second;
}

Result<JobRecord> Coordinator::job(const Principal& who, JobId id) const {
    auto j = visible_job(who, id);
    if (!j) {
        return j.error();
    }
    return **j;
}

Result<JobList> Coordinator::jobs(const Principal& who, const JobQuery& q) const {
    if (who.role != Role::admin && who.role != Role::member) {
        return denied("only team members and admins list jobs");
    }
    if (q.all_teams && who.role != Role::admin) {
        return denied("only admins list the jobs of all teams");
    }
    auto matches = [&](const JobRecord& j) {
        if (q.state && j.state != *q.state) {
            return false;
        }
        if (q.sweep && j.sweep_id != *q.sweep) {
            return false;
        }
        if (q.submitter_token && m_sweeps.at(j.sweep_id).submitter_token != *q.submitter_token) {
            return false;
        }
        if (q.submitter_label && submitter_of(j.id) != *q.submitter_label) {
            return false;
        }
        if (!q.all_teams && who.team != j.team && who.role != Role::admin) {
            return false;
        }
        return !(!q.all_teams && who.role == Role::admin && who.team && who.team != j.team);
    };
    // Newest first, so that a limit costs what it returns (until `more` finds one older match).
    JobList out;
    auto end = q.before ? m_jobs.lower_bound(*q.before) : m_jobs.end();
    for (auto it = std::make_reverse_iterator(end); it != m_jobs.rend(); ++it) {
        if (!matches(it->second)) {
            continue;
        }
        if (q.limit > 0 && out.jobs.size() == q.limit) {
            out.more = true;
            break;
        }
        out.jobs.push_back(it->second);
    }
    std::reverse(out.jobs.begin(), out.jobs.end());
    return out;
}

const JobRecord* Coordinator::job_of_attempt(AttemptId attempt) const {
    auto a = m_attempts.find(attempt);
    if (a == m_attempts.end()) {
        return nullptr;
    }
    auto j = m_jobs.find(a->second.job);
    return j == m_jobs.end() ? nullptr : &j->second;
}

std::string Coordinator::submitter_of(JobId job) const {
    return token_name(m_sweeps.at(m_jobs.at(job).sweep_id).submitter_token);
}

std::string Coordinator::token_name(std::int64_t token_id) const {
    const TokenRecord* t = token_by_id(token_id);
    return t != nullptr && !t->label.empty() ? t->label : "token " + std::to_string(token_id);
}

const std::vector<AttemptId>& Coordinator::attempt_ids_of(JobId id) const {
    static const std::vector<AttemptId> none;
    auto it = m_attempts_by_job.find(id);
    return it == m_attempts_by_job.end() ? none : it->second;
}

std::vector<AttemptRecord> Coordinator::attempts_of(JobId id) const {
    std::vector<AttemptRecord> out;
    for (AttemptId aid : attempt_ids_of(id)) {
        out.push_back(m_attempts.at(aid));
    }
    return out;
}

void Coordinator::end_attempt(AttemptRecord& attempt, AttemptState state, std::optional<std::int64_t> exit_code,
                              const std::string& reason, Changes& changes, bool chargeable) {
    const std::int64_t now = m_clock.now_ms();
    attempt.state = state;
    attempt.ended_at = now;
    attempt.exit_code = exit_code;
    attempt.reason = reason;
    changes.attempts.push_back(attempt);
    JobRecord job = m_jobs.at(attempt.job);
    // Settle the escrow in the same transaction as the state change.
    const std::int64_t aid = attempt.id.value();
    if (m_ledger.has_hold(aid) && !m_ledger.closed(aid)) {
        assert(std::none_of(changes.ledger.begin(), changes.ledger.end(),
                            [&](const credits::Entry& e) { return e.attempt == aid; }));
        const std::int64_t runtime_ms = attempt.started_at ? now - *attempt.started_at : 0;
        const TeamId provider = m_workers.at(attempt.worker).record.team;
        const auto s = credits::settle(m_ledger.held(aid), credits::cost_of(attempt.price_micro_per_hour, runtime_ms),
                                       chargeable && state != AttemptState::lost, m_options.credits.pool_fee_ppm,
                                       provider == job.team);
        // Another team's earnings settle first (so a lying worker's results can still be voided).
        const bool settle_later = m_options.credits.settle_ms > 0 && provider != job.team;
        auto entries = credits::Ledger::settlement_entries(next_entry_id(changes), now, aid, job.team.value(),
                                                           provider.value(), s, settle_later);
        changes.ledger.insert(changes.ledger.end(), entries.begin(), entries.end());
    }
    job.updated_at = now;
    job.exit_code = exit_code;
    job.reason = reason;
    // Preempted attempts (by the scheduler or the owner) do not use up one of the job's attempts.
    const bool attempts_left = job.attempts - free_attempts(job.id) < job.spec.retry.max_attempts;
    switch (state) {
    case AttemptState::succeeded:
        job.state = JobState::succeeded;
        break;
    case AttemptState::cancelled:
        job.state = JobState::cancelled;
        break;
    case AttemptState::failed: {
        const auto& codes = job.spec.retry.on_exit_codes;
        bool retry = exit_code && std::find(codes.begin(), codes.end(), *exit_code) != codes.end();
        job.state = (retry && attempts_left) ? JobState::queued : JobState::failed;
        break;
    }
    case AttemptState::lost:
    case AttemptState::preempted:
        if (state == AttemptState::preempted || attempts_left) {
            job.state = JobState::queued;
        } else {
            job.state = JobState::failed;
            job.reason = reason + "; no attempts left (retry.max_attempts = " +
                         std::to_string(job.spec.retry.max_attempts) + ")";
        }
        break;
    case AttemptState::assigned:
    case AttemptState::running:
        break;
    }
    if (is_terminal(job.state)) {
        job.finished_at = now;
    }
    changes.jobs.push_back(std::move(job));
}

Status Coordinator::cancel_job(const Principal& who, JobId id) {
    auto j = visible_job(who, id);
    if (!j) {
        return j.error();
    }
    JobRecord job = **j;
    if (is_terminal(job.state)) {
        return make_error(ErrorCode::conflict, "job " + std::to_string(id.value()) + " has already " +
                                                   to_string(job.state));
    }
    Changes c;
    auto latest = m_latest_attempt.find(id);
    if (latest != m_latest_attempt.end() && is_active(m_attempts.at(latest->second).state)) {
        AttemptRecord a = m_attempts.at(latest->second);
        end_attempt(a, AttemptState::cancelled, std::nullopt, "cancelled by user", c);
    } else {
        job.state = JobState::cancelled;
        job.reason = "cancelled by user";
        job.updated_at = job.finished_at.emplace(m_clock.now_ms());
        c.jobs.push_back(job);
    }
    return commit(c);
}

Result<std::int64_t> Coordinator::cancel_sweep(const Principal& who, std::int64_t sweep_id) {
    auto s = m_sweeps.find(sweep_id);
    if (s == m_sweeps.end() || (who.role != Role::admin && who.team != s->second.team) ||
        (who.role != Role::admin && who.role != Role::member)) {
        if (who.role != Role::admin && who.role != Role::member) {
            return denied("only team members and admins cancel sweeps");
        }
        return not_found("no sweep " + std::to_string(sweep_id));
    }
    std::vector<JobId> ids;
    for (const auto& [id, j] : m_jobs) {
        if (j.sweep_id == sweep_id && !is_terminal(j.state)) {
            ids.push_back(id);
        }
    }
    Changes c;
    const std::int64_t now = m_clock.now_ms();
    for (JobId id : ids) {
        auto latest = m_latest_attempt.find(id);
        if (latest != m_latest_attempt.end() && is_active(m_attempts.at(latest->second).state)) {
            AttemptRecord a = m_attempts.at(latest->second);
            end_attempt(a, AttemptState::cancelled, std::nullopt, "sweep cancelled by user", c);
        } else {
            JobRecord job = m_jobs.at(id);
            job.state = JobState::cancelled;
            job.reason = "sweep cancelled by user";
            job.updated_at = job.finished_at.emplace(now);
            c.jobs.push_back(job);
        }
    }
    if (auto st = commit(c); !st) {
        return st.error();
    }
    return static_cast<std::int64_t>(ids.size());
}

Result<LogSlice> Coordinator::read_logs(const Principal& who, JobId id, std::int64_t offset,
                                        std::optional<AttemptId> attempt) {
    auto j = visible_job(who, id);
    if (!j) {
        return j.error();
    }
    AttemptId aid;
    if (attempt) {
        auto it = m_attempts.find(*attempt);
        if (it == m_attempts.end() || it->second.job != id) {
            return not_found("job " + std::to_string(id.value()) + " has no attempt " + std::to_string(attempt->value()));
        }
        aid = *attempt;
    } else {
        auto latest = m_latest_attempt.find(id);
        if (latest == m_latest_attempt.end()) {
            return LogSlice{AttemptId(0), {}, 0, is_terminal((*j)->state)};
        }
        aid = latest->second;
    }
    if (offset < 0) {
        return invalid("must be 0 or more", "offset");
    }
    constexpr std::int64_t k_max_slice = 1 << 20;
    auto resume = m_store.log_resume_offset(aid, offset);
    if (!resume) {
        return resume.error();
    }
    const std::int64_t from = resume->value_or(offset);
    auto data = m_store.read_log(aid, from, k_max_slice);
    if (!data) {
        return data.error();
    }
    LogSlice s;
    s.attempt = aid;
    s.next_offset = from + static_cast<std::int64_t>(data->size());
    if (from > offset) {
        const std::int64_t cap = log_cap(m_jobs.at(m_attempts.at(aid).job).spec);
        s.data = "[gpupool: bytes " + std::to_string(offset) + " to " + std::to_string(from) +
                 " of this log were dropped: the pool keeps the first " + std::to_string(log_head_bytes(cap)) +
                 " bytes and the last " + std::to_string(cap - log_head_bytes(cap)) +
                 " bytes of each attempt's log (a recipe can keep more: [logs] max_size)]\n";
    }
    s.data += *data;
    auto len = m_store.log_length(aid);
    s.finished = !is_active(m_attempts.at(aid).state) && len && s.next_offset >= *len;
    return s;
}

Result<std::string> Coordinator::read_output(const Principal& who, JobId id) {
    auto j = visible_job(who, id);
    if (!j) {
        return j.error();
    }
    const JobRecord& job = **j;
    const std::string name = "job " + std::to_string(id.value());
    auto latest = m_latest_attempt.find(id);
    if (latest == m_latest_attempt.end()) {
        if (job.state == JobState::cancelled) {
            return not_found(name + " was cancelled before it ran: it has no outputs");
        }
        const std::string why = waiting_reason(id);
        return not_found(name + " has not run yet" + (why.empty() ? std::string() : ": " + why));
    }
    if (const AttemptRecord& a = m_attempts.at(latest->second); a.voided_at) {
        return make_error(ErrorCode::conflict, "the outputs of job " + std::to_string(id.value()) + " came from attempt " +
                                                   std::to_string(a.id.value()) + " on worker " +
                                                   std::to_string(a.worker.value()) +
                                                   ", whose results an admin voided; the job runs again");
    }
    auto out = m_store.get_output(latest->second);
    if (!out) {
        return out.error();
    }
    if (!*out) {
        switch (job.state) {
        case JobState::queued:
        case JobState::assigned:
        case JobState::running:
            return not_found(name + " is " + to_string(job.state) + ": its outputs come back when it ends (`gpupool wait " +
                             std::to_string(id.value()) + "`)");
        case JobState::succeeded:
            return not_found(name + " succeeded but its worker sent no outputs");
        case JobState::failed:
            return not_found(name + " failed (" + job.reason + ") and no outputs came back");
        case JobState::cancelled:
            return not_found(name + " was cancelled (" + job.reason + ") and no outputs came back");
        }
    }
    return std::move(**out);
}

// ---- workers ------------------------------------------------------------------------------------

Result<Coordinator::Registered> Coordinator::register_worker(const Principal& who, const std::string& name,
                                                             const nlohmann::json& inventory) {
    if (who.role != Role::enroll || !who.team) {
        return denied("workers register with an enrollment token (`gpupool admin enroll TEAM`)");
    }
    if (auto st = validate_inventory(inventory); !st) {
        return st.error();
    }
    if (name.empty() || name.size() > 128) {
        return invalid("worker names are 1-128 characters", "name");
    }
    const std::int64_t now = m_clock.now_ms();
    Changes c;
    WorkerRecord w{WorkerId(m_next_worker), *who.team, name, inventory.dump(), WorkerState::active, now, now,
                   who.token_id};
    c.workers.push_back(w);
    auto tok = issue(Role::worker, who.team, w.id, "worker " + name, c);
    if (!tok) {
        return tok.error();
    }
    // Each registration uses up one of the enrollment token's registrations; the last revokes it.
    // (After issue(): it numbers new tokens by their place in `c`.)
    if (const TokenRecord* enrollment = token_by_id(who.token_id); enrollment != nullptr && enrollment->uses_left) {
        TokenRecord used = *enrollment;
        used.uses_left = *used.uses_left - 1;
        if (*used.uses_left <= 0) {
            used.revoked_at = now;
        }
        c.tokens.push_back(used);
    }
    if (auto st = commit(c); !st) {
        return st.error();
    }
    return Registered{w.id, tok->secret, inventory_warnings(inventory)};
}

std::vector<std::string> Coordinator::inventory_warnings(const nlohmann::json& inventory) const {
    std::vector<std::string> out;
    const auto& rates = m_options.credits.rates;
    if (inventory.contains("gpus")) {
        for (const auto& g : inventory["gpus"]) {
            const std::string model = g.value("model", std::string());
            if (rates.find(model) == nullptr) {
                out.push_back("GPU model `" + model + "` is not in the GPU catalog (" + rates.source +
                              "): its time is priced at the default rate of " +
                              credits_text(rates.default_micro_per_gpu_hour) +
                              " per GPU-hour; ask the pool's admins to add it");
            }
        }
    }
    return out;
}

Result<AttemptRecord*> Coordinator::current_attempt_of_worker(const Principal& who, AttemptId id) {
    if (who.role != Role::worker || !who.worker) {
        return denied("only workers report on attempts");
    }
    auto it = m_attempts.find(id);
    if (it == m_attempts.end() || it->second.worker != *who.worker) {
        return not_found("no attempt " + std::to_string(id.value()) + " on this worker");
    }
    if (!is_active(it->second.state)) {
        return fenced(id, std::string("it is ") + to_string(it->second.state));
    }
    return &it->second;
}

Result<HeartbeatReply> Coordinator::heartbeat(const Principal& who, const std::vector<AttemptId>& running,
                                              const std::vector<std::int64_t>& unhealthy_gpus, bool draining,
                                              const nlohmann::json* inventory, bool paused) {
    if (who.role != Role::worker || !who.worker) {
        return denied("only workers send heartbeats");
    }
    if (inventory != nullptr) {
        if (auto st = validate_inventory(*inventory); !st) {
            return st.error();
        }
    }
    m_workers.at(*who.worker).unhealthy_gpus = unhealthy_gpus;
    m_workers.at(*who.worker).draining = draining;
    m_workers.at(*who.worker).paused = paused;
    const std::int64_t now = m_clock.now_ms();
    HeartbeatReply reply;
    reply.lease_ms = m_options.lease_ms;
    Changes c;
    WorkerRecord w = m_workers.at(*who.worker).record;
    w.last_seen_at = now;
    if (inventory != nullptr && inventory->dump() != w.inventory_json) {
        // The machine changed since it registered (a GPU added or gone, other --cpus-milli,
        // --memory-mib or --slots): schedule by what it has now.
        w.inventory_json = inventory->dump();
        reply.warnings = inventory_warnings(*inventory);
    }
    c.workers.push_back(w);
    for (AttemptId id : running) {
        auto it = m_attempts.find(id);
        if (it == m_attempts.end() || it->second.worker != *who.worker || !is_active(it->second.state)) {
            reply.stop.push_back(id); // cancelled, lost, timed out, or never ours: stop it
            continue;
        }
        AttemptRecord a = it->second;
        a.lease_expires_at = now + m_options.lease_ms;
        c.attempts.push_back(a);
    }
    if (auto st = commit(c); !st) {
        return st.error();
    }
    return reply;
}

Result<std::vector<Assignment>> Coordinator::assignments(const Principal& who) const {
    if (who.role != Role::worker || !who.worker) {
        return denied("only workers poll for assignments");
    }
    std::vector<Assignment> out;
    for (AttemptId id : m_active_attempts) {
        const AttemptRecord& a = m_attempts.at(id);
        if (a.worker == *who.worker && a.state == AttemptState::assigned) {
            const JobRecord& j = m_jobs.at(a.job);
            out.push_back({a.id, a.job, j.attempts, j.spec, a.gpu_index, a.gpu_milli, j.team, m_teams.at(j.team).name});
        }
    }
    return out;
}

Status Coordinator::start_attempt(const Principal& who, AttemptId id) {
    auto a = current_attempt_of_worker(who, id);
    if (!a) {
        return a.error();
    }
    if ((*a)->state == AttemptState::running) {
        return {}; // a repeated start is harmless
    }
    const std::int64_t now = m_clock.now_ms();
    Changes c;
    AttemptRecord copy = **a;
    copy.state = AttemptState::running;
    copy.started_at = now;
    copy.lease_expires_at = now + m_options.lease_ms;
    c.attempts.push_back(copy);
    JobRecord j = m_jobs.at(copy.job);
    j.state = JobState::running;
    j.updated_at = now;
    j.reason = "running on worker " + std::to_string(copy.worker.value());
    c.jobs.push_back(j);
    return commit(c);
}

Result<LogAppend> Coordinator::append_log(const Principal& who, AttemptId id, std::int64_t offset,
                                          std::string_view data) {
    auto a = current_attempt_of_worker(who, id);
    if (!a) {
        return a.error();
    }
    auto appended = m_store.append_log(id, offset, data);
    const std::int64_t cap = log_cap(m_jobs.at((*a)->job).spec);
    if (appended && cap > 0 && appended->stored_bytes > 0 && appended->length > cap) {
        // Keep the head and the newest bytes; what lies wholly between goes.
        const std::int64_t head = log_head_bytes(cap);
        if (auto st = m_store.drop_log_range(id, head, appended->length - (cap - head)); !st) {
            return st.error();
        }
    }
    return appended;
}

Status Coordinator::upload_output(const Principal& who, AttemptId id, const UploadedFile& file) {
    auto a = current_attempt_of_worker(who, id);
    if (!a) {
        return a.error();
    }
    const auto cap = m_jobs.at((*a)->job).spec.outputs.max_size_mib * 1024 * 1024;
    if (file.size > cap) {
        return invalid("outputs are " + std::to_string(file.size) + " bytes, over the job's outputs.max_size",
                       "outputs");
    }
    return m_store.put_output(id, file.path, file.sha256_hex);
}

std::optional<Outcome> outcome_from_string(std::string_view s) {
    if (s == "exited") {
        return Outcome::exited;
    }
    if (s == "worker_fault") {
        return Outcome::worker_fault;
    }
    if (s == "owner_preempted") {
        return Outcome::owner_preempted;
    }
    return std::nullopt;
}

Status Coordinator::put_inputs(const Principal& who, const std::string& sha, const UploadedFile& file,
                               const std::optional<std::string>& team_name) {
    std::optional<TeamId> team;
    if (who.role == Role::member) {
        team = who.team;
    } else if (who.role == Role::admin) {
        if (!team_name) {
            return invalid("admins name the team the inputs are for: ?team=NAME", "team");
        }
        auto t = team_named(*team_name);
        if (!t) {
            return t.error();
        }
        team = *t;
    } else {
        return denied("only team members and admins upload inputs");
    }
    if (sha.size() != 64 || sha.find_first_not_of("0123456789abcdef") != std::string::npos) {
        return invalid("must be the lowercase hex SHA-256 of the body", "sha256");
    }
    if (file.size > static_cast<std::int64_t>(k_max_input_archive_bytes)) {
        return invalid("the inputs archive is " + std::to_string(file.size) + " bytes, over the pool's limit of " +
                           std::to_string(k_max_input_archive_bytes),
                       "inputs");
    }
    if (file.sha256_hex != sha) {
        return invalid("the body's SHA-256 is " + file.sha256_hex + ", not the digest in the path", "sha256");
    }
    return m_store.put_input_blob(*team, sha, file.path, m_clock.now_ms());
}

Result<std::string> Coordinator::read_inputs(const Principal& who, AttemptId id) {
    auto a = current_attempt_of_worker(who, id);
    if (!a) {
        return a.error();
    }
    const auto& sha = m_jobs.at((*a)->job).spec.inputs.archive;
    if (sha.empty()) {
        return make_error(ErrorCode::not_found, "this job has no inputs archive");
    }
    auto blob = m_store.get_input_blob(m_jobs.at((*a)->job).team, sha);
    if (!blob) {
        return blob.error();
    }
    if (!*blob) {
        return make_error(ErrorCode::not_found, "the inputs archive " + sha + " is missing from the store");
    }
    return std::move(**blob);
}

Status Coordinator::complete_attempt(const Principal& who, AttemptId id, std::optional<std::int64_t> exit_code,
                                     const std::string& reason, Outcome outcome) {
    auto a = current_attempt_of_worker(who, id);
    if (!a) {
        return a.error();
    }
    Changes c;
    AttemptRecord copy = **a;
    switch (outcome) {
    case Outcome::exited: {
        if (!exit_code) {
            return invalid("missing required field", "exit_code");
        }
        if (*exit_code < 0 || *exit_code > 255) {
            return invalid("exit codes are 0-255", "exit_code");
        }
        std::string why = reason.empty() ? "exited with status " + std::to_string(*exit_code) : reason;
        end_attempt(copy, *exit_code == 0 ? AttemptState::succeeded : AttemptState::failed, exit_code, why, c);
        break;
    }
    case Outcome::worker_fault:
        end_attempt(copy, AttemptState::lost, std::nullopt,
                    reason.empty() ? "worker fault" : "worker fault: " + reason, c, false);
        break;
    case Outcome::owner_preempted:
        end_attempt(copy, AttemptState::preempted, std::nullopt,
                    reason.empty() ? "preempted by the GPU's owner" : "preempted by the GPU's owner: " + reason, c,
                    false);
        break;
    }
    return commit(c);
}

// ---- time ---------------------------------------------------------------------------------------

void Coordinator::expire(Changes& c) {
    const std::int64_t now = m_clock.now_ms();
    expire_grants(c);
    for (AttemptId id : m_active_attempts) {
        const AttemptRecord& a = m_attempts.at(id);
        if (a.lease_expires_at < now) {
            AttemptRecord copy = a;
            end_attempt(copy, AttemptState::lost, std::nullopt, "lease expired: worker stopped renewing", c);
            continue;
        }
        const auto& spec = m_jobs.at(a.job).spec;
        if (a.started_at && now > *a.started_at + spec.resources.max_runtime_s * 1000 + m_options.runtime_grace_ms) {
            AttemptRecord copy = a;
            end_attempt(copy, AttemptState::failed, std::nullopt,
                        "exceeded max_runtime " + resources::format_duration_s(spec.resources.max_runtime_s), c);
        }
    }
}

std::vector<WorkerId> Coordinator::place(Changes& c) {
    const std::int64_t now = m_clock.now_ms();
    sched::ClusterView view;
    std::map<WorkerId, std::size_t> index;
    for (const auto& [id, w] : m_workers) {
        if (w.record.state != WorkerState::active || w.draining || w.paused ||
            now - w.record.last_seen_at > m_options.worker_timeout_ms) {
            continue;
        }
        sched::Worker sw;
        sw.id = id;
        sw.name = w.record.name;
        sw.cpu_milli_total = sw.cpu_milli_free = w.cpu_milli;
        sw.memory_mib_total = sw.memory_mib_free = w.memory_mib;
        if (w.slots > 0) {
            sw.slots_free = w.slots; // less the attempts on it, below
        }
        sw.gpus = w.gpus;
        for (std::size_t g = 0; g < sw.gpus.size(); ++g) {
            sw.gpus[g].model = view.models.intern(w.gpu_models[g]);
            if (std::find(w.unhealthy_gpus.begin(), w.unhealthy_gpus.end(), static_cast<std::int64_t>(g)) !=
                w.unhealthy_gpus.end()) {
                sw.gpus[g].milli_free = 0; // a failing GPU takes no new work
            }
        }
        index[id] = view.workers.size();
        view.workers.push_back(std::move(sw));
    }
    std::map<std::int64_t, std::int64_t> sweep_active;
    for (AttemptId id : m_active_attempts) {
        const AttemptRecord& a = m_attempts.at(id);
        const JobRecord& j = m_jobs.at(a.job);
        sweep_active[j.sweep_id]++;
        auto wi = index.find(a.worker);
        if (wi == index.end()) {
            continue;
        }
        sched::Worker& sw = view.workers[wi->second];
        if (sw.slots_free) {
            --*sw.slots_free;
        }
        sw.cpu_milli_free -= j.spec.resources.cpu_milli;
        sw.memory_mib_free -= j.spec.resources.memory_mib;
        if (a.gpu_index >= 0 && static_cast<std::size_t>(a.gpu_index) < sw.gpus.size()) {
            sw.gpus[static_cast<std::size_t>(a.gpu_index)].milli_free -= a.gpu_milli;
        }
        sched::RunningJob r;
        r.job = a.job;
        r.attempt = a.id;
        r.team = j.team;
        r.priority = j.spec.priority;
        r.worker = a.worker;
        if (a.gpu_index >= 0) {
            r.gpu_indices = {static_cast<std::uint32_t>(a.gpu_index)};
        }
        r.gpu_milli = a.gpu_milli;
        r.cpu_milli = j.spec.resources.cpu_milli;
        r.memory_mib = j.spec.resources.memory_mib;
        r.started_at = (a.started_at ? *a.started_at : a.assigned_at) / 1000;
        view.running.push_back(r);
    }
    for (const auto& [id, t] : m_teams) {
        view.teams.push_back({id, static_cast<double>(t.weight), m_usage.usage(id, now / 1000)});
    }
    std::vector<sched::JobRequest> pending;
    std::map<std::int64_t, std::int64_t> sweep_budget;
    // Credits: what each team may still hold in this pass (balance, and budgets when set).
    const bool enforce = m_options.credits.enforce;
    std::map<TeamId, Micro> room;
    auto room_of = [&](TeamId team) -> Micro& {
        auto it = room.find(team);
        if (it == room.end()) {
            it = room.emplace(team, budget_room(team, now)).first;
        }
        return it->second;
    };
    // And what each submitting member may still hold, for members with caps of their own.
    auto member_of = [&](JobId job) { return m_sweeps.at(m_jobs.at(job).sweep_id).submitter_token; };
    std::map<std::int64_t, std::optional<Micro>> member_rooms;
    auto member_room_of = [&](JobId job) -> std::optional<Micro>& {
        const std::int64_t token = member_of(job);
        auto it = member_rooms.find(token);
        if (it == member_rooms.end()) {
            it = member_rooms.emplace(token, member_room(token, now)).first;
        }
        return it->second;
    };
    std::map<std::int64_t, Micro> member_reserved; // by the member's jobs that entered this pass
    // "team `x` can hold 0.2 credits now (balance 5; budget 1/day, 0.8 spent or held)".
    auto can_hold = [&](TeamId team, Micro left) {
        const TeamRecord& t = m_teams.at(team);
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
    };
    // The largest hold a job could take on any live worker it fits: a team that cannot cover it
    // does not enter the scheduling pass. (With the smallest, a job placed on a pricier GPU than it
    // can pay for would be chosen and dropped again every pass, blocking that GPU for others.)
    auto max_hold = [&](const recipe::JobSpec& spec) {
        const auto& r = spec.resources;
        Micro worst = 0;
        for (const auto& sw : view.workers) {
            if (r.gpus == 0) {
                worst = std::max(worst, attempt_price(spec, sw.id, -1, 0));
                continue;
            }
            const LiveWorker& lw = m_workers.at(sw.id);
            for (std::size_t g = 0; g < lw.gpus.size(); ++g) {
                const bool model_ok = r.gpu_models.empty() || std::find(r.gpu_models.begin(), r.gpu_models.end(),
                                                                        lw.gpu_models[g]) != r.gpu_models.end();
                if (model_ok && lw.gpus[g].memory_mib >= r.gpu_memory_mib) {
                    worst = std::max(worst, attempt_price(spec, sw.id, static_cast<std::int64_t>(g), r.gpu_milli));
                }
            }
        }
        return credits::cost_of(worst, r.max_runtime_s * 1000);
    };
    for (JobId id : m_queued_jobs) {
        const JobRecord& j = m_jobs.at(id);
        if (enforce && !view.workers.empty()) {
            const Micro need = max_hold(j.spec);
            const Micro left = room_of(j.team);
            if (need > left) {
                m_waiting[id] = "waiting for credits: " + can_hold(j.team, left) + " but this job's hold may be " +
                                credits_text(need) + " (price x max_runtime " +
                                resources::format_duration_s(j.spec.resources.max_runtime_s) + ")";
                continue;
            }
            // A member's jobs beyond what its own budget can hold stay out of the pass, so that they
            // do not take a GPU from a teammate's job only to be dropped below.
            if (const auto& mine = member_room_of(id)) {
                Micro& reserved = member_reserved[member_of(id)];
                if (need > *mine - reserved) {
                    m_waiting[id] = "waiting for credits: " + member_can_hold(member_of(id), *mine - reserved, reserved, now) +
                                    " but this job's hold may be " + credits_text(need) + " (price x max_runtime " +
                                    resources::format_duration_s(j.spec.resources.max_runtime_s) + ")";
                    continue;
                }
                reserved += need;
            }
        }
        const auto& sweep = m_sweeps.at(j.sweep_id);
        if (sweep.max_parallel > 0) {
            auto& used = sweep_budget.try_emplace(j.sweep_id, sweep_active[j.sweep_id]).first->second;
            if (used >= sweep.max_parallel) {
                m_waiting[id] = "its sweep is at max_parallel = " + std::to_string(sweep.max_parallel);
                continue;
            }
            ++used;
        }
        std::vector<std::string> unknown;
        // A job re-queued by preemption queues again from when it stopped, so that aging cannot lift
        // it straight back above the job it made room for.
        std::int64_t queued_since = j.created_at;
        if (auto latest = m_latest_attempt.find(id); latest != m_latest_attempt.end()) {
            const AttemptRecord& last = m_attempts.at(latest->second);
            if (last.state == AttemptState::preempted && last.ended_at) {
                queued_since = *last.ended_at;
            }
        }
        pending.push_back(sched::make_request(id, j.team, j.spec, queued_since / 1000, view.models, &unknown));
        if (!unknown.empty() && pending.back().gpu_models == 0) {
            pending.pop_back();
            m_waiting[id] = "no worker has a GPU of the models it accepts";
        }
    }
    if (pending.empty()) {
        return {};
    }
    if (view.workers.empty()) {
        std::size_t paused = 0;
        for (const auto& [id, w] : m_workers) {
            paused += (w.paused && presence(id) == "paused") ? 1 : 0;
        }
        const std::string why = paused == 0 ? std::string("no worker is connected")
                                            : "no worker is taking work: " + std::to_string(paused) +
                                                  (paused == 1 ? " is" : " are") + " paused by its owner";
        for (const auto& p : pending) {
            m_waiting[p.id] = why;
        }
        return {};
    }
    sched::Decisions d = sched::schedule(view, pending, m_options.policy, now / 1000);
    std::vector<WorkerId> woken;
    for (const auto& w : d.waiting) {
        m_waiting[w.job] = w.reason;
    }
    // Preemption: the victim's attempt ends now (its worker is told to stop in the next heartbeat)
    // and its job goes back to the queue (a preempted job is always re-queued); the preemptor is placed in a
    // later pass, once the victim's resources are free.
    for (const auto& pre : d.preemptions) {
        auto it = m_attempts.find(pre.attempt);
        if (it == m_attempts.end() || !is_active(it->second.state)) {
            continue;
        }
        AttemptRecord copy = it->second;
        end_attempt(copy, AttemptState::preempted, std::nullopt,
                    "preempted for higher-priority job " + std::to_string(pre.for_job.value()), c);
    }
    for (const auto& p : d.placements) {
        JobRecord j = m_jobs.at(p.job);
        const std::int64_t gpu_index = p.gpus.empty() ? -1 : static_cast<std::int64_t>(p.gpus.front());
        const Micro price = attempt_price(j.spec, p.worker, gpu_index, p.gpu_milli);
        const Micro hold = credits::cost_of(price, j.spec.resources.max_runtime_s * 1000);
        if (enforce) {
            Micro& left = room_of(j.team);
            if (hold > left) {
                m_waiting[p.job] = "waiting for credits: " + can_hold(j.team, left) + " but this job's hold on worker " +
                                   std::to_string(p.worker.value()) + " is " + credits_text(hold) + " (" +
                                   format_credits(price) + "/hour x max_runtime " +
                                   resources::format_duration_s(j.spec.resources.max_runtime_s) + ")";
                continue;
            }
            auto& mine = member_room_of(p.job);
            if (mine && hold > *mine) {
                m_waiting[p.job] = "waiting for credits: " + member_can_hold(member_of(p.job), *mine, 0, now) +
                                   " but this job's hold on worker " + std::to_string(p.worker.value()) + " is " +
                                   credits_text(hold);
                continue;
            }
            left -= hold;
            if (mine) {
                *mine -= hold;
            }
        }
        AttemptRecord a;
        a.id = AttemptId(m_next_attempt + static_cast<std::int64_t>(c.attempts.size()));
        a.job = p.job;
        a.worker = p.worker;
        a.gpu_index = gpu_index;
        a.gpu_milli = p.gpu_milli;
        a.state = AttemptState::assigned;
        a.assigned_at = now;
        a.lease_expires_at = now + m_options.lease_ms;
        a.reason = "assigned";
        a.price_micro_per_hour = price;
        c.attempts.push_back(a);
        if (hold > 0) {
            // The hold is taken with the assignment, in the same transaction.
            c.ledger.push_back(credits::Ledger::hold_entry(next_entry_id(c), now, a.id.value(), j.team.value(), hold));
        }
        j.state = JobState::assigned;
        j.attempts += 1;
        j.updated_at = now;
        j.reason = "assigned to worker " + std::to_string(p.worker.value());
        c.jobs.push_back(j);
        m_waiting.erase(p.job);
        if (std::find(woken.begin(), woken.end(), p.worker) == woken.end()) {
            woken.push_back(p.worker);
        }
    }
    return woken;
}

std::vector<WorkerId> Coordinator::tick() {
    Changes c;
    expire(c);
    pay_out(c);
    if (!c.empty()) {
        (void)commit(c); // a failed write leaves the state as it was; the next tick retries
    }
    Changes placed;
    auto woken = place(placed);
    if (placed.empty()) {
        return {};
    }
    if (!commit(placed)) {
        return {};
    }
    return woken;
}

std::string Coordinator::waiting_reason(JobId id) const {
    auto j = m_jobs.find(id);
    if (j == m_jobs.end() || j->second.state != JobState::queued) {
        return {};
    }
    auto it = m_waiting.find(id);
    return it == m_waiting.end() ? std::string("waiting for the next scheduling pass") : it->second;
}

// ---- credits ------------------------------------------------------------------------------------

std::int64_t Coordinator::next_entry_id(const Changes& changes) const {
    return m_ledger.next_id() + static_cast<std::int64_t>(changes.ledger.size());
}

Result<TeamId> Coordinator::team_named(const std::string& name) const {
    for (const auto& [id, t] : m_teams) {
        if (t.name == name) {
            return id;
        }
    }
    return make_error(ErrorCode::not_found, no_team_message(name), "team");
}

std::int64_t Coordinator::free_attempts(JobId job) const {
    std::int64_t n = 0;
    for (AttemptId id : attempt_ids_of(job)) {
        const AttemptRecord& a = m_attempts.at(id);
        n += (a.state == AttemptState::preempted || a.voided_at) ? 1 : 0;
    }
    return n;
}

std::int64_t Coordinator::attempt_price(const recipe::JobSpec& spec, WorkerId worker, std::int64_t gpu_index,
                                        std::int64_t gpu_milli) const {
    const auto& rates = m_options.credits.rates;
    if (spec.resources.gpus == 0 || gpu_index < 0) {
        return credits::cpu_price_per_hour(rates.cpu_micro_per_core_hour, spec.resources.cpu_milli);
    }
    const LiveWorker& w = m_workers.at(worker);
    const auto g = static_cast<std::size_t>(gpu_index);
    const std::int64_t total = g < w.gpus.size() ? w.gpus[g].memory_mib : 0;
    const std::string model = g < w.gpu_models.size() ? w.gpu_models[g] : std::string();
    const std::int64_t share = credits::billed_share_milli(gpu_milli, spec.resources.gpu_memory_mib, total);
    return credits::gpu_price_per_hour(rates.gpu_rate(model), share) * std::max<std::int64_t>(1, spec.resources.gpus);
}

} // namespace gpupool::coordinator
