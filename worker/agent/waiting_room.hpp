// WaitingRoom: assignments the agent has taken but not started yet. The coordinator keeps their
// leases (the heartbeat lists them as waiting) and has not been told they started, so their time is
// not billed. An assignment waits here
// - for its image (ImagePrefetch: pulled when missing; one the registry does not have, denies or
//   cannot read comes out with `image_unavailable`, to end as the job's error without starting; a
//   pull that failed otherwise is logged and the job starts anyway), and meanwhile
// - for its model weights, while ModelPrefetch downloads what its recipe's `[cache] models` names
//   (as long as that takes; a failed download is logged and the job starts anyway), then
// - for its GPU share: the coordinator hands a preempted job's share to the preemptor at once, but
//   the victim here learns it must stop only from the next heartbeat and then has its grace period;
//   starting the preemptor meanwhile would put two jobs' memory on one GPU. So an assignment starts
//   only when the jobs still running on its GPU leave room for its share, or after gpu_wait_max
//   (logged) — or, when a job stopping there has a later SIGKILL (a `[checkpoint] grace` longer
//   than that), 2 s after it.
// Not thread-safe: the agent thread owns it.
#pragma once

#include "core/api/assignment.hpp"
#include "worker/agent/attempt_table.hpp"
#include "worker/agent/image_prefetch.hpp"
#include "worker/agent/model_prefetch.hpp"

#include <chrono>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace gpupool::worker {

// Whether the jobs running on `a`'s GPU leave room for its share.
bool gpu_share_free(const api::Assignment& a, const AttemptTable& running);

class WaitingRoom {
public:
    explicit WaitingRoom(std::chrono::milliseconds gpu_wait_max) : m_gpu_wait_max(gpu_wait_max) {}

    bool holds(AttemptId id) const;
    void wait_for_models(api::Assignment a, std::int64_t now_ms);
    // Waits for its image (and its model weights too when `models_too`).
    void wait_for_image(api::Assignment a, std::int64_t now_ms, bool models_too);
    // Where images are pulled (nullptr: no image waits); set once by the owner.
    void set_images(ImagePrefetch* images) { m_images = images; }
    void wait_for_gpu(api::Assignment a, std::int64_t now_ms);
    // An assignment that may start now, and a line for its job's log (why its weights are not all
    // there: the job starts anyway) or "".
    struct Ready {
        api::Assignment a;
        std::string note;
        std::optional<std::string> image_unavailable{}; // the engine's words: the job ends unstarted
    };
    // The assignments that may start now (taken out of the room).
    std::vector<Ready> ready(std::int64_t now_ms, const AttemptTable& running, ModelPrefetch* prefetch);
    // Drops one (the coordinator cancelled it); false when it was not here.
    bool cancel(AttemptId id, ModelPrefetch* prefetch);
    // Empties the room (to hand everything back).
    std::vector<AttemptId> take_all(ModelPrefetch* prefetch);

    std::vector<AttemptId> ids() const;
    std::size_t size() const { return m_waiting.size(); }
    bool empty() const { return m_waiting.empty(); }
    // The models its assignments name (pinned in the cache).
    void models(std::set<std::string>& into) const;

private:
    struct Waiting {
        api::Assignment a;
        std::int64_t since_ms = 0;
        bool fetching = false; // waiting for its model weights, not for its GPU
        std::string note;      // what went wrong fetching them (or pulling its image)
        bool pulling = false;  // waiting for its image
    };
    // Whether `w`'s image is in (false: still pulling); a pull that failed as the job's error fills `out`.
    bool image_in(Waiting& w, std::int64_t now, std::optional<std::string>& unavailable);

    std::chrono::milliseconds m_gpu_wait_max;
    ImagePrefetch* m_images = nullptr;
    std::vector<Waiting> m_waiting;
};

} // namespace gpupool::worker
