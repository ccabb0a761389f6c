#include "worker/agent/poll_thread.hpp"

#include "worker/agent/agent.hpp"
#include "worker/agent/backoff.hpp"
#include "worker/agent/handed_out.hpp"

#include <spdlog/spdlog.h>

#include <unistd.h>

namespace gpupool::worker {

namespace {
constexpr std::int64_t k_known_ms = 60'000; // an assignment's start reaches the coordinator by then
} // namespace

void AgentSignals::wake(bool job_exited) {
    {
        util::MutexLock lock(mu); // not between a waiter's check and its wait
        exited = exited || job_exited;
    }
    cv.notify_all();
}

void AgentSignals::sleep_for(std::chrono::milliseconds d) {
    util::MutexLock lock(mu);
    cv.wait_for(lock, d, [&] { return stopping.load() || draining.load(); });
}

std::vector<api::Assignment> AgentSignals::take_inbox(std::chrono::milliseconds d, const std::function<bool()>& also) {
    std::vector<api::Assignment> fresh;
    util::MutexLock lock(mu);
    cv.wait_for(lock, d, [&]() REQUIRES(mu) { return !inbox.empty() || exited || also() || stopping.load(); });
    exited = false;
    fresh.swap(inbox);
    return fresh;
}

void leave_pool(CoordinatorLink& link, std::chrono::milliseconds wait) {
    auto back = link.leave(wait);
    if (!back) {
        spdlog::warn("could not tell the coordinator that this worker leaves ({}); it stops placing work here "
                     "once the worker timeout passes",
                     back.error().message);
        return;
    }
    spdlog::info("left the pool; {} assignment(s) not started here went back to the queue", back->size());
}

Result<StoredIdentity> register_until_answered(CoordinatorLink& link, const api::Registration& registration,
                                               const AgentOptions& opt, const std::string& pool, AgentSignals& s) {
    Backoff backoff(opt.backoff_initial, opt.backoff_max, backoff_seed());
    for (;;) {
        auto reg = link.register_worker(registration);
        if (reg) {
            spdlog::info("registered with {} as worker {}", opt.coordinator_url, reg->worker_id.value());
            return StoredIdentity{pool, reg->worker_id.value(), reg->token, {}};
        }
        if (reg.error().code != ErrorCode::unavailable || s.stopping || s.draining) {
            return make_error(reg.error().code,
                              "cannot register with " + opt.coordinator_url + ": " + reg.error().message);
        }
        const auto d = backoff.next_delay();
        spdlog::warn("coordinator unreachable ({}); retrying registration in {} ms", reg.error().message, d.count());
        s.sleep_for(d);
    }
}

void poll_for_assignments(CoordinatorLink& link, AgentSignals& s, const AgentOptions& opt,
                          const util::Clock& clock) {
    HandedOut handed(k_known_ms); // said as `known` until the start must have arrived
    Backoff pb(opt.backoff_initial, opt.backoff_max, static_cast<std::uint64_t>(getpid()) * 7919u + 1);
    while (!s.stopping && !s.draining) {
        if (s.slots > 0 && s.active.load() >= s.slots) {
            util::MutexLock lock(s.mu);
            s.cv.wait_for(lock, opt.tick, [&] {
                return s.active.load() < s.slots || s.stopping.load() || s.draining.load();
            });
            continue;
        }
        auto r = link.poll(opt.poll_wait, handed.known(clock.now_ms()));
        if (s.stopping || s.draining) {
            // Work that arrives now is not started; the coordinator hands it back when the worker
            // leaves (or loses it to another worker when our lease on it runs out).
            break;
        }
        if (!r) {
            if (r.error().code == ErrorCode::unavailable) {
                s.sleep_for(pb.next_delay());
            } else {
                spdlog::error("poll: {}", r.error().message);
                s.sleep_for(opt.backoff_max);
            }
            continue;
        }
        pb.reset();
        // A coordinator that predates `known` re-sends an assignment until our start reaches
        // it: do not spin on one we have already handed over.
        bool fresh = false;
        for (const auto& a : *r) {
            fresh = handed.note(a.attempt, clock.now_ms()) || fresh;
        }
        if (!r->empty()) {
            util::MutexLock lock(s.mu);
            for (auto& a : *r) {
                s.inbox.push_back(std::move(a));
            }
            s.cv.notify_all();
        }
        if (!r->empty() && !fresh) {
            s.sleep_for(opt.tick * 5);
        }
    }
}

} // namespace gpupool::worker
