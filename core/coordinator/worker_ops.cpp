// What workers say (worker_ops.hpp): registration, heartbeats, assignments, the attempt reports a
// worker sends (start, log chunks, outputs, completion) and its inputs; leaving is worker_leave.cpp.
#include "core/coordinator/worker_ops.hpp"

#include "core/coordinator/admin_ops.hpp"
#include "core/coordinator/coordinator.hpp"
#include "core/coordinator/evidence.hpp"
#include "core/coordinator/internal.hpp"
#include "core/coordinator/job_ops.hpp"
#include "core/coordinator/spot_checks.hpp"
#include "core/resources/quantity.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>

namespace gpupool::coordinator {

using namespace gpupool::store;
using namespace gpupool::coordinator::detail;

namespace {

// Why an attempt of a worker's that is no longer current must stop, in words for the machine's owner.
std::string stop_reason_of(const AttemptRecord& a) {
    if (a.state == AttemptState::cancelled) {
        return "cancelled by its submitter";
    }
    return a.reason.empty() ? std::string("ended by the coordinator (") + to_string(a.state) + ")" : a.reason;
}

} // namespace

Result<Registered> register_worker(Coordinator& pool, const Principal& who, const std::string& name,
                                   const api::Inventory& offered, const std::optional<api::OwnerTerms>& terms) {
    if (who.role != Role::enroll || !who.team) {
        return denied("workers register with an enrollment token (`gpupool admin enroll TEAM`)");
    }
    if (name.empty() || name.size() > api::k_max_worker_name_bytes) {
        return invalid("worker names are 1-" + std::to_string(api::k_max_worker_name_bytes) + " characters", "name");
    }
    // By the wire's rules whoever calls (absorb() reads the stored row back with them): bounded, sorted.
    auto inventory = api::inventory_from_json(api::to_json(offered));
    if (!inventory) {
        return inventory.error();
    }
    auto id = pool.take_ids(store::IdKind::worker, 1);
    if (!id) {
        return id.error();
    }
    const std::int64_t now = pool.now_ms();
    Changes c;
    WorkerRecord w{WorkerId(*id),       *who.team, name, api::to_text(*inventory),
                   WorkerState::active, now,       now,  who.token_id};
    c.workers.push_back(w);
    auto tok = issue_token(pool, Role::worker, who.team, w.id, "worker " + name, c);
    if (!tok) {
        return tok.error();
    }
    // Each registration uses up one of the enrollment token's registrations; the last revokes it.
    // (After issue_token(): it numbers new tokens by their place in `c`.)
    if (const TokenRecord* enrollment = pool.tokens().token(who.token_id);
        enrollment != nullptr && enrollment->uses_left) {
        TokenRecord used = *enrollment;
        used.uses_left = *used.uses_left - 1;
        if (*used.uses_left <= 0) {
            used.revoked_at = now;
        }
        c.tokens.push_back(used);
    }
    if (auto st = pool.commit(c); !st) {
        return st.error();
    }
    pool.note_registered(w.id, terms);
    return Registered{w.id, tok->secret, pool.roster().inventory_warnings(*inventory)};
}

namespace detail {

Result<const AttemptRecord*> current_attempt_of_worker(const Coordinator& pool, const Principal& who, AttemptId id) {
    if (who.role != Role::worker || !who.worker) {
        return denied("only workers report on attempts");
    }
    auto it = pool.job_book().attempts().find(id);
    if (it == pool.job_book().attempts().end() || it->second.worker != *who.worker) {
        return not_found("no attempt " + std::to_string(id.value()) + " on this worker");
    }
    if (!is_active(it->second.state)) {
        return fenced(id, std::string("it is ") + to_string(it->second.state));
    }
    return &it->second;
}

} // namespace detail

Result<HeartbeatReply> heartbeat(Coordinator& pool, const Principal& who, const std::vector<AttemptId>& running,
                                 const std::vector<std::int64_t>& unhealthy_gpus, bool draining,
                                 const api::Inventory* inventory, bool paused) {
    api::Heartbeat beat;
    beat.running = running;
    beat.unhealthy_gpus = unhealthy_gpus;
    beat.draining = draining;
    if (inventory != nullptr) {
        beat.inventory = *inventory;
    }
    beat.sharing = paused ? api::SharingState::paused : api::SharingState::sharing;
    return receive_heartbeat(pool, who, beat);
}

Result<HeartbeatReply> receive_heartbeat(Coordinator& pool, const Principal& who, const api::Heartbeat& beat) {
    if (who.role != Role::worker || !who.worker) {
        return denied("only workers send heartbeats");
    }
    std::optional<api::Inventory> checked; // by the wire's rules whoever calls, as register_worker
    if (beat.inventory) {
        auto inv = api::inventory_from_json(api::to_json(*beat.inventory));
        if (!inv) {
            return inv.error();
        }
        checked = std::move(*inv);
    }
    const std::int64_t now = pool.now_ms();
    const api::Inventory* inventory = checked ? &*checked : nullptr;
    // Health, draining, sharing, terms and downloads count from now, written or not (commit() tells
    // the scheduler's view the rest when it is).
    pool.note_heartbeat(*who.worker, beat, inventory);
    const std::vector<AttemptId>& running = beat.running;
    HeartbeatReply reply;
    reply.lease_ms = pool.options().lease_ms;
    Changes c;
    WorkerRecord w = pool.roster().at(*who.worker).record;
    w.last_seen_at = now;
    if (inventory != nullptr && *inventory != pool.roster().at(*who.worker).inventory) {
        // The machine changed since it registered (a GPU added or gone, other --cpus-milli,
        // --memory-mib or --slots): schedule by what it has now.
        w.inventory_json = api::to_text(*inventory);
        reply.warnings = pool.roster().inventory_warnings(*inventory);
    }
    c.workers.push_back(w);
    for (AttemptId id : running) {
        auto it = pool.job_book().attempts().find(id);
        if (it == pool.job_book().attempts().end() || it->second.worker != *who.worker ||
            !is_active(it->second.state)) {
            reply.stop.push_back(id); // cancelled, lost, timed out, or never ours: stop it
            if (it != pool.job_book().attempts().end() && it->second.worker == *who.worker) {
                reply.stop_reasons.push_back({id, stop_reason_of(it->second)}); // what its owner is told
            }
            continue;
        }
        AttemptRecord a = it->second;
        a.lease_expires_at = now + pool.options().lease_ms;
        c.attempts.push_back(a);
    }
    if (auto st = pool.commit(c); !st) {
        return st.error();
    }
    return reply;
}

Result<std::vector<Assignment>> assignments(const Coordinator& pool, const Principal& who) {
    if (who.role != Role::worker || !who.worker) {
        return denied("only workers poll for assignments");
    }
    std::vector<Assignment> out;
    auto mine = pool.job_book().assigned_by_worker().find(*who.worker);
    if (mine == pool.job_book().assigned_by_worker().end()) {
        return out;
    }
    for (AttemptId id : mine->second) {
        const AttemptRecord& a = pool.job_book().attempts().at(id);
        const JobRecord& j = pool.job_book().jobs().at(a.job);
        const std::int64_t idle =
            j.spec.resources.idle_timeout_s >= 0 ? j.spec.resources.idle_timeout_s : pool.options().idle_timeout_s;
        out.push_back({a.id, a.job, j.attempts, j.spec, a.gpu_index, a.gpu_milli, j.team,
                       pool.tokens().teams().at(j.team).name, idle});
    }
    return out;
}

namespace {

// A worker's report that `id` started, checked and added to `c`; a repeated start adds nothing.
Status stage_start(Coordinator& pool, const Principal& who, AttemptId id, Changes& c) {
    auto a = current_attempt_of_worker(pool, who, id);
    if (!a) {
        return a.error();
    }
    pool.note_started((*a)->worker, id);
    if ((*a)->state == AttemptState::running) {
        return {}; // a repeated start is harmless
    }
    const std::int64_t now = pool.now_ms();
    AttemptRecord copy = **a;
    copy.state = AttemptState::running;
    copy.started_at = now;
    copy.lease_expires_at = now + pool.options().lease_ms;
    c.attempts.push_back(copy);
    JobRecord j = pool.job_book().jobs().at(copy.job);
    j.state = JobState::running;
    j.updated_at = now;
    j.reason = "running on worker " + std::to_string(copy.worker.value());
    c.jobs.push_back(j);
    return {};
}

} // namespace

Status start_attempt(Coordinator& pool, const Principal& who, AttemptId id) {
    Changes c;
    if (auto st = stage_start(pool, who, id, c); !st) {
        return st;
    }
    return c.empty() ? Status() : pool.commit(c);
}

Result<std::vector<api::EndAnswer>> start_attempts(Coordinator& pool, const Principal& who,
                                                   const std::vector<AttemptId>& ids) {
    if (who.role != Role::worker || !who.worker) {
        return denied("only workers report attempts");
    }
    Changes c;
    std::vector<api::EndAnswer> answers;
    std::set<AttemptId> staged; // memory changes only once the batch commits: a second start would stage twice
    for (AttemptId id : ids) {
        api::EndAnswer answer{id, std::nullopt};
        if (!staged.insert(id).second) {
            answer.error = invalid("attempt " + std::to_string(id.value()) + " is named twice", "attempt");
        } else if (auto st = stage_start(pool, who, id, c); !st) {
            answer.error = st.error();
        }
        answers.push_back(std::move(answer));
    }
    if (auto st = c.empty() ? Status() : pool.commit(c); !st) {
        return st.error();
    }
    return answers;
}

Result<LogAppend> append_log(Coordinator& pool, const Principal& who, AttemptId id, std::int64_t offset,
                             std::string_view data) {
    auto a = current_attempt_of_worker(pool, who, id);
    if (!a) {
        return a.error();
    }
    return pool.blobs().append_log(id, offset, data,
                                   log_cap(pool.job_book().jobs().at((*a)->job).spec, pool.options().max_log_bytes));
}

Status upload_output(Coordinator& pool, const Principal& who, AttemptId id, const UploadedFile& file) {
    auto a = current_attempt_of_worker(pool, who, id);
    if (!a) {
        return a.error();
    }
    const auto cap = pool.job_book().jobs().at((*a)->job).spec.outputs.max_size_mib * 1024 * 1024;
    if (file.size > cap) {
        return invalid("outputs are " + std::to_string(file.size) + " bytes, over the job's outputs.max_size",
                       "outputs");
    }
    if (auto st = pool.blobs().put_output(id, file.path, file.sha256_hex); !st) {
        return st;
    }
    return record_outputs(pool, id, file);
}

namespace {

// A worker's report that `id` ended, checked and added to `c`.
Status stage_end(Coordinator& pool, const Principal& who, AttemptId id, const api::Completion& done, Changes& c) {
    auto a = current_attempt_of_worker(pool, who, id);
    if (!a) {
        return a.error();
    }
    if (done.report) {
        stage_run_report(id, *done.report, c);
    }
    AttemptRecord copy = **a;
    const std::string& reason = done.reason;
    switch (done.outcome) {
    case Outcome::exited: {
        const auto& exit_code = done.exit_code;
        if (!exit_code) {
            return invalid("missing required field", "exit_code");
        }
        if (*exit_code < 0 || *exit_code > 255) {
            return invalid("exit codes are 0-255", "exit_code");
        }
        std::string why = reason.empty() ? "exited with status " + std::to_string(*exit_code) : reason;
        end_attempt(pool, copy, *exit_code == 0 ? AttemptState::succeeded : AttemptState::failed, exit_code, why, c);
        stage_spot_check(pool, copy, done.report ? &*done.report : nullptr, c);
        break;
    }
    case Outcome::worker_fault:
        end_attempt(pool, copy, AttemptState::lost, std::nullopt,
                    reason.empty() ? "worker fault" : "worker fault: " + reason, c, false);
        break;
    case Outcome::image_unavailable:
        // The job's own error (its image cannot be had): it fails now, since the same image fails on
        // every worker; never charged (it never ran) and not the worker's failure (not `lost`).
        end_attempt(pool, copy, AttemptState::failed, std::nullopt,
                    std::string(k_image_unavailable_reason) + (reason.empty() ? "" : ": " + reason), c, false);
        break;
    case Outcome::owner_preempted: {
        // Never charged; counted against the worker for this job (owner_avoids: enough of them and
        // the job goes elsewhere for a while) and in the worker's report.
        const std::string why(k_owner_preempted_reason);
        end_attempt(pool, copy, AttemptState::preempted, std::nullopt, reason.empty() ? why : why + ": " + reason, c,
                    false);
        break;
    }
    }
    return {};
}

} // namespace

Status complete_attempt(Coordinator& pool, const Principal& who, AttemptId id, std::optional<std::int64_t> exit_code,
                        const std::string& reason, Outcome outcome) {
    return complete_attempt(pool, who, id, api::Completion{exit_code, reason, outcome});
}

Status complete_attempt(Coordinator& pool, const Principal& who, AttemptId id, const api::Completion& done) {
    Changes c;
    if (auto st = stage_end(pool, who, id, done, c); !st) {
        return st;
    }
    return pool.commit(c);
}

Result<std::vector<api::EndAnswer>> complete_attempts(Coordinator& pool, const Principal& who,
                                                      const std::vector<api::AttemptEnd>& ends) {
    if (who.role != Role::worker || !who.worker) {
        return denied("only workers report attempts");
    }
    Changes c;
    std::vector<api::EndAnswer> answers;
    std::set<AttemptId> staged; // memory changes only once the batch commits: refuse a second end
    for (const auto& e : ends) {
        api::EndAnswer answer{e.attempt, std::nullopt};
        if (!staged.insert(e.attempt).second) {
            answer.error = invalid("attempt " + std::to_string(e.attempt.value()) + " is named twice", "attempt");
        } else if (auto st = stage_end(pool, who, e.attempt, e.completion, c); !st) {
            answer.error = st.error();
        }
        answers.push_back(std::move(answer));
    }
    if (auto st = c.empty() ? Status() : pool.commit(c); !st) {
        return st.error();
    }
    return answers;
}

Result<std::string> read_inputs(Coordinator& pool, const Principal& who, AttemptId id) {
    auto a = current_attempt_of_worker(pool, who, id);
    if (!a) {
        return a.error();
    }
    const auto& sha = pool.job_book().jobs().at((*a)->job).spec.inputs.archive;
    if (sha.empty()) {
        return make_error(ErrorCode::not_found, "this job has no inputs archive");
    }
    auto blob = pool.blobs().input(pool.job_book().jobs().at((*a)->job).team, sha);
    if (!blob) {
        return blob.error();
    }
    if (!*blob) {
        return make_error(ErrorCode::not_found, "the inputs archive " + sha + " is missing from the store");
    }
    return std::move(**blob);
}

} // namespace gpupool::coordinator
