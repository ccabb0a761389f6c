// A worker that leaves cleanly (POST /v1/workers/leave, docs/api.md): worker_left (worker_ops.hpp).
#include "core/coordinator/coordinator.hpp"
#include "core/coordinator/internal.hpp"
#include "core/coordinator/job_ops.hpp"
#include "core/coordinator/worker_ops.hpp"

#include <algorithm>

namespace gpupool::coordinator {

using namespace gpupool::store;
using namespace gpupool::coordinator::detail;

Result<std::vector<AttemptId>> worker_left(Coordinator& pool, const Principal& who) {
    if (who.role != Role::worker || !who.worker) {
        return denied("only workers leave the pool");
    }
    const WorkerId worker = *who.worker;
    const std::int64_t now = pool.now_ms();
    Changes c;
    // Offline at once: seen last longer ago than the worker timeout, as a silent worker is (the pool
    // view drops it from the next pass; its next heartbeat brings it back).
    WorkerRecord w = pool.roster().at(worker).record;
    w.last_seen_at = std::min(w.last_seen_at, now - pool.options().worker_timeout_ms - 1);
    c.workers.push_back(w);
    std::vector<AttemptId> back;
    for (AttemptId id : pool.job_book().active()) {
        const AttemptRecord& a = pool.job_book().attempts().at(id);
        if (a.worker == worker && a.state == AttemptState::assigned) {
            AttemptRecord copy = a;
            // Preempted: the job is queued again without using one of its attempts, never charged;
            // not the owner's preemption (k_owner_preempted_reason), so not on the owner's record.
            end_attempt(pool, copy, AttemptState::preempted, std::nullopt,
                        "handed back unstarted: worker " + std::to_string(worker.value()) + " left the pool", c, false);
            back.push_back(id);
        }
    }
    if (auto st = pool.commit(c); !st) {
        return st.error();
    }
    pool.note_left(worker); // its capacity is gone, and the jobs it held may go elsewhere
    return back;
}

} // namespace gpupool::coordinator
