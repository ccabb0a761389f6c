#include "worker/owner/owner_policy.hpp"

#include "core/resources/quantity.hpp"
#include "core/util/time_text.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace gpupool::worker {

namespace {

constexpr std::int64_t k_pause_recheck_ms = 1'000;

std::string jobs_going_on(int running) {
    return std::to_string(running) + " running go on";
}

} // namespace

OwnerPolicy::OwnerPolicy(Options options, const util::Clock& wall)
    : m_opt(std::move(options)), m_wall(wall), m_settings(m_opt.start) {}

void OwnerPolicy::apply(ShareSettings settings) {
    m_settings = std::move(settings);
    m_window_known = false; // the windows may have changed
}

void OwnerPolicy::refresh(int running, bool now) {
    const std::int64_t wall = m_wall.now_ms();
    if (now || wall - m_pause_checked_ms >= k_pause_recheck_ms || wall < m_pause_checked_ms) {
        m_pause_checked_ms = wall;
        m_pause = read_pause(m_opt.work_dir);
        if (m_pause && m_pause->until_ms && *m_pause->until_ms <= wall) {
            // A timed pause ended: remove it so that a later start does not read it again.
            (void)resume_sharing(m_opt.work_dir);
            m_pause.reset();
        }
    }
    if (now || !m_window_known || (m_window.changes_at_ms && wall >= *m_window.changes_at_ms)) {
        const bool was_open = m_window_known ? m_window.open : true;
        m_window = sharing_window_at(m_settings.windows.value_or(std::vector<ShareWindow>{}), wall);
        m_window_known = true;
        if (!m_window.open && (was_open || !m_closed_at_ms)) {
            m_closed_at_ms = wall;
        } else if (m_window.open) {
            m_closed_at_ms.reset();
        }
    }
    api::SharingState s = api::SharingState::sharing;
    if (m_pause) {
        s = api::SharingState::paused;
    } else if (m_reclaimed) {
        s = api::SharingState::reclaimed;
    } else if (!m_window.open) {
        s = api::SharingState::outside_window;
    }
    set_state(s, running);
}

void OwnerPolicy::set_state(api::SharingState s, int running) {
    if (s == m_state && m_told) {
        return;
    }
    const auto before = m_state;
    m_state = s;
    const bool first = !m_told;
    m_told = true;
    if (first && s == api::SharingState::sharing) {
        return; // starting to share is what the worker's first line says
    }
    if (!m_opt.event) {
        return;
    }
    switch (s) {
    case api::SharingState::paused:
        m_opt.event("paused by the owner: no new jobs (" + jobs_going_on(running) + ")" +
                    (m_pause && m_pause->until_ms ? "; sharing again at " + util::local_time_text(*m_pause->until_ms)
                                                  : std::string("; `gpupool worker resume` shares again")));
        break;
    case api::SharingState::reclaimed:
        m_opt.event("the owner is using the GPU: no new jobs (" + jobs_going_on(running) + ")");
        break;
    case api::SharingState::outside_window:
        m_opt.event("outside the sharing window: no new jobs" +
                    (running > 0 ? "; " + std::to_string(running) + " running job(s) have " +
                                       resources::format_duration_s(drain_grace().count() / 1000) +
                                       " to finish, then go back to the queue"
                                 : std::string()) +
                    (m_window.changes_at_ms ? "; the next window opens " + util::local_time_text(*m_window.changes_at_ms)
                                            : std::string()));
        break;
    case api::SharingState::sharing:
        m_opt.event(std::string("sharing again: ") +
                    (before == api::SharingState::paused      ? "the owner resumed"
                     : before == api::SharingState::reclaimed ? "the owner's GPU use ended"
                                                              : "the sharing window opened") +
                    (m_window.changes_at_ms ? " (until " + util::local_time_text(*m_window.changes_at_ms) + ")" : ""));
        break;
    }
}

std::optional<std::int64_t> OwnerPolicy::changes_at_ms() const {
    if (m_pause) {
        return m_pause->until_ms; // the window may change meanwhile, the state does not
    }
    if (m_reclaimed) {
        return std::nullopt;
    }
    return m_window.changes_at_ms;
}

bool OwnerPolicy::window_grace_over() const {
    return m_closed_at_ms && !m_window.open && m_wall.now_ms() - *m_closed_at_ms >= drain_grace().count();
}

api::OwnerTerms OwnerPolicy::terms() const {
    api::OwnerTerms t;
    t.max_runtime_s = m_settings.max_runtime_s.value_or(0);
    t.teams = m_settings.teams.value_or(std::vector<std::string>{});
    t.registries = m_settings.registries.value_or(std::vector<std::string>{});
    t.max_jobs = m_settings.max_jobs.value_or(0);
    if (m_settings.windows) {
        // The zone as it is now: the owner wrote local times.
        const std::string now = util::local_time_text(m_wall.now_ms());
        const std::string zone = now.substr(now.rfind(' ') + 1);
        for (const auto& w : *m_settings.windows) {
            t.hours.push_back(window_text(w) + " " + zone);
        }
    }
    return t;
}

std::chrono::milliseconds OwnerPolicy::drain_grace() const {
    return m_settings.drain_grace_s ? std::chrono::milliseconds(*m_settings.drain_grace_s * 1000) : m_opt.drain_grace;
}

std::vector<GpuInfo> OwnerPolicy::offered_gpus(const std::vector<GpuInfo>& all) const {
    std::vector<GpuInfo> out;
    for (GpuInfo g : all) {
        const auto t = std::find_if(m_settings.gpus.begin(), m_settings.gpus.end(),
                                    [&](const GpuTerms& x) { return x.index == g.index; });
        if (t != m_settings.gpus.end()) {
            if (!t->share || t->keep_mib >= g.memory_mib) {
                continue;
            }
            g.memory_mib -= t->keep_mib;
        }
        out.push_back(std::move(g));
    }
    return out;
}

std::vector<GpuInfo> OwnerPolicy::jobs_view(const std::vector<GpuInfo>& all) const {
    std::vector<GpuInfo> out = all;
    for (const GpuInfo& o : offered_gpus(all)) {
        for (GpuInfo& g : out) {
            g = g.index == o.index ? o : g;
        }
    }
    return out;
}

std::optional<std::string> OwnerPolicy::refusal(const api::Assignment& a, const std::vector<GpuInfo>& all) const {
    if (!taking_work()) {
        return "the owner stopped sharing (" + describe() + ")";
    }
    if (a.gpu_index >= 0) {
        const auto offered = offered_gpus(all);
        if (std::none_of(offered.begin(), offered.end(), [&](const GpuInfo& g) { return g.index == a.gpu_index; })) {
            return "GPU " + std::to_string(a.gpu_index) + " is not shared by its owner";
        }
    }
    const auto t = terms();
    if (!t.teams.empty() && a.team_name.empty()) {
        return "the owner takes jobs of some teams only, and the coordinator did not name this job's team";
    }
    return api::outside_terms(t, a.team_name, a.spec.image, a.spec.resources.max_runtime_s);
}

Status OwnerPolicy::reload() {
    if (m_opt.config_file.empty()) {
        return make_error(ErrorCode::not_found,
                          "this worker was started without a worker.toml (--config): nothing to reload");
    }
    auto cfg = load_owner_config(m_opt.config_file);
    if (!cfg) {
        if (m_opt.event) {
            m_opt.event("reload: " + m_opt.config_file.string() + " not applied: " + cfg.error().describe());
        }
        return cfg.error();
    }
    apply(merge(m_opt.flags, cfg->share));
    if (m_opt.event) {
        m_opt.event("reload: applied " + m_opt.config_file.string() +
                    " ([pool] changes take effect at the next start)");
    }
    return {};
}

Status OwnerPolicy::pause(const std::string& why, std::optional<std::int64_t> until_ms) {
    auto st = pause_sharing(m_opt.work_dir, why, until_ms);
    m_pause_checked_ms = 0;
    return st;
}

Status OwnerPolicy::resume() {
    auto st = resume_sharing(m_opt.work_dir);
    m_pause_checked_ms = 0;
    return st;
}

void OwnerPolicy::set_reclaimed(bool reclaimed, int running) {
    m_reclaimed = reclaimed;
    refresh(running, true);
}

std::string OwnerPolicy::describe() const {
    switch (m_state) {
    case api::SharingState::paused:
        return "paused" +
               (m_pause && m_pause->until_ms ? " until " + util::local_time_text(*m_pause->until_ms) : std::string()) +
               (m_pause && !m_pause->why.empty() ? " (" + m_pause->why + ")" : std::string());
    case api::SharingState::reclaimed:
        return "reclaimed: the owner is using the GPU";
    case api::SharingState::outside_window:
        return "outside its sharing window" +
               (m_window.changes_at_ms ? "; the next window opens " + util::local_time_text(*m_window.changes_at_ms)
                                       : std::string());
    case api::SharingState::sharing:
        break;
    }
    return "sharing" + (m_window.changes_at_ms ? " until " + util::local_time_text(*m_window.changes_at_ms) : std::string());
}

} // namespace gpupool::worker
