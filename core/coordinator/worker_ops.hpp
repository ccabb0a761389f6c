// What workers say to the coordinator: registration, heartbeats, leaving, polling for assignments,
// and their reports on an attempt (started, log chunks, outputs, ended), and fetching an attempt's
// input archive.
//
// Free functions over the Coordinator's components, not members of it. Each checks that the caller
// speaks for the worker (a worker token; an enrollment token to register) and, for an attempt, that
// the attempt is that worker's and still current: anything about an attempt that is no longer
// current is refused with ErrorCode::conflict (fencing), so a worker back from a partition can
// neither finish a job that was re-run elsewhere nor log into it. Durable changes are staged and
// committed through Coordinator::commit; logs and outputs go to the blob shelf (blob_shelf.hpp);
// what a heartbeat says that is not durable goes through Coordinator::note_heartbeat and its
// siblings. Each runs on the coordinator's thread, as the Coordinator's own methods do.
#pragma once

#include "core/api/inventory.hpp"
#include "core/api/worker_protocol.hpp"
#include "core/coordinator/views.hpp"
#include "core/store/records.hpp"
#include "core/util/result.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpupool::coordinator {

class Coordinator;

struct Registered {
    WorkerId worker;
    std::string secret;                // the worker's own token, shown once
    std::vector<std::string> warnings; // e.g. GPU models missing from the rate catalog
};
// `terms`: what its owner allows (each heartbeat says it again).
Result<Registered> register_worker(Coordinator& pool, const Principal& who, const std::string& name,
                                   const api::Inventory& inventory,
                                   const std::optional<api::OwnerTerms>& terms = std::nullopt);
// `unhealthy_gpus`: indices of GPUs the worker reports as failing (ECC errors, fell off the bus,
// ...); they get no new work until a later heartbeat reports them healthy again. `draining`: the
// worker is shutting down and takes no new work (not durable: a draining worker says so in every
// heartbeat; an admin's drain is the durable kind). `inventory`: what the machine offers now (the
// registration's shape, validated the same way); sent by a worker after each start, it replaces the
// stored one when it differs. `sharing` other than `sharing` (its owner paused it, it is outside the
// owner's hours, the owner uses its GPUs): no new work, running jobs go on; `terms`: only jobs they
// allow are placed on it (api::OwnerTerms; absent from workers before terms: any job). Neither is
// durable either: the worker says both in every heartbeat. GPUs in `reclaimed_gpus` are taken as
// unhealthy ones (no new work there). Renews the leases of the attempts it runs; the reply names
// those it must stop.
Result<HeartbeatReply> receive_heartbeat(Coordinator& pool, const Principal& who, const api::Heartbeat& beat);
// The same from its parts (tests): `paused` is SharingState::paused.
Result<HeartbeatReply> heartbeat(Coordinator& pool, const Principal& who, const std::vector<AttemptId>& running,
                                 const std::vector<std::int64_t>& unhealthy_gpus = {}, bool draining = false,
                                 const api::Inventory* inventory = nullptr, bool paused = false);
// The worker leaves cleanly (worker_leave.cpp): offline at once (nothing more is placed on it until
// its next heartbeat), and each attempt assigned to it and not started goes back to the queue
// without using one of its job's attempts, uncharged, not on the owner's record. Running attempts
// keep their leases (the worker hands them back itself). Returns those handed back.
Result<std::vector<AttemptId>> worker_left(Coordinator& pool, const Principal& who);
// Attempts assigned to this worker and not yet started (re-sent until started).
Result<std::vector<Assignment>> assignments(const Coordinator& pool, const Principal& who);
Status start_attempt(Coordinator& pool, const Principal& who, AttemptId attempt);
// Several starts from one worker, committed in one transaction: one answer per attempt, in order,
// as start_attempt would have answered it; a failed write fails the call and takes none.
Result<std::vector<api::EndAnswer>> start_attempts(Coordinator& pool, const Principal& who,
                                                   const std::vector<AttemptId>& attempts);
// A chunk of the attempt's log at `offset`, kept within the job's log cap (BlobShelf::append_log).
Result<store::LogAppend> append_log(Coordinator& pool, const Principal& who, AttemptId attempt, std::int64_t offset,
                                    std::string_view data);
// The attempt's packed outputs, within the job's outputs.max_size.
Status upload_output(Coordinator& pool, const Principal& who, AttemptId attempt, const UploadedFile& file);
// `exit_code` is required for Outcome::exited and ignored otherwise.
Status complete_attempt(Coordinator& pool, const Principal& who, AttemptId attempt,
                        std::optional<std::int64_t> exit_code, const std::string& reason,
                        Outcome outcome = Outcome::exited);
// The same from the worker's whole message, its run report (the attempt's evidence) included.
Status complete_attempt(Coordinator& pool, const Principal& who, AttemptId attempt, const api::Completion& done);
// Several ends from one worker, committed in one transaction: one answer per end, in order. An end
// refused (no longer current, a bad exit code) does not hold back the others; a failed write fails
// the call and takes none of them.
Result<std::vector<api::EndAnswer>> complete_attempts(Coordinator& pool, const Principal& who,
                                                      const std::vector<api::AttemptEnd>& ends);
// The input archive of the worker's current attempt (job_ops.hpp's put_inputs stored it).
Result<std::string> read_inputs(Coordinator& pool, const Principal& who, AttemptId attempt);

namespace detail {
// The attempt, when `who` is the worker it is assigned to and it is still current; else why not.
Result<const store::AttemptRecord*> current_attempt_of_worker(const Coordinator& pool, const Principal& who,
                                                              AttemptId id);
} // namespace detail

} // namespace gpupool::coordinator
