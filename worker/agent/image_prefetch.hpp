// ImagePrefetch: makes each job's image present on the worker before the job starts
// (ContainerRuntime::ensure_image: pulled when missing), one image at a time on a thread of its own,
// so the agent's loop never waits on a registry and the pull is neither billed nor timed as the job's
// runtime: the agent keeps the assignment in its waiting room (lease renewed, not started) until
// result() says the pull is over. Beside ModelPrefetch, which does the same for model weights.
//
// Rules:
// - want() queues an attempt's image; false when there is nothing to wait for (no image, or one this
//   worker has already made present: the job starts at once).
// - result() is nullopt while the attempt's pull is queued or running, then its outcome once: an Error
//   with code not_found means the image cannot be had (the job's own error, image_pull.hpp), any
//   other Error is the engine's (the job starts anyway and the engine's own run decides).
// - forget() drops an attempt (cancelled, handed back); a pull in flight runs to its end.
// - `wake` (if set) is called from the thread after each pull, so the agent looks at once.
// - The destructor waits for a pull in flight, then stops the thread.
// Thread-safe. The runtime's ensure_image is called from the thread (its contract allows it).
#pragma once

#include "core/util/ids.hpp"
#include "core/util/result.hpp"
#include "core/util/thread_safety.hpp"
#include "worker/runtime/container_runtime.hpp"

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>

namespace gpupool::worker {

class ImagePrefetch {
public:
    ImagePrefetch(ContainerRuntime& runtime, std::function<void()> wake);
    ~ImagePrefetch();
    ImagePrefetch(const ImagePrefetch&) = delete;
    ImagePrefetch& operator=(const ImagePrefetch&) = delete;

    bool want(AttemptId id, const std::string& image);
    std::optional<Status> result(AttemptId id);
    void forget(AttemptId id);

private:
    struct Want {
        AttemptId id{};
        std::string image;
    };
    void loop();

    ContainerRuntime& m_runtime;
    std::function<void()> m_wake;
    util::Mutex m_mu;
    std::condition_variable_any m_cv;
    std::deque<Want> m_queue GUARDED_BY(m_mu);
    std::set<AttemptId> m_pulling GUARDED_BY(m_mu); // queued or running
    std::map<AttemptId, Status> m_done GUARDED_BY(m_mu);
    std::set<std::string> m_present GUARDED_BY(m_mu); // made present by this worker: not asked again
    bool m_stop GUARDED_BY(m_mu) = false;
    std::thread m_thread; // started by the first want() that queues something
};

} // namespace gpupool::worker
