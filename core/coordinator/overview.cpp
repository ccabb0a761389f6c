// Coordinator::overview (overview.hpp): the pool at a glance, from the state in memory; and the
// utilisation samples the coordinator keeps of it (Coordinator::samples, record_sample).
#include "core/coordinator/overview.hpp"

#include "core/coordinator/coordinator.hpp"
#include "core/coordinator/internal.hpp"

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <utility>
#include <vector>

namespace gpupool::coordinator {

using namespace gpupool::store;
using namespace gpupool::coordinator::detail;

namespace {

// What the active attempts hold of one GPU: its milli given out and how many jobs run on it.
struct GpuLoad {
    std::pair<WorkerId, std::int64_t> gpu; // (worker, GPU index; -1 for CPU-only attempts)
    std::int64_t milli = 0;
    std::int64_t jobs = 0;
};

// The loads of every GPU that runs something, sorted by GPU for load_of(): a sort of the active
// attempts rather than a tree node per GPU, since a sample of a large pool walks tens of thousands.
// `only`: count the attempts it accepts alone (empty: all).
std::vector<GpuLoad> gpu_loads(const std::set<AttemptId>& active, const std::map<AttemptId, AttemptRecord>& attempts,
                               const std::function<bool(const AttemptRecord&)>& only = {}) {
    std::vector<GpuLoad> each;
    each.reserve(active.size());
    for (AttemptId id : active) {
        const AttemptRecord& a = attempts.at(id);
        if (!only || only(a)) {
            each.push_back({{a.worker, a.gpu_index}, a.gpu_milli, 1});
        }
    }
    std::sort(each.begin(), each.end(), [](const GpuLoad& x, const GpuLoad& y) { return x.gpu < y.gpu; });
    std::vector<GpuLoad> out;
    for (const GpuLoad& l : each) {
        if (out.empty() || out.back().gpu != l.gpu) {
            out.push_back({l.gpu, 0, 0});
        }
        out.back().milli += l.milli;
        out.back().jobs += 1;
    }
    return out;
}

GpuLoad load_of(const std::vector<GpuLoad>& loads, WorkerId worker, std::int64_t gpu) {
    const std::pair key{worker, gpu};
    auto it = std::lower_bound(loads.begin(), loads.end(), key,
                               [](const GpuLoad& l, const std::pair<WorkerId, std::int64_t>& k) { return l.gpu < k; });
    return it != loads.end() && it->gpu == key ? *it : GpuLoad{key, 0, 0};
}

// Adds one GPU of a worker to the totals (only online workers' GPUs count).
void count_gpu(OverviewTotals& t, bool online, const GpuLoad& load) {
    if (online) {
        t.gpus_online += 1;
        t.gpu_milli_online += 1000;
        t.gpu_milli_allocated += load.milli;
        t.gpus_shared += load.jobs > 1 ? 1 : 0;
    }
}

bool is_online(const std::string& presence) {
    return presence != "offline" && presence != "banned";
}

} // namespace

const char* to_string(MembersSee m) {
    return m == MembersSee::full ? "full" : "summary";
}

std::optional<MembersSee> members_see_from_string(std::string_view s) {
    if (s == "summary") {
        return MembersSee::summary;
    }
    if (s == "full") {
        return MembersSee::full;
    }
    return std::nullopt;
}

OverviewJob Coordinator::overview_job(const JobRecord& j) const {
    OverviewJob o;
    o.id = j.id;
    o.name = j.spec.name;
    o.team = m_tokens.team_name(j.team);
    o.submitter = submitter_of(j.id);
    o.state = to_string(j.state);
    o.since_ms = j.finished_at.value_or(j.created_at);
    o.exit_code = j.exit_code;
    o.why = j.state == JobState::queued ? waiting_reason(j.id) : j.reason;
    return o;
}

Result<PoolOverview> Coordinator::overview(const Principal& who) const {
    if (who.role != Role::admin && !(who.role == Role::member && who.team)) {
        return denied("the pool's overview is for admins and team members");
    }
    const auto visible = [&](TeamId team) { return who.role == Role::admin || *who.team == team; };
    PoolOverview out;
    out.at_ms = m_clock.now_ms();
    out.detail = who.role == Role::admin ? MembersSee::full : m_options.members_see;
    const bool full = out.detail == MembersSee::full;

    // What runs where: every active attempt counts on its GPU (the totals); the caller's are listed,
    // and under `summary` they alone make the per-GPU figures.
    const std::vector<GpuLoad> loads = gpu_loads(m_job_book.active(), m_job_book.attempts());
    const std::vector<GpuLoad> shown =
        full ? loads : gpu_loads(m_job_book.active(), m_job_book.attempts(), [&](const AttemptRecord& a) {
            return visible(m_job_book.jobs().at(a.job).team);
        });
    for (AttemptId id : m_job_book.active()) {
        const AttemptRecord& a = m_job_book.attempts().at(id);
        const JobRecord& j = m_job_book.jobs().at(a.job);
        if (!visible(j.team)) {
            continue;
        }
        OverviewJob o = overview_job(j);
        o.since_ms = a.assigned_at;
        o.worker = a.worker;
        o.worker_name = m_roster.find(a.worker) != nullptr ? m_roster.at(a.worker).record.name : std::string();
        o.gpu_index = a.gpu_index;
        o.gpu_milli = a.gpu_milli;
        out.running.push_back(std::move(o));
    }

    for (const auto& [id, w] : m_roster.workers()) {
        OverviewWorker ow;
        ow.id = id;
        ow.name = w.record.name;
        ow.team = (full || visible(w.record.team)) ? m_tokens.team_name(w.record.team) : std::string();
        ow.presence = presence(id);
        ow.last_seen_at = w.record.last_seen_at;
        const bool online = is_online(ow.presence);
        out.totals.workers += 1;
        out.totals.workers_online += online ? 1 : 0;
        for (const auto& g : w.inventory.gpus) {
            const GpuLoad load = load_of(loads, id, g.index);
            const GpuLoad mine = full ? load : load_of(shown, id, g.index);
            OverviewGpu og;
            og.index = g.index;
            og.model = g.model;
            og.memory_mib = g.memory_mib;
            og.enforcement = g.memory_enforcement;
            og.allocated_milli = mine.milli;
            og.jobs = mine.jobs;
            og.healthy = std::find(w.unhealthy_gpus.begin(), w.unhealthy_gpus.end(), g.index) == w.unhealthy_gpus.end();
            count_gpu(out.totals, online, load);
            ow.gpus.push_back(std::move(og));
        }
        out.workers.push_back(std::move(ow));
    }

    for (JobId id : m_job_book.queued()) {
        const JobRecord& j = m_job_book.jobs().at(id);
        if (!visible(j.team)) {
            continue;
        }
        out.totals.jobs_queued += 1;
        if (out.queued.size() < k_overview_queue) {
            out.queued.push_back(overview_job(j));
        }
    }
    out.totals.jobs_running = static_cast<std::int64_t>(out.running.size());

    // The jobs that ended last, by when they ended (a long job submitted early can end after many
    // later ones): the newest k_overview_recent of the caller's ended jobs, from the index absorb()
    // keeps, so that the dashboard's poll does not walk the pool's history.
    for (auto it = m_job_book.ended().rbegin();
         it != m_job_book.ended().rend() && out.recent.size() < k_overview_recent; ++it) {
        const JobRecord& j = m_job_book.jobs().at(it->second);
        if (visible(j.team)) {
            out.recent.push_back(overview_job(j));
        }
    }

    for (const auto& [id, t] : m_tokens.teams()) {
        if (visible(id)) {
            out.credits.push_back({t.name, m_credits.ledger().balance(credits::Account::of_team(id.value())),
                                   m_credits.ledger().held_by_team(id.value())});
        }
    }
    return out;
}

OverviewTotals Coordinator::pool_totals() const {
    OverviewTotals t;
    const std::vector<GpuLoad> loads = gpu_loads(m_job_book.active(), m_job_book.attempts());
    for (const auto& [id, w] : m_roster.workers()) {
        const bool online = is_online(presence(id));
        t.workers += 1;
        t.workers_online += online ? 1 : 0;
        for (const auto& g : w.inventory.gpus) {
            count_gpu(t, online, load_of(loads, id, g.index));
        }
    }
    t.jobs_queued = static_cast<std::int64_t>(m_job_book.queued().size());
    t.jobs_running = static_cast<std::int64_t>(m_job_book.active().size());
    return t;
}

void Coordinator::record_sample(std::int64_t now) {
    if (m_options.sample_every_ms <= 0 || now < m_next_sample_at) {
        return;
    }
    // The whole pool, as an admin sees it: every team's work counts. Only the numbers: the
    // overview's lists of a large pool cost tens of milliseconds on the coordinator thread.
    const OverviewTotals t = pool_totals();
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
