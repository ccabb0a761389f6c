// ModelPrefetch: downloads the model weights an assignment names (`[cache] models`) into the
// worker's model cache before its job starts, one download at a time on a thread of its own, so the
// agent's loop never waits on the network. The agent keeps the assignment waiting (its lease renewed,
// not started, so not billed) until result() says the download is over.
//
// Rules:
// - want() queues the models the cache does not hold complete; it returns false when there is
//   nothing to fetch (the job starts at once). A model id that is not valid is skipped (the
//   coordinator validated it; a worker never fetches what it cannot name).
// - The thread fetches each queued attempt's models in turn (HubFetcher: resumable, verified).
//   Models a running or waiting job names are pinned: eviction never removes them.
// - result() is nullopt while the attempt's download is queued or running, then its outcome once
//   (an Error says which model failed and why; the job then starts anyway, and finds what it needs
//   through its own downloads).
// - forget() drops an attempt (cancelled, handed back): its download stops at the next progress
//   callback (what came stays, to be resumed by the next job that needs it).
// - progress() lists each waiting attempt's bytes so far (the heartbeat's `fetching`).
// - The destructor stops the thread (cancelling the download in flight).
// Thread-safe.
#pragma once

#include "core/api/heartbeat.hpp"
#include "core/util/ids.hpp"
#include "core/util/result.hpp"
#include "core/util/thread_safety.hpp"
#include "worker/cache/hub_cache.hpp"
#include "worker/cache/hub_fetch.hpp"

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace gpupool::worker {

class ModelPrefetch {
public:
    ModelPrefetch(HubCache& cache, HubOptions hub);
    ~ModelPrefetch();
    ModelPrefetch(const ModelPrefetch&) = delete;
    ModelPrefetch& operator=(const ModelPrefetch&) = delete;

    // Queues what `models` lacks for `id`; false when the cache holds them all (or none is valid).
    bool want(AttemptId id, const std::vector<std::string>& models);
    std::optional<Status> result(AttemptId id);
    void forget(AttemptId id);
    std::vector<api::FetchProgress> progress() const;
    // The models jobs use now (repos, "org/name"): never evicted.
    void set_pinned(std::set<std::string> repos);

private:
    struct Want {
        AttemptId id{};
        std::vector<ModelRef> models;
    };
    void loop();
    Status fetch_all(const Want& w);

    HubCache& m_cache;
    HubFetcher m_fetcher;
    mutable util::Mutex m_mu;
    std::condition_variable_any m_cv;
    std::deque<Want> m_queue GUARDED_BY(m_mu);
    std::map<AttemptId, api::FetchProgress> m_progress GUARDED_BY(m_mu); // queued or running
    std::map<AttemptId, Status> m_done GUARDED_BY(m_mu);
    std::set<std::string> m_pinned GUARDED_BY(m_mu);
    bool m_stop GUARDED_BY(m_mu) = false;
    std::thread m_thread; // started by the first want() that queues something
};

} // namespace gpupool::worker
