#include "core/coordinator/coordinator.hpp"

#include "core/coordinator/internal.hpp"
#include "core/resources/quantity.hpp"
#include "core/sched/fragmentation.hpp"
#include "core/util/token_secret.hpp"

#include <algorithm>
#include <cassert>
#include <chrono>
#include <cstdio>
#include <iterator>
#include <limits>

namespace gpupool::coordinator {

using namespace gpupool::store;

using namespace gpupool::coordinator::detail;

namespace {

// A worker's GPUs go into the scheduler's fixed arrays (fragmentation.hpp): the wire's cap must fit.
static_assert(api::k_max_gpus == sched::k_max_gpus_per_worker, "api::k_max_gpus is the scheduler's cap");

// The worker's inventory as the scheduler reads it (GPUs with their models, CPU, RAM, slots).
void set_inventory(Coordinator::LiveWorker& live, api::Inventory inventory, bool whole_gpu_only_unenforced) {
    live.gpus.clear();
    live.gpu_models.clear();
    for (const auto& g : inventory.gpus) {
        sched::Gpu gpu;
        gpu.memory_mib = g.memory_mib;
        gpu.fractional_ok = !(whole_gpu_only_unenforced && g.memory_enforcement == "none");
        live.gpus.push_back(gpu);
        live.gpu_models.push_back(g.model);
    }
    live.cpu_milli = inventory.cpu_milli;
    live.memory_mib = inventory.memory_mib;
    live.slots = inventory.slots;
    live.inventory = std::move(inventory);
}

} // namespace

Coordinator::Coordinator(Store& store, const Clock& clock, CoordinatorOptions options)
    : m_store(store), m_clock(clock), m_options(std::move(options)),
      m_pool(m_options.worker_timeout_ms), m_usage(m_options.policy.ordering.half_life_s) {}

void Coordinator::record_usage(const AttemptRecord& a) {
    if (!a.started_at || !a.ended_at || a.gpu_milli <= 0) {
        return;
    }
    const double seconds = static_cast<double>(*a.ended_at - *a.started_at) / 1000.0;
    const double gpu_seconds = seconds * static_cast<double>(a.gpu_milli) / 1000.0;
    m_usage.record(m_jobs.at(a.job).team, gpu_seconds, *a.ended_at / 1000);
}

// ---- persistence --------------------------------------------------------------------------------

Result<std::int64_t> Coordinator::take_ids(store::IdKind kind, std::int64_t count) {
    constexpr std::int64_t k_block = 64; // a reservation is a commit: one per 64 ids at most
    IdBlock& block = m_id_blocks[static_cast<std::size_t>(kind)];
    if (block.end - block.next < count) {
        const std::int64_t size = std::max(count, k_block);
        auto first = m_store.reserve_ids(kind, size);
        if (!first) {
            note_store_error(first.error());
            return first.error();
        }
        block = {*first, *first + size};
    }
    const std::int64_t first = block.next;
    block.next += count;
    return first;
}

void Coordinator::note_store_error(const Error& e) {
    if (store::is_fenced(e)) {
        m_fenced = true;
    }
}

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
    const auto began = std::chrono::steady_clock::now();
    auto st = m_store.apply(changes);
    if (m_events != nullptr) {
        m_events->store_committed(std::chrono::steady_clock::now() - began, static_cast<bool>(st));
    }
    if (!st) {
        note_store_error(st.error());
        return st;
    }
    const Noticed noticed = notice(changes);
    // Only now does memory change: it never holds anything the store does not.
    absorb(changes);
    for (const auto& a : noticed.ended) {
        record_usage(a);
        m_counters.count_ended(a);
        if (m_events != nullptr) {
            const std::int64_t ran = a.started_at ? *a.ended_at - *a.started_at : 0;
            m_events->attempt_ended(team_name(m_jobs.at(a.job).team), *outcome_of(a), ran);
        }
    }
    if (m_events != nullptr) {
        for (const auto& [team, queued_ms] : noticed.placed) {
            m_events->attempt_placed(team, queued_ms);
        }
    }
    changes = Changes{};
    return {};
}

// Whether `changes` touch what a scheduling pass reads (pass_due()); called before they are absorbed.
// A heartbeat's last_seen_at and lease renewals do not: they change no capacity and no queue.
void Coordinator::note_pass_inputs(const Changes& changes) {
    if (m_pass_dirty) {
        return;
    }
    const auto state_changed = [&](const AttemptRecord& a) {
        auto old = m_attempts.find(a.id);
        return old == m_attempts.end() || old->second.state != a.state;
    };
    const auto worker_changed = [&](const WorkerRecord& w) {
        auto old = m_workers.find(w.id);
        if (old == m_workers.end()) {
            return true;
        }
        WorkerRecord seen = old->second.record;
        seen.last_seen_at = w.last_seen_at;
        return !(seen == w);
    };
    m_pass_dirty = !changes.teams.empty() || !changes.tokens.empty() || !changes.jobs.empty() || !changes.sweeps.empty() ||
                   !changes.ledger.empty() || !changes.grants.empty() ||
                   std::any_of(changes.attempts.begin(), changes.attempts.end(), state_changed) ||
                   std::any_of(changes.workers.begin(), changes.workers.end(), worker_changed);
}

void Coordinator::absorb(const Changes& changes) {
    note_pass_inputs(changes);
    for (const auto& t : changes.teams) {
        m_teams[t.id] = t;
    }
    if (!changes.teams.empty()) {
        // A new team may be one an owner's terms name (they name teams, the scheduler compares ids).
        for (auto& [id, live] : m_workers) {
            if (live.terms && !live.terms->teams.empty()) {
                set_terms(live, live.terms);
                m_pool.set_worker(id, live);
            }
        }
    }
    for (const auto& t : changes.tokens) {
        m_tokens[t.hash] = t;
        m_token_hash_by_id[t.id] = t.hash;
    }
    for (const auto& w : changes.workers) {
        auto [at, fresh] = m_workers.try_emplace(w.id);
        auto& live = at->second;
        if (!fresh) {
            count_gpu_kinds(live, -1);
        }
        live.record = w;
        // Validated when it arrived; a row that no longer reads (edited by hand) offers nothing.
        auto inv = api::inventory_from_text(w.inventory_json);
        set_inventory(live, inv ? std::move(*inv) : api::Inventory{}, m_options.whole_gpu_only_unenforced);
        live.model_mismatch = model_mismatch_of(live.inventory);
        live.unconfirmed = w.last_seen_at < m_restored_at_ms;
        count_gpu_kinds(live, +1);
    }
    for (const auto& sw : changes.sweeps) {
        m_sweeps[sw.id] = sw;
        if (!sw.idempotency_key.empty()) {
            m_sweep_by_key[{sw.team, sw.idempotency_key}] = sw.id;
        }
    }
    for (const auto& j : changes.jobs) {
        auto old = m_jobs.find(j.id);
        if (m_track_ended && is_terminal(j.state) && (old == m_jobs.end() || !is_terminal(old->second.state))) {
            m_newly_ended.push_back(j.id);
        }
        if (old != m_jobs.end() && old->second.finished_at) {
            m_ended_jobs.erase({*old->second.finished_at, j.id});
        }
        if (j.finished_at) {
            m_ended_jobs.insert({*j.finished_at, j.id});
        }
        m_jobs[j.id] = j;
        if (j.state == JobState::queued) {
            m_queued_jobs.insert(j.id);
        } else {
            m_queued_jobs.erase(j.id);
        }
    }
    for (const auto& a : changes.attempts) {
        // The runtimes index: an attempt counts once, from the change that made it a successful run.
        const auto old = m_attempts.find(a.id);
        const bool counted = old != m_attempts.end() && counts_as_run(old->second);
        if (counted != counts_as_run(a)) {
            const JobRecord& j = m_jobs.at(a.job);
            auto& runs = m_runtimes_by_source[{j.team, m_sweeps.at(j.sweep_id).source}];
            if (!counted) {
                runs.push_back(run_seconds(a));
            } else if (auto it = std::find(runs.begin(), runs.end(), run_seconds(old->second)); it != runs.end()) {
                runs.erase(it);
            }
        }
        if (old != m_attempts.end() && is_active(old->second.state)) {
            m_expiry.erase({expiry_of(old->second), a.id});
        }
        if (m_attempts.insert_or_assign(a.id, a).second) {
            auto& ids = m_attempts_by_job[a.job];
            ids.insert(std::upper_bound(ids.begin(), ids.end(), a.id), a.id);
        }
        if (is_active(a.state)) {
            m_active_attempts.insert(a.id);
            m_expiry.insert({expiry_of(a), a.id});
        } else {
            m_active_attempts.erase(a.id);
        }
        if (a.state == AttemptState::assigned) {
            m_assigned_by_worker[a.worker].insert(a.id);
        } else if (auto mine = m_assigned_by_worker.find(a.worker); mine != m_assigned_by_worker.end()) {
            mine->second.erase(a.id);
            if (mine->second.empty()) {
                m_assigned_by_worker.erase(mine);
            }
        }
        auto& latest = m_latest_attempt[a.job];
        latest = std::max(latest, a.id);
    }
    for (const auto& g : changes.grants) {
        m_grants[g.id] = g;
    }
    for (const auto& e : changes.ledger) {
        assert(!m_ledger.check(e));
        m_ledger.apply(e);
    }
    // The scheduler's view, in an order that finds what each change refers to: workers, then
    // attempts on them, then jobs (a job re-queued by preemption reads its ended attempt).
    for (const auto& w : changes.workers) {
        m_pool.set_worker(w.id, m_workers.at(w.id));
    }
    for (const auto& a : changes.attempts) {
        m_pool.set_attempt(m_attempts.at(a.id), m_jobs.at(a.job), times_preempted(a.job));
    }
    for (const auto& j : changes.jobs) {
        feed_job(m_pool, m_jobs.at(j.id));
    }
}

Status Coordinator::start() {
    auto snap = m_store.load();
    if (!snap) {
        return snap.error();
    }
    // A pool restored from a backup (restore_pool records when): what it says of its workers and
    // their attempts is as of the backup, unconfirmed until each worker reports in.
    store::AuditQuery restores;
    restores.action_prefix = "pool.restore";
    restores.limit = 1;
    auto restored = m_store.read_audit(restores);
    if (!restored) {
        return restored.error();
    }
    m_restored_at_ms = restored->empty() ? 0 : restored->front().at_ms;
    // The ledger first: rebuild every balance from the rows and compare with the cached ones.
    for (const auto& e : snap->ledger) {
        if (auto why = m_ledger.check(e)) {
            return make_error(ErrorCode::io, "credits ledger: entry " + std::to_string(e.id) + " breaks a rule (" + *why +
                                                 "); refusing to start");
        }
        m_ledger.apply(e);
        m_counters.count_entry(e);
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
        m_counters.count_ended(*a);
    }
    for (const auto& [id, j] : m_jobs) {
        m_counters.count_job(std::nullopt, j);
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

// ---- time ---------------------------------------------------------------------------------------

std::int64_t Coordinator::expiry_of(const AttemptRecord& a) const {
    std::int64_t at = a.lease_expires_at;
    if (a.started_at) {
        const auto& spec = m_jobs.at(a.job).spec;
        at = std::min(at, *a.started_at + spec.resources.max_runtime_s * 1000 + m_options.runtime_grace_ms);
    }
    return at;
}

void Coordinator::expire(Changes& c) {
    const std::int64_t now = m_clock.now_ms();
    expire_grants(c);
    // Only the attempts whose lease or runtime may have run out (m_expiry), in id order as before.
    std::vector<AttemptId> due;
    for (auto it = m_expiry.begin(); it != m_expiry.end() && it->first < now; ++it) {
        due.push_back(it->second);
    }
    std::sort(due.begin(), due.end());
    for (AttemptId id : due) {
        const AttemptRecord& a = m_attempts.at(id); // absorb() keeps only active attempts in m_expiry
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

std::vector<WorkerId> Coordinator::tick() {
    Changes c;
    expire(c);
    pay_out(c);
    if (!c.empty()) {
        (void)commit(c); // a failed write leaves the state as it was; the next tick retries
    }
    auto woken = schedule_pass();
    record_sample(m_clock.now_ms());
    return woken;
}

std::vector<WorkerId> Coordinator::schedule_pass() {
    if (!pass_due()) {
        return {};
    }
    const auto began = std::chrono::steady_clock::now();
    Changes placed;
    auto woken = place(placed);
    std::size_t new_attempts = 0;
    std::size_t preempted = 0;
    for (const auto& a : placed.attempts) {
        new_attempts += m_attempts.count(a.id) == 0 ? 1 : 0;
        preempted += a.state == AttemptState::preempted ? 1 : 0;
    }
    const bool written = placed.empty() || static_cast<bool>(commit(placed));
    if (written) {
        // What this pass placed is what it decided: nothing new for the next one. What it preempted
        // frees room for its preemptors, which the next pass places.
        m_pass_dirty = preempted > 0;
        m_last_pass_ms = m_clock.now_ms();
    }
    if (m_events != nullptr) {
        m_events->scheduling_pass(std::chrono::steady_clock::now() - began, written ? new_attempts : 0,
                                  written ? preempted : 0);
    }
    return written ? woken : std::vector<WorkerId>{};
}

bool Coordinator::pass_due() const {
    return m_pass_dirty || m_clock.now_ms() - m_last_pass_ms >= k_quiet_pass_ms;
}

std::string Coordinator::shown_reason(const JobRecord& j) const {
    if (j.state == JobState::queued) {
        return waiting_reason(j.id);
    }
    if (j.state == JobState::assigned) {
        if (auto latest = m_latest_attempt.find(j.id); latest != m_latest_attempt.end()) {
            if (auto f = m_fetching.find(latest->second); f != m_fetching.end()) {
                const auto gb = [](std::int64_t bytes) {
                    char buf[32];
                    std::snprintf(buf, sizeof buf, "%.1f", static_cast<double>(bytes) / 1e9);
                    return std::string(buf);
                };
                return "fetching weights (" + gb(f->second.done_bytes) + " of " +
                       (f->second.total_bytes > 0 ? gb(f->second.total_bytes) : std::string("?")) + " GB)";
            }
        }
    }
    return j.reason;
}

std::string Coordinator::waiting_reason(JobId id) const {
    auto j = m_jobs.find(id);
    if (j == m_jobs.end() || j->second.state != JobState::queued) {
        return {};
    }
    auto it = m_waiting.find(id);
    return it == m_waiting.end() ? std::string("waiting for the next scheduling pass") : it->second;
}

} // namespace gpupool::coordinator
