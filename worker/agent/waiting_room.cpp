#include "worker/agent/waiting_room.hpp"

#include "core/resources/quantity.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <limits>

namespace gpupool::worker {

bool gpu_share_free(const api::Assignment& a, const AttemptTable& running) {
    if (a.gpu_index < 0 || a.gpu_milli <= 0) {
        return true;
    }
    std::int64_t used = 0;
    for (const auto& [id, t] : running) {
        if (t.running() && t.a.gpu_index == a.gpu_index) {
            used += t.a.gpu_milli;
        }
    }
    return used + a.gpu_milli <= resources::k_milli_per_gpu;
}

namespace {
constexpr std::int64_t k_after_kill_ms = 2'000; // a killed job's GPU memory is freed within this
} // namespace

bool WaitingRoom::holds(AttemptId id) const {
    return std::any_of(m_waiting.begin(), m_waiting.end(), [&](const Waiting& w) { return w.a.attempt == id; });
}

void WaitingRoom::wait_for_models(api::Assignment a, std::int64_t now_ms) {
    if (!holds(a.attempt)) {
        spdlog::info("attempt {}: fetching its model weights before it starts", a.attempt.value());
        m_waiting.push_back({std::move(a), now_ms, true, {}, false});
    }
}

void WaitingRoom::wait_for_image(api::Assignment a, std::int64_t now_ms, bool models_too) {
    if (!holds(a.attempt)) {
        spdlog::info("attempt {}: making its image {} present before it starts", a.attempt.value(), a.spec.image);
        m_waiting.push_back({std::move(a), now_ms, models_too, {}, true});
    }
}

bool WaitingRoom::image_in(Waiting& w, std::int64_t now, std::optional<std::string>& unavailable) {
    if (!w.pulling) {
        return true;
    }
    auto done = m_images != nullptr ? m_images->result(w.a.attempt) : std::optional<Status>(Status());
    if (!done) {
        return false;
    }
    w.pulling = false;
    w.since_ms = now; // the GPU wait counts from here
    if (!*done && done->error().code == ErrorCode::not_found) {
        unavailable = done->error().message;
    } else if (!*done) {
        w.note += (w.note.empty() ? "" : "; ") + std::string("pulling its image failed (") + done->error().message +
                  "); the job starts anyway";
    }
    return true;
}

void WaitingRoom::wait_for_gpu(api::Assignment a, std::int64_t now_ms) {
    if (!holds(a.attempt)) {
        spdlog::info("attempt {}: waiting for GPU {} to be freed by the jobs still stopping on it", a.attempt.value(),
                     a.gpu_index);
        m_waiting.push_back({std::move(a), now_ms, false, {}, false});
    }
}

std::vector<WaitingRoom::Ready> WaitingRoom::ready(std::int64_t now, const AttemptTable& running,
                                                   ModelPrefetch* prefetch) {
    std::vector<Ready> out;
    for (auto it = m_waiting.begin(); it != m_waiting.end();) {
        std::optional<std::string> unavailable;
        if (!image_in(*it, now, unavailable)) {
            ++it;
            continue;
        }
        if (unavailable) {
            if (prefetch != nullptr) {
                prefetch->forget(it->a.attempt); // its weights are no use now
            }
            out.push_back({std::move(it->a), {}, std::move(unavailable)});
            it = m_waiting.erase(it);
            continue;
        }
        if (it->fetching) {
            auto done = prefetch != nullptr ? prefetch->result(it->a.attempt) : std::optional<Status>(Status());
            if (!done) {
                ++it;
                continue;
            }
            if (!*done) {
                spdlog::warn("attempt {}: {}; starting it anyway", it->a.attempt.value(), done->error().message);
                it->note += (it->note.empty() ? "" : "; ") + done->error().message +
                            "; the job starts without it (HF_HOME is in its team's writable cache, for its own "
                            "downloads)";
            }
            it->fetching = false; // now wait for the GPU share, if need be
            it->since_ms = now;
        }
        const bool free = gpu_share_free(it->a, running);
        // A job stopping there may have asked for longer to save its progress ([checkpoint] grace):
        // wait for its SIGKILL (and a moment for the GPU to be released), not only gpu_wait_max. One
        // whose SIGKILL is due but not sent yet (the agent's step sends it after this; a late step,
        // or a clock that jumped) is waited for whatever the time: never both at once on the GPU.
        std::int64_t wait_until = it->since_ms + m_gpu_wait_max.count();
        for (const auto& [id, t] : running) {
            if (t.running() && t.a.gpu_index == it->a.gpu_index && t.kill_at_ms) {
                wait_until = std::max(wait_until, t.killed ? *t.kill_at_ms + k_after_kill_ms
                                                           : std::numeric_limits<std::int64_t>::max());
            }
        }
        if (!free && now < wait_until) {
            ++it;
            continue;
        }
        if (!free) {
            spdlog::warn("attempt {}: GPU {} still looks full after {} s; starting it anyway", it->a.attempt.value(),
                         it->a.gpu_index, (now - it->since_ms) / 1000);
        }
        out.push_back({std::move(it->a), std::move(it->note), std::nullopt});
        it = m_waiting.erase(it);
    }
    return out;
}

bool WaitingRoom::cancel(AttemptId id, ModelPrefetch* prefetch) {
    if (std::erase_if(m_waiting, [&](const Waiting& w) { return w.a.attempt == id; }) == 0) {
        return false;
    }
    if (prefetch != nullptr) {
        prefetch->forget(id);
    }
    if (m_images != nullptr) {
        m_images->forget(id);
    }
    return true;
}

std::vector<AttemptId> WaitingRoom::take_all(ModelPrefetch* prefetch) {
    std::vector<AttemptId> out = ids();
    for (AttemptId id : out) {
        cancel(id, prefetch);
    }
    return out;
}

std::vector<AttemptId> WaitingRoom::ids() const {
    std::vector<AttemptId> out;
    for (const auto& w : m_waiting) {
        out.push_back(w.a.attempt);
    }
    return out;
}

void WaitingRoom::models(std::set<std::string>& into) const {
    for (const auto& w : m_waiting) {
        into.insert(w.a.spec.cache_models.begin(), w.a.spec.cache_models.end());
    }
}

} // namespace gpupool::worker
