#include "worker/agent/model_prefetch.hpp"

#include <spdlog/spdlog.h>

#include <chrono>

namespace gpupool::worker {

namespace {
std::int64_t unix_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}
} // namespace

ModelPrefetch::ModelPrefetch(HubCache& cache, HubOptions hub) : m_cache(cache), m_fetcher(std::move(hub), cache) {}

ModelPrefetch::~ModelPrefetch() {
    {
        util::MutexLock lock(m_mu);
        m_stop = true;
    }
    m_cv.notify_all();
    if (m_thread.joinable()) {
        m_thread.join();
    }
}

bool ModelPrefetch::want(AttemptId id, const std::vector<std::string>& models) {
    Want w{id, {}};
    for (const auto& m : models) {
        auto ref = parse_model_ref(m);
        if (!ref) {
            spdlog::warn("attempt {}: model `{}` cannot be fetched: {}", id.value(), m, ref.error().message);
            continue;
        }
        if (m_cache.has(*ref)) {
            m_cache.touch(*ref, unix_ms());
        } else {
            w.models.push_back(std::move(*ref));
        }
    }
    if (w.models.empty()) {
        return false;
    }
    {
        util::MutexLock lock(m_mu);
        if (m_progress.count(id) != 0 || m_done.count(id) != 0) {
            return true; // already asked
        }
        m_progress[id] = api::FetchProgress{id, 0, 0};
        m_queue.push_back(std::move(w));
        if (!m_thread.joinable()) {
            m_thread = std::thread([this] { loop(); });
        }
    }
    m_cv.notify_all();
    return true;
}

std::optional<Status> ModelPrefetch::result(AttemptId id) {
    util::MutexLock lock(m_mu);
    auto it = m_done.find(id);
    if (it == m_done.end()) {
        return std::nullopt;
    }
    Status st = std::move(it->second);
    m_done.erase(it);
    return st;
}

void ModelPrefetch::forget(AttemptId id) {
    util::MutexLock lock(m_mu);
    std::erase_if(m_queue, [&](const Want& w) { return w.id == id; });
    m_progress.erase(id); // a running download sees it gone and stops
    m_done.erase(id);
}

std::vector<api::FetchProgress> ModelPrefetch::progress() const {
    util::MutexLock lock(m_mu);
    std::vector<api::FetchProgress> out;
    for (const auto& [id, p] : m_progress) {
        out.push_back(p);
    }
    return out;
}

void ModelPrefetch::set_pinned(std::set<std::string> repos) {
    util::MutexLock lock(m_mu);
    m_pinned = std::move(repos);
}

Status ModelPrefetch::fetch_all(const Want& w) {
    std::int64_t before = 0; // bytes of the models already fetched for this attempt
    for (const auto& m : w.models) {
        if (m_cache.has(m)) {
            continue; // another attempt fetched it meanwhile
        }
        std::set<std::string> pinned;
        {
            util::MutexLock lock(m_mu);
            pinned = m_pinned;
        }
        for (const auto& other : w.models) {
            pinned.insert(other.repo);
        }
        std::int64_t last_done = 0;
        auto st = m_fetcher.fetch(
            m, pinned,
            [&](const FetchProgress& p) {
                util::MutexLock lock(m_mu);
                auto it = m_progress.find(w.id);
                if (it == m_progress.end() || m_stop) {
                    return false; // forgotten, or the worker stops
                }
                last_done = p.done_bytes;
                it->second.done_bytes = before + p.done_bytes;
                it->second.total_bytes = before + p.total_bytes;
                return true;
            },
            unix_ms());
        if (!st) {
            return make_error(st.error().code, "fetching " + m.id() + ": " + st.error().message);
        }
        before += last_done;
        spdlog::info("attempt {}: model {} is in the cache", w.id.value(), m.id());
    }
    return {};
}

void ModelPrefetch::loop() {
    for (;;) {
        Want w;
        {
            util::MutexLock lock(m_mu);
            m_cv.wait(lock, [&]() REQUIRES(m_mu) { return m_stop || !m_queue.empty(); });
            if (m_stop) {
                return;
            }
            w = std::move(m_queue.front());
            m_queue.pop_front();
        }
        Status st = fetch_all(w);
        util::MutexLock lock(m_mu);
        if (m_progress.erase(w.id) != 0) { // still wanted
            m_done[w.id] = std::move(st);
        }
    }
}

} // namespace gpupool::worker
