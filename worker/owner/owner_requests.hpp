// The owner's requests over the control socket (control_socket.hpp), answered on the agent's thread:
//   {"op": "status"}                                   -> the state, the jobs on each GPU, last contact
//   {"op": "pause", "why": "...", "for_s": 7200, "now": true}  (for_s: a timed pause; now: also hand
//                                                         the running jobs back now)
//   {"op": "resume"}, {"op": "reload"}                 (reload re-reads worker.toml, as SIGHUP does)
// Every answer has "ok" (and "error" when false). The request is read with api::FieldReader: wrong
// types, unknown ops and out-of-range values are refused with the field named.
// Not thread-safe: called on the agent's thread, which owns the OwnerPolicy.
#pragma once

#include "core/api/assignment.hpp"
#include "worker/gpu/gpu_probe.hpp"
#include "worker/owner/owner_policy.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <future>
#include <optional>
#include <string>
#include <vector>

namespace gpupool::worker {

// A request waiting for the agent's thread, and where its answer goes.
struct PendingRequest {
    nlohmann::json request{};
    std::shared_ptr<std::promise<nlohmann::json>> reply{};
};

// A job running here, as the owner's status shows it (the agent lists them: AttemptTable::running_jobs).
struct RunningJob {
    std::int64_t attempt = 0;
    std::int64_t job = 0;
    std::string name{};
    std::string team{};
    std::string image{};
    std::int64_t gpu_index = -1;
    std::int64_t gpu_milli = 0;
    std::int64_t runtime_s = 0;
    std::string stopping{}; // why it is being stopped, when it is
};

// What the agent knows besides the policy.
struct WorkerFacts {
    std::int64_t worker_id = 0;
    std::string coordinator{};
    std::optional<std::int64_t> last_contact_ms{}; // Unix ms of the last answer from the coordinator
    bool draining = false;
    std::vector<GpuInfo> gpus{}; // all the machine's GPUs
    std::vector<RunningJob> jobs{};
    std::int64_t cpu_milli = 0;  // offered
    std::int64_t memory_mib = 0; // offered
    int slots = 0;
    std::string enforcement{}; // how fractional shares are held on its GPUs: mps, watchdog, none
};

// What the owner's lines call a job: "job 12 `eval-n0` (team fellows)", and its share: "0.5 of GPU
// 0, 1 CPU, 4GiB memory". Text from the pool is passed as it came; the receiver escapes it.
std::string job_label(const api::Assignment& a);
std::string share_of(const api::Assignment& a);

// Answers one request. `stop_running_now(why)` hands every running job back (pause --now).
nlohmann::json answer_owner_request(OwnerPolicy& policy, const nlohmann::json& request, const WorkerFacts& facts,
                                    int running, const std::function<void(const std::string&)>& stop_running_now);

} // namespace gpupool::worker
