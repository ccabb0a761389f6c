// pool_overview and pool_totals (overview.hpp): the pool at a glance, from the components' state in
// memory.
#include "core/coordinator/overview.hpp"

#include "core/coordinator/credit_desk.hpp"
#include "core/coordinator/internal.hpp"
#include "core/coordinator/job_book.hpp"
#include "core/coordinator/spot_checks.hpp"
#include "core/coordinator/token_book.hpp"
#include "core/coordinator/worker_roster.hpp"

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

// The names an overview's job lines repeat, each looked up once in a row: a queue of hundreds of
// jobs is mostly a few sweeps of one or two teams.
class Names {
public:
    Names(const TokenBook& tokens, const JobBook& jobs) : m_tokens(tokens), m_jobs(jobs) {}

    const std::string& team(TeamId id) {
        if (!m_team || m_team->first != id) {
            m_team.emplace(id, m_tokens.team_name(id));
        }
        return m_team->second;
    }
    // The label of the token the sweep was submitted with.
    const std::string& submitter(SweepId id) {
        if (!m_submitter || m_submitter->first != id) {
            m_submitter.emplace(id, m_tokens.token_name(m_jobs.sweeps().at(id).submitter_token));
        }
        return m_submitter->second;
    }

private:
    const TokenBook& m_tokens;
    const JobBook& m_jobs;
    std::optional<std::pair<TeamId, std::string>> m_team;
    std::optional<std::pair<SweepId, std::string>> m_submitter;
};

// One job's line; `why`: its waiting reason (queued) or its stored reason.
OverviewJob job_line(const JobRecord& j, Names& names, const std::string& why) {
    OverviewJob o;
    o.id = j.id;
    o.name = j.spec.name;
    o.team = names.team(j.team);
    o.submitter = names.submitter(j.sweep_id);
    o.state = to_string(j.state);
    o.since_ms = j.finished_at.value_or(j.created_at);
    o.exit_code = j.exit_code;
    o.why = why;
    return o;
}

// The workers with their GPUs: how much of each is given out (`shown`: the caller's part of
// `loads`, under summary), and the totals of capacity (every team's load).
void add_workers(PoolOverview& out, const OverviewSources& from, const std::vector<GpuLoad>& loads,
                 const std::vector<GpuLoad>& shown, bool full, const std::function<bool(TeamId)>& visible) {
    for (const auto& [id, w] : from.roster.workers()) {
        OverviewWorker ow;
        ow.id = id;
        ow.name = w.record.name;
        ow.team = (full || visible(w.record.team)) ? from.tokens.team_name(w.record.team) : std::string();
        ow.presence = from.roster.presence(id, from.now_ms);
        ow.last_seen_at = w.record.last_seen_at;
        if (const auto record = check_record(w.record); record.checks() > 0) {
            ow.reliability = verify::reliability(record);
        }
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
}

// The queue, oldest first, with why each job waits: the queue and the last pass's reasons are both
// in job order, so one walk of each pairs them.
void add_queue(PoolOverview& out, const OverviewSources& from, Names& names, bool admin,
               const std::function<bool(TeamId)>& visible) {
    const std::string not_weighed = k_waiting_for_pass;
    auto reason = from.waiting.begin();
    for (JobId id : from.jobs.queued()) {
        if (admin && out.queued.size() == k_overview_queue) {
            out.totals.jobs_queued = static_cast<std::int64_t>(from.jobs.queued().size());
            return; // an admin sees every queued job: the rest need not be walked to be counted
        }
        const JobRecord& j = from.jobs.jobs().at(id);
        if (!visible(j.team)) {
            continue;
        }
        out.totals.jobs_queued += 1;
        if (out.queued.size() < k_overview_queue) {
            while (reason != from.waiting.end() && reason->first < id) {
                ++reason;
            }
            const bool weighed = reason != from.waiting.end() && reason->first == id;
            out.queued.push_back(job_line(j, names, weighed ? reason->second : not_weighed));
        }
    }
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

Result<PoolOverview> pool_overview(const Principal& who, MembersSee members_see, const OverviewSources& from) {
    if (who.role != Role::admin && !(who.role == Role::member && who.team)) {
        return denied("the pool's overview is for admins and team members");
    }
    const bool admin = who.role == Role::admin;
    const std::function<bool(TeamId)> visible = [&](TeamId team) { return admin || *who.team == team; };
    PoolOverview out;
    out.at_ms = from.now_ms;
    out.detail = admin ? MembersSee::full : members_see;
    const bool full = out.detail == MembersSee::full;
    const JobBook& book = from.jobs;
    Names names(from.tokens, book);

    // What runs where: every active attempt counts on its GPU (the totals); the caller's are listed,
    // and under `summary` they alone make the per-GPU figures.
    const std::vector<GpuLoad> loads = gpu_loads(book.active(), book.attempts());
    const std::vector<GpuLoad> shown = full ? loads : gpu_loads(book.active(), book.attempts(), [&](const AttemptRecord& a) {
        return visible(book.jobs().at(a.job).team);
    });
    for (AttemptId id : book.active()) {
        const AttemptRecord& a = book.attempts().at(id);
        const JobRecord& j = book.jobs().at(a.job);
        if (!visible(j.team)) {
            continue;
        }
        OverviewJob o = job_line(j, names, j.reason);
        o.since_ms = a.assigned_at;
        o.worker = a.worker;
        const LiveWorker* w = from.roster.find(a.worker);
        o.worker_name = w != nullptr ? w->record.name : std::string();
        o.gpu_index = a.gpu_index;
        o.gpu_milli = a.gpu_milli;
        out.running.push_back(std::move(o));
    }
    out.totals.jobs_running = static_cast<std::int64_t>(out.running.size());
    add_workers(out, from, loads, shown, full, visible);
    add_queue(out, from, names, admin, visible);

    // The jobs that ended last, by when they ended (a long job submitted early can end after many
    // later ones): the newest k_overview_recent of the caller's ended jobs, from the index the job
    // book keeps, so that the dashboard's poll does not walk the pool's history.
    for (auto it = book.ended().rbegin(); it != book.ended().rend() && out.recent.size() < k_overview_recent; ++it) {
        const JobRecord& j = book.jobs().at(it->second);
        if (visible(j.team)) {
            out.recent.push_back(job_line(j, names, j.reason));
        }
    }

    for (const auto& [id, t] : from.tokens.teams()) {
        if (visible(id)) {
            out.credits.push_back({t.name, from.credits.ledger().balance(credits::Account::of_team(id.value())),
                                   from.credits.ledger().held_by_team(id.value())});
        }
    }
    return out;
}

OverviewTotals pool_totals(const WorkerRoster& roster, const JobBook& jobs, std::int64_t now_ms) {
    OverviewTotals t;
    const std::vector<GpuLoad> loads = gpu_loads(jobs.active(), jobs.attempts());
    for (const auto& [id, w] : roster.workers()) {
        const bool online = is_online(roster.presence(id, now_ms));
        t.workers += 1;
        t.workers_online += online ? 1 : 0;
        for (const auto& g : w.inventory.gpus) {
            count_gpu(t, online, load_of(loads, id, g.index));
        }
    }
    t.jobs_queued = static_cast<std::int64_t>(jobs.queued().size());
    t.jobs_running = static_cast<std::int64_t>(jobs.active().size());
    return t;
}

} // namespace gpupool::coordinator
