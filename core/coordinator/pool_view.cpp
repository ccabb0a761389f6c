// PoolView: the scheduler's picture of the pool, changed record by record (pool_view.hpp).
//
// Three lists reach the scheduler: live workers, the attempts running on them and the queued jobs,
// each in id order. Each has a map of prepared entries that is the truth and a list that is its
// copy for the scheduler. A change edits the map (a job's request is made once, when it joins the
// queue; an attempt's use of its worker is added when it starts and taken back when it ends) and
// notes what moved; refresh() brings the lists level. The slots of changed workers are overwritten
// in place; the worker list is rebuilt only when a worker joins or leaves the view. The attempt and
// job lists are copied from their maps when they changed: no record is read, no request made.
// GPU model masks cover live models only, as a per-pass catalog would: a job naming only models
// no live worker has is `no_known_model`, so the live set changing re-masks the queue.
#include "core/coordinator/pool_view.hpp"

#include "core/coordinator/internal.hpp"

#include <algorithm>
#include <iterator>

namespace gpupool::coordinator {

using namespace gpupool::store;

PoolView::PoolView(std::int64_t worker_timeout_ms, sched::ModelCatalog seed) : m_timeout_ms(worker_timeout_ms) {
    m_view.models = std::move(seed);
    m_model_gpus.assign(m_view.models.size(), 0);
}

// ---- workers ------------------------------------------------------------------------------------

void PoolView::intern_models(WorkerEntry& entry, const LiveWorker& worker) {
    for (const auto& gpu : entry.base.gpus) {
        if (gpu.model < m_model_gpus.size()) {
            --m_model_gpus[gpu.model];
        }
    }
    entry.base.gpus = worker.gpus;
    const std::size_t known = m_view.models.size();
    for (std::size_t g = 0; g < entry.base.gpus.size(); ++g) {
        const std::uint32_t model = m_view.models.intern(worker.gpu_models[g]);
        entry.base.gpus[g].model = model;
        if (model == sched::ModelCatalog::k_uncatalogued) {
            m_overflowed = true;
            continue;
        }
        m_model_gpus.resize(m_view.models.size(), 0);
        ++m_model_gpus[model];
    }
    if (m_view.models.size() != known) {
        m_membership_changed = true; // the live models are worked out again, and the queue re-masked
    }
}

void PoolView::set_worker(WorkerId id, const LiveWorker& worker) {
    auto [it, added] = m_workers.try_emplace(id);
    WorkerEntry& e = it->second;
    const bool offered = e.offers;
    e.offers = worker.record.state == WorkerState::active && !worker.draining &&
               worker.sharing == api::SharingState::sharing && !worker.unconfirmed && worker.heard;
    e.last_seen_ms = worker.record.last_seen_at;
    sched::Worker& b = e.base;
    b.id = id;
    b.name = worker.record.name;
    b.cpu_milli_total = b.cpu_milli_free = worker.cpu_milli;
    b.memory_mib_total = b.memory_mib_free = worker.memory_mib;
    b.slots_free = worker.slots > 0 ? std::optional<std::int64_t>(worker.slots) : std::nullopt;
    b.terms = worker.placement_terms;
    b.owner = worker.record.team;
    if (added || worker.gpus.size() != b.gpus.size() || worker.gpu_models.size() != b.gpus.size() ||
        !std::equal(worker.gpus.begin(), worker.gpus.end(), b.gpus.begin(),
                    [](const sched::Gpu& x, const sched::Gpu& y) { return x.memory_mib == y.memory_mib; }) ||
        !std::equal(worker.gpu_models.begin(), worker.gpu_models.end(), b.gpus.begin(),
                    [this](const std::string& m, const sched::Gpu& g) { return m_view.models.name(g.model) == m; })) {
        intern_models(e, worker);
        // What runs on it, counted again against the GPUs it has now.
        e.gpu_used.assign(b.gpus.size(), 0);
        e.cpu_used = e.memory_used = e.attempts = 0;
        for (const auto& [aid, a] : m_active) {
            if (a.running.worker == id) {
                add_use(e, a.running, +1);
            }
        }
        m_membership_changed = true; // the live models may differ
    }
    for (std::size_t g = 0; g < b.gpus.size() && g < worker.gpus.size(); ++g) {
        b.gpus[g].fractional_ok = worker.gpus[g].fractional_ok;
    }
    b.cached_models.clear();
    for (const auto& m : worker.inventory.cached_models) {
        b.cached_models.push_back(m.model);
    }
    // Only indices of GPUs it has, once each: a heartbeat's list is the worker's word, and its
    // length is bounded by the body cap alone.
    e.unhealthy.clear();
    for (std::int64_t g : worker.unhealthy_gpus) {
        if (g >= 0 && static_cast<std::size_t>(g) < b.gpus.size() &&
            std::find(e.unhealthy.begin(), e.unhealthy.end(), g) == e.unhealthy.end()) {
            e.unhealthy.push_back(g);
        }
    }
    if (offered != e.offers) {
        m_membership_changed = true;
    }
    m_touched.insert(id);
}

sched::Worker PoolView::current(const WorkerEntry& e) const {
    sched::Worker w = e.base;
    w.cpu_milli_free -= e.cpu_used;
    w.memory_mib_free -= e.memory_used;
    if (w.slots_free) {
        *w.slots_free -= e.attempts;
    }
    for (std::size_t g = 0; g < w.gpus.size(); ++g) {
        const bool failing =
            std::find(e.unhealthy.begin(), e.unhealthy.end(), static_cast<std::int64_t>(g)) != e.unhealthy.end();
        // A failing GPU takes no new work (what runs on it still counts against it).
        w.gpus[g].milli_free = (failing ? 0 : w.gpus[g].milli_free) - (g < e.gpu_used.size() ? e.gpu_used[g] : 0);
    }
    return w;
}

void PoolView::refresh_workers(std::int64_t now_ms) {
    // A worker joins the view only through a change (set_worker touches it); it leaves through a
    // change or through time, and time takes the longest-unseen first.
    for (WorkerId id : m_touched) {
        WorkerEntry& e = m_workers.at(id);
        const bool live = e.offers && now_ms - e.last_seen_ms <= m_timeout_ms;
        if (e.in_view) {
            m_live_by_seen.erase({e.view_seen_ms, id});
        }
        if (live) {
            e.view_seen_ms = e.last_seen_ms;
            m_live_by_seen.insert({e.view_seen_ms, id});
        }
        if (live != e.in_view) {
            e.in_view = live;
            m_membership_changed = true;
        }
    }
    while (!m_live_by_seen.empty() && now_ms - m_live_by_seen.begin()->first > m_timeout_ms) {
        m_workers.at(m_live_by_seen.begin()->second).in_view = false;
        m_live_by_seen.erase(m_live_by_seen.begin());
        m_membership_changed = true;
    }
    if (m_membership_changed) {
        m_view.workers.clear();
        m_worker_index.clear();
        sched::ModelMask live_models = 0;
        for (const auto& [id, e] : m_workers) {
            if (!e.in_view) {
                continue;
            }
            m_worker_index[id] = m_view.workers.size();
            m_view.workers.push_back(current(e));
            for (const auto& g : e.base.gpus) {
                live_models |= g.model < sched::ModelCatalog::k_max_models ? sched::ModelMask{1} << g.model : 0;
            }
        }
        if (live_models != m_live_models) {
            m_live_models = live_models;
            remask_queued();
        }
        m_running_rebuild = true; // attempts on workers that left or came back
    } else {
        for (WorkerId id : m_touched) {
            if (auto slot = m_worker_index.find(id); slot != m_worker_index.end()) {
                m_view.workers[slot->second] = current(m_workers.at(id));
            }
        }
    }
    m_touched.clear();
    m_membership_changed = false;
}

// ---- attempts -----------------------------------------------------------------------------------

void PoolView::use(const Active& a, std::int64_t sign) {
    auto it = m_workers.find(a.running.worker);
    m_sweep_running[a.sweep] += sign;
    if (m_sweep_running[a.sweep] == 0) {
        m_sweep_running.erase(a.sweep);
    }
    if (it == m_workers.end()) {
        return;
    }
    add_use(it->second, a.running, sign);
    m_touched.insert(a.running.worker);
}

void PoolView::add_use(WorkerEntry& e, const sched::RunningJob& r, std::int64_t sign) {
    e.attempts += sign;
    e.cpu_used += sign * r.cpu_milli;
    e.memory_used += sign * r.memory_mib;
    for (std::uint32_t g : r.gpu_indices) {
        if (g < e.gpu_used.size()) {
            e.gpu_used[g] += sign * r.gpu_milli;
        }
    }
}

void PoolView::set_attempt(const AttemptRecord& a, const JobRecord& j, std::int64_t preempted) {
    auto old = m_active.find(a.id);
    if (old != m_active.end()) {
        use(old->second, -1);
        m_active.erase(old);
    }
    m_running_dirty.insert(a.id);
    if (!detail::is_active(a.state)) {
        return;
    }
    Active act;
    act.sweep = j.sweep_id;
    sched::RunningJob& r = act.running;
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
    // Only earlier attempts that were preempted count against the cap (not those lost or retried).
    r.preempted_before = preempted;
    r.checkpoint_every_s = j.spec.checkpoint.every_s; // what preempting it would lose (preemption.hpp)
    use(act, +1);
    m_active.emplace(a.id, std::move(act));
}

std::optional<sched::RunningJob> PoolView::running_entry(AttemptId id) const {
    auto it = m_active.find(id);
    if (it == m_active.end() || !m_worker_index.contains(it->second.running.worker)) {
        return std::nullopt;
    }
    sched::RunningJob r = it->second.running;
    // A worker may come back reporting fewer GPUs while an attempt on a later one still holds its
    // lease: the scheduler only ever sees indices of GPUs the worker has.
    const std::size_t count = m_workers.at(r.worker).base.gpus.size();
    std::erase_if(r.gpu_indices, [count](std::uint32_t g) { return g >= count; });
    return r;
}

void PoolView::refresh_running() {
    auto& running = m_view.running;
    if (m_running_rebuild) {
        running.clear();
        for (const auto& [id, a] : m_active) {
            if (auto r = running_entry(id)) {
                running.push_back(std::move(*r));
            }
        }
        m_running_rebuild = false;
        m_running_dirty.clear();
        return;
    }
    // Only the attempts that changed (a worker's GPU count changing sets m_membership_changed, and
    // with it a rebuild): replaced in place, dropped, or added in attempt order.
    std::vector<std::size_t> gone; // ascending, as the ids are
    std::vector<sched::RunningJob> added;
    for (AttemptId id : m_running_dirty) {
        auto at = std::lower_bound(running.begin(), running.end(), id,
                                   [](const sched::RunningJob& r, AttemptId x) { return r.attempt < x; });
        const bool present = at != running.end() && at->attempt == id;
        auto entry = running_entry(id);
        if (present && entry) {
            *at = std::move(*entry);
        } else if (present) {
            gone.push_back(static_cast<std::size_t>(at - running.begin()));
        } else if (entry) {
            added.push_back(std::move(*entry));
        }
    }
    m_running_dirty.clear();
    if (!gone.empty()) {
        std::size_t kept = gone.front();
        std::size_t next_gone = 0;
        for (std::size_t i = gone.front(); i < running.size(); ++i) {
            if (next_gone < gone.size() && gone[next_gone] == i) {
                ++next_gone;
                continue;
            }
            running[kept++] = std::move(running[i]);
        }
        running.resize(kept);
    }
    if (!added.empty()) {
        const auto mid = static_cast<std::ptrdiff_t>(running.size());
        std::move(added.begin(), added.end(), std::back_inserter(running));
        if (mid > 0 &&
            running[static_cast<std::size_t>(mid)].attempt < running[static_cast<std::size_t>(mid) - 1].attempt) {
            std::inplace_merge(
                running.begin(), running.begin() + mid, running.end(),
                [](const sched::RunningJob& x, const sched::RunningJob& y) { return x.attempt < y.attempt; });
        }
    }
}

// ---- queued jobs --------------------------------------------------------------------------------

void PoolView::count_queued(const Queued& q, int sign) {
    auto bump = [sign](auto& counts, const auto& key) {
        if ((counts[key] += sign) == 0) {
            counts.erase(key);
        }
    };
    bump(m_queued_by_team, q.request.team);
    bump(m_queued_by_member, q.request.member);
    if (q.sweep_cap > 0) {
        auto& [cap, count] = m_queued_by_sweep[q.request.sweep];
        cap = q.sweep_cap;
        if ((count += sign) == 0) {
            m_queued_by_sweep.erase(q.request.sweep);
        }
    }
}

void PoolView::set_job(const JobRecord& j, std::int64_t queued_since_ms, TokenId submitter, std::int64_t sweep_cap,
                       std::vector<sched::AvoidWorker> avoid, std::vector<TeamId> avoid_owners) {
    if (auto old = m_queued.find(j.id); old != m_queued.end()) {
        count_queued(old->second, -1);
        m_queued.erase(old);
        m_queued_changed = true;
    }
    if (j.state != JobState::queued) {
        return;
    }
    Queued q;
    q.request = sched::make_request(j.id, j.team, j.spec, queued_since_ms / 1000, m_view.models);
    q.request.sweep = j.sweep_id;
    q.request.member = submitter;
    q.request.avoid = std::move(avoid);
    q.request.avoid_owners = std::move(avoid_owners);
    q.request.pool_pays = j.is_check();
    q.models = j.spec.resources.gpu_models;
    mask(q);
    q.sweep_cap = sweep_cap;
    count_queued(q, +1);
    m_queued.emplace(j.id, std::move(q));
    m_queued_changed = true;
}

void PoolView::mask(Queued& q) const {
    if (!q.models.empty()) {
        q.request.gpu_models = m_view.models.mask(q.models) & m_live_models;
        q.request.no_known_model = q.request.gpu_models == 0;
    }
}

void PoolView::remask_queued() {
    for (auto& [id, q] : m_queued) {
        if (!q.models.empty()) {
            mask(q);
            m_queued_changed = true;
        }
    }
}

void PoolView::refresh_queued() {
    if (!m_queued_changed) {
        return;
    }
    m_queued_list.clear();
    m_queued_list.reserve(m_queued.size());
    for (const auto& [id, q] : m_queued) {
        m_queued_list.push_back(q.request);
    }
    m_queued_changed = false;
}

// ---- per pass -----------------------------------------------------------------------------------

const sched::ClusterView& PoolView::refresh(std::int64_t now_ms) {
    refresh_workers(now_ms);
    refresh_running();
    refresh_queued();
    return m_view;
}

std::map<SweepId, std::int64_t> PoolView::sweep_caps() const {
    std::map<SweepId, std::int64_t> out;
    for (const auto& [sweep, cap_count] : m_queued_by_sweep) {
        out[sweep] = cap_count.first;
    }
    return out;
}

std::vector<TeamId> PoolView::queued_teams() const {
    std::vector<TeamId> out;
    for (const auto& [team, n] : m_queued_by_team) {
        out.push_back(team);
    }
    return out;
}

std::vector<TokenId> PoolView::queued_members() const {
    std::vector<TokenId> out;
    for (const auto& [member, n] : m_queued_by_member) {
        out.push_back(member);
    }
    return out;
}

bool PoolView::needs_rebuild() const {
    return m_overflowed && std::find(m_model_gpus.begin(), m_model_gpus.end(), 0) != m_model_gpus.end();
}

std::optional<std::string> first_difference(const PoolView& a, const PoolView& b) {
    const auto& x = a.view();
    const auto& y = b.view();
    if (!(x.models == y.models)) {
        return "the GPU model catalogs differ";
    }
    for (std::size_t i = 0; i < std::max(x.workers.size(), y.workers.size()); ++i) {
        if (i >= x.workers.size() || i >= y.workers.size() || !(x.workers[i] == y.workers[i])) {
            return "workers differ at position " + std::to_string(i);
        }
    }
    for (std::size_t i = 0; i < std::max(x.running.size(), y.running.size()); ++i) {
        if (i >= x.running.size() || i >= y.running.size() || !(x.running[i] == y.running[i])) {
            return "running attempts differ at position " + std::to_string(i);
        }
    }
    for (std::size_t i = 0; i < std::max(a.queued().size(), b.queued().size()); ++i) {
        if (i >= a.queued().size() || i >= b.queued().size() || !(a.queued()[i] == b.queued()[i])) {
            return "queued jobs differ at position " + std::to_string(i);
        }
    }
    if (a.sweep_running() != b.sweep_running() || a.sweep_caps() != b.sweep_caps()) {
        return "sweep counts differ";
    }
    if (a.queued_teams() != b.queued_teams() || a.queued_members() != b.queued_members()) {
        return "queued teams or members differ";
    }
    return std::nullopt;
}

} // namespace gpupool::coordinator
