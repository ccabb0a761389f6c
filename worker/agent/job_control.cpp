#include "worker/agent/job_control.hpp"

#include "core/resources/quantity.hpp"
#include "worker/agent/job_container.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <csignal>
#include <utility>

namespace gpupool::worker {

JobControl::JobControl(JobControlOptions options, ContainerRuntime& runtime, Spool& spool, AttemptTable& attempts,
                       const util::Clock& clock, Hooks hooks)
    : m_opt(options), m_runtime(runtime), m_spool(spool), m_attempts(attempts), m_clock(clock),
      m_hooks(std::move(hooks)) {}

void JobControl::event_ended(const Attempt& t) const {
    const auto ran = (m_clock.now_ms() - t.started_ms) / 1000;
    m_hooks.event(job_label(t.a) + " ended after " + resources::format_duration_s(std::max<std::int64_t>(ran, 0)) +
                  ": " +
                  (t.outcome == Outcome::worker_fault        ? "worker fault: "
                   : t.outcome == Outcome::image_unavailable ? "image unavailable: "
                                                             : "") +
                  t.reason);
}

void JobControl::resolve_image(api::RunReport& report, const std::string& image) {
    auto identity = m_runtime.image_identity(image);
    if (!identity) {
        report.image_digest_unknown =
            report_text("the " + m_runtime.name() + " engine could not say: " + identity.error().message);
        return;
    }
    // Checked again here: whatever a runtime passes on, only digests reach the coordinator.
    report.image_digest = api::is_sha256_digest(identity->digest) ? identity->digest : std::string();
    report.image_id = api::is_sha256_digest(identity->id) ? identity->id : std::string();
    if (report.image_digest.empty() && report.image_id.empty()) {
        report.image_digest_unknown =
            report_text(identity->unknown.empty() ? "the " + m_runtime.name() + " engine gave no valid digest or id"
                                                  : identity->unknown);
    }
}

void JobControl::report_end(Attempt& t) const {
    if (t.report && t.report->ended_at_ms == 0) {
        t.report->ended_at_ms = wall_ms();
    }
}

void JobControl::end_as_fault(AttemptId id, const std::string& why) {
    m_attempts.end_unexited(id, Outcome::worker_fault, why);
    report_end(m_attempts.at(id));
    spdlog::warn("attempt {}: {}", id.value(), why);
    event_ended(m_attempts.at(id));
}

void JobControl::start(Attempt t, const ContainerSpec& spec, const Status& ready,
                       std::optional<api::RunReport> report) {
    t.gpu_limit_mib = gpu_limit_mib(spec);
    const std::int64_t wall_start = wall_ms();
    const Status started = ready ? m_runtime.start(spec) : ready;
    t.container = started ? spec.name : std::string();
    if (started && report) {
        report->started_at_ms = wall_start;
        resolve_image(*report, spec.image);
        t.report = std::move(report);
    }
    t.unsaved = true;
    const Attempt& held = m_attempts.add(std::move(t));
    const auto id = held.id();
    if (started) {
        spdlog::info("attempt {} (job {} `{}`): started as {}", id.value(), held.a.job.value(), held.a.spec.name,
                     held.container);
        m_hooks.event(job_label(held.a) + " started: " + share_of(held.a));
        return;
    }
    const Error& e = started.error();
    if (e.code == ErrorCode::invalid_input) {
        m_attempts.fail(id, e.message); // the job's own problem (its inputs): it fails like a job
        event_ended(held);
    } else {
        end_as_fault(id, "could not start on " + m_runtime.name() + ": " + e.message);
    }
    Spool::append_note(held, "gpupool-worker: " + held.reason + "\n");
}

void JobControl::end_unstarted(Attempt t, const std::string& why) {
    const auto id = m_attempts.add(std::move(t)).id();
    m_attempts.end_unexited(id, Outcome::image_unavailable, why);
    const Attempt& held = m_attempts.at(id);
    Spool::append_note(held, "gpupool-worker: image unavailable: " + why + "\n");
    event_ended(held);
}

void JobControl::stop(AttemptId id, const std::string& why, Outcome outcome, std::chrono::milliseconds grace) {
    if (!m_attempts.stop(id, why, outcome, m_clock.now_ms() + grace.count())) {
        return;
    }
    if (auto st = m_runtime.signal(m_attempts.at(id).container, SIGTERM); !st) {
        spdlog::warn("attempt {}: SIGTERM: {}", id.value(), st.error().message);
    }
    spdlog::info("attempt {}: stopping ({})", id.value(), why);
}

void JobControl::stop_all(const std::string& why, Outcome outcome, std::chrono::milliseconds grace) {
    for (const auto& [id, t] : m_attempts) {
        stop(id, why, outcome, grace);
    }
}

bool JobControl::poll_one(Attempt& t, std::int64_t now) {
    auto st = m_runtime.poll(t.container);
    if (!st && st.error().code == ErrorCode::not_found) {
        // Removed behind the worker's back (`podman rm -f`, an engine reset): a worker
        // fault for this attempt, reported once; the slot is free again.
        end_as_fault(t.id(), "the job's " + m_runtime.name() + " container disappeared while it ran (" +
                                 st.error().message + ")");
        return false;
    }
    if (!st) {
        if (!t.poll_failing_since_ms) {
            t.poll_failing_since_ms = now;
            spdlog::warn("attempt {}: cannot tell how the job is: {}", t.id().value(), st.error().message);
        } else if (now - *t.poll_failing_since_ms > m_opt.engine_unanswered_max.count()) {
            end_as_fault(t.id(), "the " + m_runtime.name() + " engine could not say how the job is for " +
                                     std::to_string(m_opt.engine_unanswered_max.count() / 1000) +
                                     " s: " + st.error().message);
            (void)m_runtime.signal(t.container, SIGKILL);
            return false;
        }
    } else if (*st) {
        finish(t, **st);
        return false;
    } else if (t.poll_failing_since_ms) {
        spdlog::info("attempt {}: the {} engine answers again", t.id().value(), m_runtime.name());
        t.poll_failing_since_ms.reset();
    }
    return true;
}

void JobControl::watch() {
    const auto now = m_clock.now_ms();
    for (auto& [id, t] : m_attempts) {
        if (!t.running() || !poll_one(t, now)) {
            continue;
        }
        // The limits hold even while the engine does not answer.
        const std::int64_t max_rt_ms = t.a.spec.resources.max_runtime_s * 1000;
        if (t.stop_reason.empty() && max_rt_ms > 0 && now - t.started_ms > max_rt_ms) {
            stop(id, "exceeded max_runtime " + resources::format_duration_s(t.a.spec.resources.max_runtime_s),
                 Outcome::exited, m_opt.runtime_grace);
        }
    }
    for (AttemptId id : m_attempts.kills_due(now)) {
        if (auto k = m_runtime.signal(m_attempts.at(id).container, SIGKILL); !k) {
            spdlog::warn("attempt {}: SIGKILL: {}", id.value(), k.error().message);
        }
    }
}

void JobControl::finish(Attempt& t, const ExitStatus& st) {
    const auto id = t.id();
    m_attempts.finish(id, st.exit_code, exit_reason(t, st, m_runtime.capabilities().limits_memory));
    report_end(t);
    if (t.stop_reason.empty() && st.exit_code != 0 && t.a.gpu_index >= 0) {
        // A GPU job that failed may have failed with its GPU: ask the driver now rather than at
        // the next periodic check, so that the hardware's failure is not charged as the job's.
        if (auto failed = m_hooks.gpu_failed(t.a.gpu_index)) {
            m_attempts.blame_worker(id, "GPU " + std::to_string(t.a.gpu_index) + " failed on the worker: " + *failed +
                                            " (the job " + t.reason + ")");
        }
    }
    if (m_hooks.exited_zero && t.stop_reason.empty() && st.exit_code == 0 && t.outcome == Outcome::exited) {
        m_hooks.exited_zero(t);
    }
    spdlog::info("attempt {}: {}", id.value(), t.reason);
    event_ended(t);
}

void JobControl::drop(AttemptId id, const std::string& why) {
    const Attempt* t = m_attempts.find(id);
    if (!t) {
        return;
    }
    // The folder is recycled only when nothing of the job runs any more (its container removed).
    const Status gone = t->container.empty() ? Status{} : m_runtime.remove(t->container);
    if (!gone) {
        spdlog::warn("attempt {}: removing {}: {}", id.value(), t->container, gone.error().message);
    }
    m_spool.remove(*t, gone.has_value());
    spdlog::info("attempt {}: {}", id.value(), why);
    m_attempts.retire(id);
}

} // namespace gpupool::worker
