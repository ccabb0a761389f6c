#include "core/coordinator/worker_roster.hpp"

#include "core/coordinator/internal.hpp"
#include "core/resources/quantity.hpp"

#include <algorithm>

namespace gpupool::coordinator {

using store::WorkerRecord;
using store::WorkerState;
using detail::k_no_worker_connected;

namespace {

// A worker's GPUs go into the scheduler's fixed arrays (fragmentation.hpp): the wire's cap must fit.
static_assert(api::k_max_gpus == sched::k_max_gpus_per_worker, "api::k_max_gpus is the scheduler's cap");

// The worker's inventory as the scheduler reads it (GPUs with their models, CPU, RAM, slots).
void set_inventory(LiveWorker& live, api::Inventory inventory, bool whole_gpu_only_unenforced) {
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

// What first_difference compares: all a LiveWorker holds that absorb() derives from the records.
bool same_durable(const LiveWorker& a, const LiveWorker& b) {
    return a.record == b.record && a.inventory == b.inventory && a.gpus == b.gpus && a.gpu_models == b.gpu_models &&
           a.cpu_milli == b.cpu_milli && a.memory_mib == b.memory_mib && a.slots == b.slots &&
           a.model_mismatch == b.model_mismatch && a.unconfirmed == b.unconfirmed;
}

} // namespace

WorkerRoster::WorkerRoster(RosterOptions options, const credits::RateCatalog& rates)
    : m_options(options), m_rates(&rates) {}

const LiveWorker* WorkerRoster::find(WorkerId id) const {
    auto it = m_workers.find(id);
    return it == m_workers.end() ? nullptr : &it->second;
}

bool WorkerRoster::banned(WorkerId id) const {
    const LiveWorker* w = find(id);
    return w != nullptr && w->record.state == WorkerState::banned;
}

bool WorkerRoster::reachable(const LiveWorker& w, std::int64_t now_ms) const {
    return !w.unconfirmed && now_ms - w.record.last_seen_at <= m_options.worker_timeout_ms;
}

std::string WorkerRoster::presence(WorkerId id, std::int64_t now_ms) const {
    const LiveWorker& w = m_workers.at(id);
    if (w.record.state == WorkerState::banned) {
        return "banned";
    }
    if (w.record.state == WorkerState::quarantined) {
        return "quarantined"; // the admin's to lift, whether it is heard or not
    }
    if (!reachable(w, now_ms)) {
        return "offline";
    }
    if (w.record.state == WorkerState::draining) {
        return "drained";
    }
    if (w.draining) {
        return "draining";
    }
    switch (w.sharing) {
    case api::SharingState::paused:
        return "paused";
    case api::SharingState::outside_window:
        return "off-hours";
    case api::SharingState::reclaimed:
        return "reclaimed";
    case api::SharingState::sharing:
        break;
    }
    return "online";
}

std::vector<WorkerId> WorkerRoster::enrolled_with(WorkerId id) const {
    std::vector<WorkerId> out;
    const std::optional<TokenId>& token = m_workers.at(id).record.enrolled_by;
    if (!token) {
        return out;
    }
    for (const auto& [other, w] : m_workers) {
        if (other != id && w.record.enrolled_by == token) {
            out.push_back(other);
        }
    }
    return out;
}

std::int64_t WorkerRoster::largest_cpu_milli() const {
    return m_cpu_counts.empty() ? 0 : std::max<std::int64_t>(0, m_cpu_counts.rbegin()->first);
}

std::int64_t WorkerRoster::largest_memory_mib() const {
    return m_memory_counts.empty() ? 0 : std::max<std::int64_t>(0, m_memory_counts.rbegin()->first);
}

std::vector<std::string> WorkerRoster::inventory_warnings(const api::Inventory& inventory) const {
    std::vector<std::string> out;
    const auto& rates = *m_rates;
    for (const auto& g : inventory.gpus) {
        if (rates.find(g.model) == nullptr) {
            out.push_back("GPU model `" + g.model + "` is not in the GPU catalog (" + rates.source +
                          "): its time is priced at the default rate of " +
                          detail::credits_text(rates.default_micro_per_gpu_hour) +
                          " per GPU-hour; ask the pool's admins to add it");
        }
    }
    if (auto mismatch = model_mismatch_of(inventory); !mismatch.empty()) {
        out.push_back("GPU model and memory disagree: " + mismatch +
                      "; its time is priced at the catalog model's rate: check the GPUs this worker declares (or "
                      "whether its owner keeps part of their memory, keep_mib)");
    }
    return out;
}

std::string WorkerRoster::model_mismatch_of(const api::Inventory& inventory) const {
    constexpr std::size_t k_named = 3; // the rest are counted: the words stay short
    std::string out;
    std::size_t count = 0;
    for (const auto& g : inventory.gpus) {
        const credits::GpuRate* known = m_rates->memory_mismatch(g.model, g.memory_mib);
        if (known == nullptr) {
            continue;
        }
        if (++count <= k_named) {
            out += (out.empty() ? "" : "; ") + std::string("GPU ") + std::to_string(g.index) + " `" + g.model +
                   "` with " + resources::format_memory_mib(g.memory_mib) + " (the catalog's " + known->model +
                   " has " + resources::format_memory_mib(known->memory_mib) + ")";
        }
    }
    if (count > k_named) {
        out += " and " + std::to_string(count - k_named) + " more";
    }
    return out;
}

const api::FetchProgress* WorkerRoster::fetching(WorkerId worker, AttemptId attempt) const {
    auto mine = m_fetching.find(worker);
    if (mine == m_fetching.end()) {
        return nullptr;
    }
    auto it = mine->second.find(attempt);
    return it == mine->second.end() ? nullptr : &it->second;
}

bool WorkerRoster::note_heartbeat(WorkerId id, const api::Heartbeat& beat, const api::Inventory* inventory,
                                  std::int64_t now_ms, const TokenBook& teams) {
    LiveWorker& live = m_workers.at(id);
    const bool reachable_before = reachable(live, now_ms);
    const auto unhealthy_before = live.unhealthy_gpus;
    const bool draining_before = live.draining;
    const auto sharing_before = live.sharing;
    const auto terms_before = live.terms;
    const bool heard_before = live.heard;
    live.heard = true;
    // A GPU its owner reclaimed takes no new work, as a failing one (what runs there stops on the worker).
    live.unhealthy_gpus = api::gpus_without_new_work(beat);
    live.draining = beat.draining;
    live.sharing = beat.sharing;
    live.sharing_changes_at_ms = beat.sharing_changes_at_ms;
    if (beat.terms != live.terms) {
        set_terms(id, beat.terms, teams);
    }
    // Memory in use counts only when it lines up with the GPUs the worker has (now, or as it says).
    const std::size_t gpus = (inventory != nullptr ? *inventory : live.inventory).gpus.size();
    live.gpu_memory_used_mib =
        beat.gpu_memory_used_mib.size() == gpus ? beat.gpu_memory_used_mib : std::vector<std::int64_t>{};
    return !reachable_before || unhealthy_before != live.unhealthy_gpus || draining_before != live.draining ||
           sharing_before != live.sharing || terms_before != live.terms || !heard_before;
}

void WorkerRoster::note_registration(WorkerId id, std::optional<api::OwnerTerms> terms, const TokenBook& teams) {
    set_terms(id, std::move(terms), teams);
    m_workers.at(id).heard = true;
}

void WorkerRoster::set_terms(WorkerId id, std::optional<api::OwnerTerms> terms, const TokenBook& teams) {
    LiveWorker& live = m_workers.at(id);
    live.terms = std::move(terms);
    live.placement_terms.reset();
    if (!live.terms) {
        return;
    }
    sched::WorkerTerms& t = live.placement_terms.emplace();
    t.max_runtime_s = live.terms->max_runtime_s;
    t.registries = live.terms->registries;
    if (!live.terms->teams.empty()) {
        t.teams = teams.team_ids(live.terms->teams);
    }
}

void WorkerRoster::note_fetching(WorkerId id, const std::vector<api::FetchProgress>& fetching,
                                 const std::set<AttemptId>& assigned) {
    m_fetching.erase(id);
    for (const auto& f : fetching) {
        if (assigned.count(f.attempt) != 0) {
            m_fetching[id][f.attempt] = f;
        }
    }
}

void WorkerRoster::forget_fetching(WorkerId id, AttemptId attempt) {
    if (auto mine = m_fetching.find(id); mine != m_fetching.end()) {
        mine->second.erase(attempt);
        if (mine->second.empty()) {
            m_fetching.erase(mine);
        }
    }
}

void WorkerRoster::count(const LiveWorker& w, int sign) {
    if (w.record.state == WorkerState::banned) {
        return;
    }
    for (auto [counts, amount] : {std::pair{&m_cpu_counts, w.cpu_milli}, std::pair{&m_memory_counts, w.memory_mib}}) {
        if (sign > 0) {
            ++(*counts)[amount];
        } else if (auto it = counts->find(amount); it != counts->end() && --it->second == 0) {
            counts->erase(it);
        }
    }
    for (std::size_t g = 0; g < w.gpus.size(); ++g) {
        const std::string& model = g < w.gpu_models.size() ? w.gpu_models[g] : std::string();
        const std::pair<std::string, std::int64_t> kind{model, w.gpus[g].memory_mib};
        if (sign > 0) {
            auto [it, fresh] = m_gpu_kinds.try_emplace(kind);
            if (fresh) {
                it->second.rate = m_rates->gpu_rate(model);
            }
            ++it->second.gpus;
        } else if (auto it = m_gpu_kinds.find(kind); it != m_gpu_kinds.end() && --it->second.gpus == 0) {
            m_gpu_kinds.erase(it);
        }
    }
}

std::vector<WorkerId> WorkerRoster::absorb(const store::Changes& changes, const TokenBook& teams) {
    std::set<WorkerId> changed;
    if (!changes.teams.empty()) {
        // A new team may be one an owner's terms name (they name teams, the scheduler compares ids).
        for (auto& [id, live] : m_workers) {
            if (live.terms && !live.terms->teams.empty()) {
                set_terms(id, live.terms, teams);
                changed.insert(id);
            }
        }
    }
    for (const WorkerRecord& w : changes.workers) {
        auto [at, fresh] = m_workers.try_emplace(w.id);
        LiveWorker& live = at->second;
        if (!fresh) {
            count(live, -1);
        } else {
            live.heard = false; // loaded (a registration says it at once): its owner's word comes with its heartbeat
        }
        live.record = w;
        // Validated when it arrived; a row that no longer reads (edited by hand) offers nothing.
        auto inv = api::inventory_from_text(w.inventory_json);
        set_inventory(live, inv ? std::move(*inv) : api::Inventory{}, m_options.whole_gpu_only_unenforced);
        live.model_mismatch = model_mismatch_of(live.inventory);
        live.unconfirmed = w.last_seen_at < m_restored_at_ms;
        count(live, +1);
        changed.insert(w.id);
    }
    return {changed.begin(), changed.end()};
}

std::optional<std::string> WorkerRoster::first_difference(const WorkerRoster& rebuilt) const {
    for (const auto& [id, w] : rebuilt.m_workers) {
        const LiveWorker* mine = find(id);
        if (mine == nullptr) {
            return "worker " + std::to_string(id.value()) + " missing";
        }
        if (!same_durable(*mine, w)) {
            return "worker " + std::to_string(id.value()) + " differs";
        }
    }
    if (m_workers.size() != rebuilt.m_workers.size()) {
        return "workers: " + std::to_string(m_workers.size()) + " kept, " + std::to_string(rebuilt.m_workers.size()) +
               " in the store";
    }
    if (m_gpu_kinds != rebuilt.m_gpu_kinds) {
        return "GPU kind counts differ";
    }
    if (m_cpu_counts != rebuilt.m_cpu_counts || m_memory_counts != rebuilt.m_memory_counts) {
        return "CPU or memory counts differ";
    }
    return std::nullopt;
}

std::optional<std::string> WorkerRoster::infeasible_reason(const recipe::Resources& r) const {
    // Only once the pool has workers: an empty pool may still be filling up.
    if (m_workers.empty()) {
        return std::nullopt;
    }
    // The largest worker and GPUs among those not banned, from the counts absorb() keeps: a few kinds of
    // GPU and of machine, however many workers.
    const std::int64_t max_cpu = largest_cpu_milli();
    const std::int64_t max_mem = largest_memory_mib();
    std::int64_t max_gpu_mem = 0;
    bool model_seen = r.gpu_models.empty();
    for (const auto& [kind, count] : m_gpu_kinds) {
        const auto& [model, memory_mib] = kind;
        if (r.gpu_models.empty() || std::find(r.gpu_models.begin(), r.gpu_models.end(), model) != r.gpu_models.end()) {
            model_seen = true;
            max_gpu_mem = std::max(max_gpu_mem, memory_mib);
        }
    }
    if (max_cpu == 0 && max_mem == 0 && m_gpu_kinds.empty()) {
        // Workers joined once but none offers anything now (banned): said as it is, not as a size
        // that no worker reaches.
        const bool all_banned = std::all_of(m_workers.begin(), m_workers.end(),
                                            [](const auto& w) { return w.second.record.state == WorkerState::banned; });
        return std::string(k_no_worker_connected) + (all_banned ? " (every worker that joined it is banned)" : "");
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

std::string WorkerRoster::no_worker_reason(std::int64_t now) const {
    // "no worker is taking work: 1 is paused by its owner, 2 are outside their owners' sharing
    // hours (the first shares again in 3h10m)"
    std::size_t paused = 0;
    std::size_t off_hours = 0;
    std::size_t reclaimed = 0;
    std::optional<std::int64_t> next;
    for (const auto& [id, w] : m_workers) {
        const std::string p = presence(id, now);
        paused += p == "paused" ? 1 : 0;
        off_hours += p == "off-hours" ? 1 : 0;
        reclaimed += p == "reclaimed" ? 1 : 0;
        if ((p == "paused" || p == "off-hours") && w.sharing_changes_at_ms && *w.sharing_changes_at_ms > now) {
            next = std::min(next.value_or(*w.sharing_changes_at_ms), *w.sharing_changes_at_ms);
        }
    }
    if (paused + off_hours + reclaimed == 0) {
        return k_no_worker_connected;
    }
    std::string out = "no worker is taking work";
    std::string sep = ": ";
    auto add = [&](std::size_t n, const char* one, const char* many) {
        if (n > 0) {
            out += sep + std::to_string(n) + (n == 1 ? one : many);
            sep = ", ";
        }
    };
    add(paused, " is paused by its owner", " are paused by their owners");
    add(off_hours, " is outside its owner's sharing hours", " are outside their owners' sharing hours");
    add(reclaimed, " is in use by its owner", " are in use by their owners");
    if (next) {
        out += " (the first shares again in " + resources::format_duration_s((*next - now + 999) / 1000) + ")";
    }
    return out;
}

credits::Micro WorkerRoster::attempt_price(const recipe::Resources& r, WorkerId worker, std::int64_t gpu_index,
                                           std::int64_t gpu_milli) const {
    const credits::RateCatalog& rates = *m_rates;
    std::optional<credits::PricedGpu> on;
    if (gpu_index >= 0) {
        const LiveWorker& w = m_workers.at(worker);
        const auto g = static_cast<std::size_t>(gpu_index);
        on.emplace(credits::PricedGpu{rates.gpu_rate(g < w.gpu_models.size() ? w.gpu_models[g] : std::string()),
                                      g < w.gpus.size() ? w.gpus[g].memory_mib : 0});
    }
    return credits::attempt_price_per_hour({r.gpus, gpu_milli, r.gpu_memory_mib, r.cpu_milli}, on,
                                           rates.cpu_micro_per_core_hour);
}

} // namespace gpupool::coordinator
