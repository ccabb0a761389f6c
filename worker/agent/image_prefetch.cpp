#include "worker/agent/image_prefetch.hpp"

#include <spdlog/spdlog.h>

#include <chrono>

namespace gpupool::worker {

ImagePrefetch::ImagePrefetch(ContainerRuntime& runtime, std::function<void()> wake)
    : m_runtime(runtime), m_wake(std::move(wake)) {}

ImagePrefetch::~ImagePrefetch() {
    {
        util::MutexLock lock(m_mu);
        m_stop = true;
    }
    m_cv.notify_all();
    if (m_thread.joinable()) {
        m_thread.join();
    }
}

bool ImagePrefetch::want(AttemptId id, const std::string& image) {
    if (image.empty()) {
        return false;
    }
    {
        util::MutexLock lock(m_mu);
        if (m_present.count(image) != 0) {
            return false;
        }
        if (m_pulling.count(id) != 0 || m_done.count(id) != 0) {
            return true; // already asked
        }
        m_pulling.insert(id);
        m_queue.push_back({id, image});
        if (!m_thread.joinable()) {
            m_thread = std::thread([this] { loop(); });
        }
    }
    m_cv.notify_all();
    return true;
}

std::optional<Status> ImagePrefetch::result(AttemptId id) {
    util::MutexLock lock(m_mu);
    auto it = m_done.find(id);
    if (it == m_done.end()) {
        return std::nullopt;
    }
    Status st = std::move(it->second);
    m_done.erase(it);
    return st;
}

void ImagePrefetch::forget(AttemptId id) {
    util::MutexLock lock(m_mu);
    std::erase_if(m_queue, [&](const Want& w) { return w.id == id; });
    m_pulling.erase(id);
    m_done.erase(id);
}

void ImagePrefetch::loop() {
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
        const auto began = std::chrono::steady_clock::now();
        Status st = m_runtime.ensure_image(w.image);
        const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - began);
        if (!st) {
            spdlog::warn("attempt {}: image {}: {}", w.id.value(), w.image, st.error().message);
        } else if (ms.count() >= 1000) {
            spdlog::info("attempt {}: image {} ready after {} s (not billed)", w.id.value(), w.image,
                         ms.count() / 1000);
        }
        {
            util::MutexLock lock(m_mu);
            if (st) {
                m_present.insert(w.image);
            }
            if (m_pulling.erase(w.id) != 0) {
                m_done[w.id] = std::move(st);
            }
        }
        if (m_wake) {
            m_wake();
        }
    }
}

} // namespace gpupool::worker
