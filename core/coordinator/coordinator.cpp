#include "core/coordinator/coordinator.hpp"

#include "core/coordinator/internal.hpp"
#include "core/coordinator/job_ops.hpp"
#include "core/resources/quantity.hpp"
#include "core/sched/fragmentation.hpp"
#include "core/util/token_secret.hpp"

#include <algorithm>
#include <cassert>
#include <chrono>
#include <cstdio>
#include <iterator>
#include <limits>
#include <set>

namespace gpupool::coordinator {

using namespace gpupool::store;

using namespace gpupool::coordinator::detail;

Coordinator::Coordinator(Store& store, const util::Clock& clock, CoordinatorOptions options)
    : m_store(store), m_clock(clock), m_options(std::move(options)),
      m_roster({m_options.worker_timeout_ms, m_options.whole_gpu_only_unenforced}, m_options.credits.rates),
      m_job_book(m_options.runtime_grace_ms), m_credits(m_options.credits, m_tokens, m_job_book), m_blobs(store),
      m_pool(m_options.worker_timeout_ms), m_usage(m_options.policy.ordering.half_life_s),
      m_draws(m_options.spot_check_seed) {}

void Coordinator::record_usage(const AttemptRecord& a) {
    // A spot check is the pool's work, not its team's: it does not lower the team's fair share.
    if (!a.started_at || !a.ended_at || a.gpu_milli <= 0 || m_job_book.jobs().at(a.job).is_check()) {
        return;
    }
    const double seconds = static_cast<double>(*a.ended_at - *a.started_at) / 1000.0;
    const double gpu_seconds = seconds * static_cast<double>(a.gpu_milli) / 1000.0;
    m_usage.record(m_job_book.jobs().at(a.job).team, gpu_seconds, *a.ended_at / 1000);
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

// ---- what workers say that is not durable -------------------------------------------------------

void Coordinator::note_heartbeat(WorkerId worker, const api::Heartbeat& beat, const api::Inventory* inventory) {
    if (m_roster.note_heartbeat(worker, beat, inventory, m_clock.now_ms(), m_tokens)) {
        // A change (or a worker back from silence) may let queued work fit, or stop it fitting.
        m_pool.set_worker(worker, m_roster.at(worker));
        m_pass_dirty = true;
    }
    static const std::set<AttemptId> k_none;
    auto assigned = m_job_book.assigned_by_worker().find(worker);
    m_roster.note_fetching(worker, beat.fetching,
                           assigned == m_job_book.assigned_by_worker().end() ? k_none : assigned->second);
}

void Coordinator::note_registered(WorkerId worker, const std::optional<api::OwnerTerms>& terms) {
    m_roster.note_registration(worker, terms, m_tokens);
    m_pool.set_worker(worker, m_roster.at(worker));
    m_pass_dirty = true;
}

void Coordinator::note_started(WorkerId worker, AttemptId attempt) {
    m_roster.forget_fetching(worker, attempt);
}

void Coordinator::note_left(WorkerId /*worker*/) {
    m_pass_dirty = true;
}

void Coordinator::note_store_error(const Error& e) {
    if (store::is_fenced(e)) {
        m_fenced = true;
    }
}

Status Coordinator::commit(Changes& changes) {
    // The cached balance of every account the new entries move, written in the same transaction.
    m_credits.stage_balances(changes);
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
            m_events->attempt_ended(m_tokens.team_name(m_job_book.jobs().at(a.job).team), *outcome_of(a), ran);
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

Coordinator::Noticed Coordinator::notice(const store::Changes& changes) {
    Noticed n;
    for (const auto& a : changes.attempts) {
        auto old = m_job_book.attempts().find(a.id);
        if (a.ended_at && (old == m_job_book.attempts().end() || !old->second.ended_at)) {
            n.ended.push_back(a);
        }
        if (m_events != nullptr && old == m_job_book.attempts().end() && a.state == AttemptState::assigned) {
            // Queued since the job was submitted, or since its previous attempt ended.
            const store::JobRecord& job = m_job_book.jobs().at(a.job);
            std::int64_t since = job.created_at;
            if (auto prev = m_job_book.latest_attempt().find(a.job); prev != m_job_book.latest_attempt().end()) {
                since = m_job_book.attempts().at(prev->second).ended_at.value_or(since);
            }
            n.placed.emplace_back(m_tokens.team_name(job.team), std::max<std::int64_t>(a.assigned_at - since, 0));
        }
    }
    for (const auto& j : changes.jobs) {
        auto old = m_job_book.jobs().find(j.id);
        m_counters.count_job(old == m_job_book.jobs().end() ? std::nullopt : std::optional(old->second.state), j);
    }
    for (const auto& e : changes.ledger) {
        m_counters.count_entry(e);
    }
    return n;
}

// Whether `changes` touch what a scheduling pass reads (pass_due()); called before they are absorbed.
// A heartbeat's last_seen_at and lease renewals do not: they change no capacity and no queue.
void Coordinator::note_pass_inputs(const Changes& changes) {
    if (m_pass_dirty) {
        return;
    }
    const auto state_changed = [&](const AttemptRecord& a) {
        auto old = m_job_book.attempts().find(a.id);
        return old == m_job_book.attempts().end() || old->second.state != a.state;
    };
    const auto worker_changed = [&](const WorkerRecord& w) {
        const LiveWorker* old = m_roster.find(w.id);
        if (old == nullptr) {
            return true;
        }
        WorkerRecord seen = old->record;
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
    m_tokens.absorb(changes);
    const std::vector<WorkerId> workers_changed = m_roster.absorb(changes, m_tokens);
    m_job_book.absorb(changes);
    m_credits.absorb(changes);
    // The scheduler's view, in an order that finds what each change refers to: workers, then
    // attempts on them, then jobs (a job re-queued by preemption reads its ended attempt).
    for (WorkerId id : workers_changed) {
        m_pool.set_worker(id, m_roster.at(id));
    }
    for (const auto& a : changes.attempts) {
        m_pool.set_attempt(m_job_book.attempts().at(a.id), m_job_book.jobs().at(a.job), m_job_book.times_preempted(a.job));
    }
    for (const auto& j : changes.jobs) {
        feed_job(m_pool, m_roster, m_job_book, m_job_book.jobs().at(j.id), m_options);
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
    m_roster.set_restored_at(restored->empty() ? 0 : restored->front().at_ms);
    // The ledger first: rebuild every balance from the rows and compare with the cached ones.
    if (auto st = m_credits.load(snap->ledger, snap->balances); !st) {
        return st;
    }
    for (const auto& e : snap->ledger) {
        m_counters.count_entry(e);
    }
    snap->ledger.clear(); // loaded: absorb() below must not apply them again
    absorb(*snap); // the store already holds all of it
    std::vector<const AttemptRecord*> ended;
    for (const auto& [id, a] : m_job_book.attempts()) {
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
    for (const auto& [id, j] : m_job_book.jobs()) {
        m_counters.count_job(std::nullopt, j);
    }
    // While the coordinator was down no worker could renew a lease: give every live attempt a
    // fresh one, so that a restart does not by itself lose work that went on running.
    Changes renewed;
    const std::int64_t now = m_clock.now_ms();
    for (AttemptId id : m_job_book.active()) {
        const AttemptRecord& a = m_job_book.attempts().at(id);
        if (a.lease_expires_at < now + m_options.lease_ms) {
            AttemptRecord copy = a;
            copy.lease_expires_at = now + m_options.lease_ms;
            renewed.attempts.push_back(copy);
        }
    }
    return renewed.attempts.empty() ? Status{} : commit(renewed);
}

std::optional<std::string> Coordinator::drift() {
    auto snap = m_store.load();
    if (!snap) {
        return "the store could not be read: " + snap.error().message;
    }
    TokenBook tokens;
    tokens.absorb(*snap);
    if (auto d = m_tokens.first_difference(tokens)) {
        return "token book: " + *d;
    }
    WorkerRoster roster(m_roster.options(), m_roster.rates());
    roster.set_restored_at(m_roster.restored_at());
    roster.absorb(*snap, tokens);
    if (auto d = m_roster.first_difference(roster)) {
        return "worker roster: " + *d;
    }
    JobBook jobs(m_options.runtime_grace_ms);
    jobs.absorb(*snap);
    if (auto d = m_job_book.first_difference(jobs)) {
        return "job book: " + *d;
    }
    CreditDesk credits(m_options.credits, tokens, jobs);
    if (auto st = credits.load(snap->ledger, snap->balances); !st) {
        return "credit desk: the store's ledger does not load: " + st.error().message;
    }
    snap->ledger.clear();
    credits.absorb(*snap); // the grants
    if (auto d = m_credits.first_difference(credits)) {
        return "credit desk: " + *d;
    }
    if (auto d = pool_view_drift()) {
        return "pool view: " + *d;
    }
    return std::nullopt;
}

// ---- time ---------------------------------------------------------------------------------------

void Coordinator::expire(Changes& c) {
    const std::int64_t now = m_clock.now_ms();
    m_credits.stage_grant_expiries(m_clock.now_ms(), c);
    // Only the attempts whose lease or runtime may have run out (m_job_book.expiry()), in id order as before.
    std::vector<AttemptId> due;
    for (auto it = m_job_book.expiry().begin(); it != m_job_book.expiry().end() && it->first < now; ++it) {
        due.push_back(it->second);
    }
    std::sort(due.begin(), due.end());
    for (AttemptId id : due) {
        const AttemptRecord& a =
            m_job_book.attempts().at(id); // absorb() keeps only active attempts in m_job_book.expiry()
        if (a.lease_expires_at < now) {
            AttemptRecord copy = a;
            end_attempt(*this, copy, AttemptState::lost, std::nullopt, "lease expired: worker stopped renewing", c);
            continue;
        }
        const auto& spec = m_job_book.jobs().at(a.job).spec;
        if (a.started_at && now > *a.started_at + spec.resources.max_runtime_s * 1000 + m_options.runtime_grace_ms) {
            AttemptRecord copy = a;
            end_attempt(*this, copy, AttemptState::failed, std::nullopt,
                        "exceeded max_runtime " + resources::format_duration_s(spec.resources.max_runtime_s), c);
        }
    }
}

std::vector<WorkerId> Coordinator::tick() {
    Changes c;
    expire(c);
    m_credits.stage_payouts(m_clock.now_ms(), c);
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
        new_attempts += m_job_book.attempts().count(a.id) == 0 ? 1 : 0;
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

void Coordinator::record_sample(std::int64_t now) {
    if (m_options.sample_every_ms <= 0 || now < m_next_sample_at) {
        return;
    }
    // The whole pool, as an admin sees it: every team's work counts. Only the numbers: the
    // overview's lists of a large pool cost tens of milliseconds on the coordinator thread.
    const OverviewTotals t = pool_totals(m_roster, m_job_book, now);
    Changes c;
    c.samples.push_back({now, t.workers_online, t.gpus_online, t.gpu_milli_online, t.gpu_milli_allocated, t.jobs_queued,
                         t.jobs_running});
    if (!commit(c)) {
        return; // the next tick tries again
    }
    m_next_sample_at = now + m_options.sample_every_ms;
    // Best effort: what a failed prune leaves, the next one deletes.
    (void)m_store.prune_samples(now - m_options.sample_keep_ms);
}

Result<SampleSeries> Coordinator::samples(const Principal& who, std::int64_t since_ms) {
    if (who.role != Role::admin && !(who.role == Role::member && who.team)) {
        return denied("the pool's utilisation is for admins and team members");
    }
    const std::int64_t oldest = m_clock.now_ms() - m_options.sample_keep_ms;
    auto read = m_store.read_samples(std::max(since_ms, oldest), k_max_samples);
    if (!read) {
        return read.error();
    }
    SampleSeries out;
    out.every_ms = m_options.sample_every_ms;
    out.samples = std::move(*read);
    out.job_counts = who.role == Role::admin;
    if (!out.job_counts) {
        for (auto& x : out.samples) {
            x.jobs_queued = 0;
            x.jobs_running = 0;
        }
    }
    return out;
}

} // namespace gpupool::coordinator
