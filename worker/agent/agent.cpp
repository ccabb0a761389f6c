#include "worker/agent/agent.hpp"

#include "core/resources/quantity.hpp"
#include "core/util/thread_safety.hpp"
#include "worker/agent/delivery.hpp"
#include "worker/agent/gpu_watch.hpp"
#include "worker/agent/job_container.hpp"
#include "worker/agent/spool.hpp"
#include "worker/agent/steady_clock.hpp"
#include "worker/owner/owner_desk.hpp"

#include <spdlog/spdlog.h>

#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <csignal>
#include <random>
#include <set>
#include <thread>
#include <vector>

namespace gpupool::worker {

namespace fs = std::filesystem;
using nlohmann::json;
using std::chrono::milliseconds;

namespace {

constexpr milliseconds k_hurried_give_up{5'000}; // drain_now(): undelivered results stay spooled

std::uint64_t backoff_seed() {
    return static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
           static_cast<std::uint64_t>(getpid());
}

} // namespace

// The agent's own state: the attempts it holds and their lifecycle (take, start, watch, finish,
// drop), the drain, and the threads. The spool, the deliveries and the GPUs are its parts.
struct Agent::Impl {
    struct Deferred {
        api::Assignment a;
        std::int64_t since_ms = 0;
    };

    AgentOptions opt;
    ContainerRuntime& runtime;
    Agent& self;
    SteadyClock steady;
    const coordinator::Clock& clock;
    coordinator::SystemClock system;
    const coordinator::Clock& wall; // Unix ms: the owner's windows and timed pauses
    LinkFactory links;
    std::unique_ptr<CoordinatorLink> link; // the agent thread's
    Spool spool;
    GpuWatch gpu;
    Delivery delivery;
    OwnerPolicy owner;
    OwnerDesk desk; // the owner's requests from <work_dir>/control.sock

    std::string worker_token;
    std::int64_t worker_id = 0;
    // Unique on this machine: names and labels this worker's containers, so two pools' workers
    // (or a worker and `gpupool run`), each counting worker and attempt ids from 1, never take
    // each other's containers. "w<worker id>-<instance>", the instance random and kept in worker.json.
    std::string worker_label;

    Attempts tracked;
    std::vector<Delivery::HandBack> handback; // unstarted assignments to give back (drain, the owner's terms)
    std::set<AttemptId> finished;    // attempts delivered or dropped: never taken again
    std::vector<Deferred> deferred;  // assignments waiting for their GPU share (see start_deferred)
    std::optional<std::int64_t> drain_deadline_ms;
    std::optional<std::int64_t> give_up_at_ms;
    std::optional<Error> fatal; // why run() must end with an error

    // Shared with the poll thread and with drain()/stop() callers.
    util::Mutex mu;
    std::condition_variable_any cv;
    std::vector<api::Assignment> inbox GUARDED_BY(mu);
    std::atomic<int> slots{0}; // the owner's max_jobs, for the poll thread
    std::atomic<bool> draining{false};
    std::atomic<bool> hurry{false}; // drain_now(): stop the running jobs without waiting
    std::atomic<bool> stopping{false};
    std::atomic<int> active{0};

    Impl(AgentOptions o, ContainerRuntime& rt, GpuProbe& probe, Agent& outer, AgentDeps deps)
        : opt(std::move(o)), runtime(rt), self(outer), clock(deps.clock ? *deps.clock : steady),
          wall(deps.wall_clock ? *deps.wall_clock : system),
          links(deps.links ? std::move(deps.links) : http_links(opt.coordinator_url, opt.ca_cert)),
          link(links(opt.token)), spool(opt.work_dir),
          gpu(probe, clock, opt.gpu_watch, opt.gpu_health, {opt.reclaim_grace.count(), opt.reclaim_quiet.count()},
              opt.proc_root),
          delivery(opt, *link, clock, spool, Backoff(opt.backoff_initial, opt.backoff_max, backoff_seed()), hooks()),
          owner({opt.work_dir, opt.config_file, opt.share_flags, opt.share, opt.drain_grace,
                 [this](const std::string& line) { event(line); }},
                wall) {}

    Delivery::Hooks hooks() {
        return {[this](Attempt& t, const std::string& why) { request_stop(t, why, Outcome::exited, opt.stop_grace); },
                [this](AttemptId id) { return cancel_deferred(id); }, [this](const std::string& line) { event(line); }};
    }

    std::string identity() const { return opt.identity_key.empty() ? opt.coordinator_url : opt.identity_key; }
    std::int64_t now_ms() const { return clock.now_ms(); }

    // ---- identity ----
    Status register_with_coordinator() {
        const api::Registration registration{opt.name, inventory(), owner.terms()};
        Backoff backoff(opt.backoff_initial, opt.backoff_max, backoff_seed());
        for (;;) {
            auto reg = link->register_worker(registration);
            if (reg) {
                worker_id = reg->worker_id.value();
                worker_token = reg->token;
                spdlog::info("registered with {} as worker {}", opt.coordinator_url, worker_id);
                return {};
            }
            if (reg.error().code != ErrorCode::unavailable || stopping || draining) {
                return make_error(reg.error().code,
                                  "cannot register with " + opt.coordinator_url + ": " + reg.error().message);
            }
            const auto d = backoff.next_delay();
            spdlog::warn("coordinator unreachable ({}); retrying registration in {} ms", reg.error().message, d.count());
            sleep_for(d);
        }
    }

    Status establish_identity() {
        std::string instance;
        bool rewrite = false;
        if (auto stored = read_stored_identity(opt.work_dir); stored && same_pool(stored->coordinator, identity())) {
            worker_id = stored->worker_id;
            worker_token = stored->token;
            instance = stored->instance;
            rewrite = stored->coordinator != identity(); // a standby's URL added or dropped
        }
        if (!is_instance_id(instance)) {
            // A new worker, or a worker.json from before instances existed (its containers, named
            // the old way, are not recognised: attempts running across that upgrade are reported lost).
            instance = new_instance_id();
            rewrite = true;
        }
        if (worker_id == 0 || worker_token.empty()) {
            if (auto st = register_with_coordinator(); !st) {
                return st;
            }
            rewrite = true;
        }
        if (rewrite) {
            if (auto st = write_stored_identity(opt.work_dir, {identity(), worker_id, worker_token, instance}); !st) {
                return st;
            }
        }
        link->set_token(worker_token);
        worker_label = "w" + std::to_string(worker_id) + "-" + instance;
        self.m_worker_id = worker_id;
        return {};
    }

    api::Inventory inventory() const {
        api::Inventory inv;
        for (const auto& info : owner.offered_gpus(gpu.gpus())) {
            inv.gpus.push_back({info.index, info.model, info.memory_mib, info.uuid, to_string(gpu.enforcement())});
        }
        const auto cores = static_cast<std::int64_t>(std::max(1u, std::thread::hardware_concurrency()));
        const auto& share = owner.settings();
        inv.cpu_milli = share.cpu_milli.value_or(opt.cpu_milli > 0 ? opt.cpu_milli : cores * 1000);
        inv.memory_mib = share.memory_mib.value_or(opt.memory_mib > 0 ? opt.memory_mib : total_memory_mib());
        inv.slots = std::max(0, share.max_jobs.value_or(opt.slots));
        inv.runtime = runtime.name();
        return inv;
    }

    // Backoff waits end early on stop and on drain (a SIGTERM must not wait out a retry delay).
    void sleep_for(milliseconds d) {
        util::MutexLock lock(mu);
        cv.wait_for(lock, d, [&] { return stopping.load() || draining.load(); });
    }

    // ---- what the owner sees ----
    void event(const std::string& line) const {
        if (opt.on_event) {
            opt.on_event(line);
        }
    }

    void event_ended(const Attempt& t) const {
        const auto ran = (now_ms() - t.started_ms) / 1000;
        event(job_label(t.a) + " ended after " + resources::format_duration_s(std::max<std::int64_t>(ran, 0)) + ": " +
              (t.outcome == Outcome::worker_fault ? "worker fault: " : "") + t.reason);
    }

    void event_offer() const {
        const api::Inventory inv = inventory();
        std::string line = "sharing with " + opt.coordinator_url + " as worker " + std::to_string(worker_id) + ": " +
                           resources::format_milli(inv.cpu_milli) + " CPUs, " +
                           resources::format_memory_mib(inv.memory_mib) + " memory, ";
        const auto gpus = owner.offered_gpus(gpu.gpus());
        if (gpus.empty()) {
            line += "no NVIDIA driver found: CPU-only jobs";
        }
        for (std::size_t i = 0; i < gpus.size(); ++i) {
            line += (i == 0 ? "" : "; ") + std::string("GPU ") + std::to_string(gpus[i].index) + " " + gpus[i].name +
                    " (" + resources::format_memory_mib(gpus[i].memory_mib) + ")";
        }
        event(line + "; jobs run with " + runtime.name());
    }

    // ---- the attempts ----
    void end_as_fault(Attempt& t, const std::string& why) {
        t.phase = AttemptPhase::ended;
        t.exit_code.reset();
        t.reason = why;
        t.outcome = Outcome::worker_fault;
        t.outputs_done = true; // nothing to trust in a half-run's outputs
        spdlog::warn("attempt {}: {}", t.a.attempt.value(), why);
        event_ended(t);
    }

    void refresh_active() {
        active = static_cast<int>(std::count_if(tracked.begin(), tracked.end(),
                                                [](const auto& kv) { return kv.second.running(); }) +
                                  deferred.size());
    }

    void drop(AttemptId id, const std::string& why) {
        auto it = tracked.find(id);
        if (it == tracked.end()) {
            return;
        }
        if (!it->second.container.empty()) {
            if (auto st = runtime.remove(it->second.container); !st) {
                spdlog::warn("attempt {}: removing {}: {}", id.value(), it->second.container, st.error().message);
            }
        }
        spool.remove(it->second);
        finished.insert(id);
        spdlog::info("attempt {}: {}", id.value(), why);
        tracked.erase(it);
        refresh_active();
    }

    // Restores the attempts a previous run left behind.
    void recover() {
        for (auto& r : spool.recover(runtime, worker_label, now_ms())) {
            Attempt& t = r.attempt;
            t.gpu_limit_mib = gpu_limit_mib(container_spec(t));
            if (r.lost) {
                end_as_fault(t, *r.lost);
            }
            spool.save(t);
            const auto id = t.id();
            tracked.emplace(id, std::move(t));
        }
        refresh_active();
    }

    ContainerSpec container_spec(const Attempt& t) const {
        return container_spec_for(t, {worker_label, opt.cache_dir, runtime.capabilities(), owner.jobs_view(gpu.gpus())});
    }

    // ---- waiting for a GPU share ----
    // The coordinator hands a preempted job's share to the preemptor at once, but the victim here
    // learns it must stop only from the next heartbeat and then has its grace period: starting the
    // preemptor meanwhile would put two jobs' memory on one GPU. So an assignment starts only when
    // the jobs still running on its GPU leave room for its share; until then it waits (its lease
    // renewed by the heartbeats, which are sent at once to learn what must stop), for at most
    // gpu_wait_max.
    bool gpu_share_free(const api::Assignment& a) const {
        if (a.gpu_index < 0 || a.gpu_milli <= 0) {
            return true;
        }
        std::int64_t used = 0;
        for (const auto& [id, t] : tracked) {
            if (t.running() && t.a.gpu_index == a.gpu_index) {
                used += t.a.gpu_milli;
            }
        }
        return used + a.gpu_milli <= resources::k_milli_per_gpu;
    }

    void start_deferred() {
        const auto now = now_ms();
        for (auto it = deferred.begin(); it != deferred.end();) {
            const bool free = gpu_share_free(it->a);
            if (!free && now - it->since_ms < opt.gpu_wait_max.count()) {
                ++it;
                continue;
            }
            if (!free) {
                spdlog::warn("attempt {}: GPU {} still looks full after {} s; starting it anyway", it->a.attempt.value(),
                             it->a.gpu_index, opt.gpu_wait_max.count() / 1000);
            }
            api::Assignment a = std::move(it->a);
            it = deferred.erase(it);
            take(std::move(a), true);
            refresh_active();
        }
    }

    bool cancel_deferred(AttemptId id) {
        if (std::erase_if(deferred, [&](const Deferred& d) { return d.a.attempt == id; }) == 0) {
            return false;
        }
        refresh_active();
        return true;
    }

    // ---- starting ----
    void take(api::Assignment a, bool waited = false) {
        if (tracked.count(a.attempt) || finished.count(a.attempt)) {
            return; // re-sent until our start reaches the coordinator, or already done with here
        }
        if (a.gpu_index >= 0 && gpu.reclaimed(a.gpu_index)) {
            // Placed before the coordinator heard: its owner uses that GPU.
            handback.push_back({a.attempt, "GPU " + std::to_string(a.gpu_index) + " reclaimed by its owner: handed back to the queue"});
            return;
        }
        if (!waited && !gpu_share_free(a)) {
            if (std::none_of(deferred.begin(), deferred.end(), [&](const Deferred& d) { return d.a.attempt == a.attempt; })) {
                spdlog::info("attempt {}: waiting for GPU {} to be freed by the jobs still stopping on it", a.attempt.value(),
                             a.gpu_index);
                deferred.push_back({std::move(a), now_ms()});
                delivery.heartbeat_now(); // learn now which of ours must stop
                refresh_active();
            }
            return;
        }
        Attempt t = spool.create(std::move(a), now_ms());
        const ContainerSpec spec = container_spec(t);
        t.container = spec.name;
        t.gpu_limit_mib = gpu_limit_mib(spec);
        auto ready = prepare_attempt_dirs(t, opt.work_dir, opt.cache_dir, *link);
        Status started = ready ? runtime.start(spec) : Status(ready.error());
        if (!started) {
            fail_start(t, started.error());
        } else {
            spdlog::info("attempt {} (job {} `{}`): started as {}", t.a.attempt.value(), t.a.job.value(), t.a.spec.name, t.container);
            event(job_label(t.a) + " started: " + share_of(t.a));
        }
        spool.save(t);
        const auto id = t.id();
        tracked.emplace(id, std::move(t));
        refresh_active();
    }

    void fail_start(Attempt& t, const Error& e) {
        t.container.clear();
        if (e.code == ErrorCode::invalid_input) {
            // The job's own problem (its inputs): it fails like a job, with the reason.
            t.phase = AttemptPhase::ended;
            t.exit_code = 1;
            t.reason = e.message;
            t.outcome = Outcome::exited;
            t.outputs_done = true;
            event_ended(t);
        } else {
            end_as_fault(t, "could not start on " + runtime.name() + ": " + e.message);
        }
        Spool::append_note(t, "gpupool-worker: " + t.reason + "\n");
    }

    // ---- GPUs ----
    // Where the driver cannot cap a fractional job's GPU memory (no MPS), stop a job over its share.
    void watch_gpu_memory() {
        std::vector<WatchedAttempt> watched;
        for (const auto& [id, t] : tracked) {
            if (t.running() && t.gpu_limit_mib > 0 && t.stop_reason.empty()) {
                watched.push_back({id.value(), t.a.gpu_index, t.gpu_limit_mib});
            }
        }
        for (const auto& o : gpu.overuse(watched)) {
            request_stop(tracked.at(AttemptId(o.attempt)),
                         "exceeded its GPU memory share: " + std::to_string(o.used_mib) + " MiB in use, limit " +
                             std::to_string(o.limit_mib) + " MiB",
                         Outcome::exited, opt.stop_grace);
        }
    }

    // A GPU that fails (gone from the driver, uncorrectable ECC errors, a driver that stopped
    // answering) takes no new work, and the jobs on it go back to the queue as a worker fault: the
    // researcher does not pay for the hardware's failure.
    void check_gpu_health(bool now = false) {
        auto verdict = gpu.check_health(now);
        if (!verdict) {
            return;
        }
        for (const auto& u : *verdict) {
            for (auto& [id, t] : tracked) {
                if (t.a.gpu_index == u.index) {
                    request_stop(t, "GPU " + std::to_string(u.index) + " failed on the worker: " + u.reason,
                                 Outcome::worker_fault, opt.stop_grace);
                }
            }
        }
        delivery.heartbeat_now(); // tell the coordinator at once
    }

    // The owner's own use of a GPU (reclaim.hpp): no new work there; its jobs get reclaim_grace, then
    // go back to the queue unpaid.
    void check_reclaim() {
        const ReclaimStep step = gpu.reclaim(gpu_job_marks(tracked, runtime));
        for (const auto& c : step.changes) {
            event(describe(c, gpu.reclaim_policy()));
        }
        for (auto id : step.term) {
            Attempt& t = tracked.at(AttemptId(id));
            request_stop(t, "GPU " + std::to_string(t.a.gpu_index) + " reclaimed by its owner", Outcome::owner_preempted,
                         opt.reclaim_grace);
        }
        for (auto id : step.kill) {
            tracked.at(AttemptId(id)).kill_at_ms = now_ms(); // watch() kills it now
        }
        if (!step.changes.empty()) {
            // The worker as a whole is `reclaimed` once every GPU it offers is; until then the others share.
            const auto offered = owner.offered_gpus(gpu.gpus());
            owner.set_reclaimed(!offered.empty() && std::all_of(offered.begin(), offered.end(),
                                                                [&](const GpuInfo& g) { return gpu.reclaimed(g.index); }),
                                active.load());
            delivery.heartbeat_now(); // tell the coordinator at once
        }
    }

    // ---- watching ----
    void request_stop(Attempt& t, const std::string& why, Outcome outcome, milliseconds grace) {
        if (!t.running() || !t.stop_reason.empty()) {
            return;
        }
        t.stop_reason = why;
        t.stop_outcome = outcome;
        t.kill_at_ms = now_ms() + grace.count();
        if (auto st = runtime.signal(t.container, SIGTERM); !st) {
            spdlog::warn("attempt {}: SIGTERM: {}", t.a.attempt.value(), st.error().message);
        }
        spdlog::info("attempt {}: stopping ({})", t.a.attempt.value(), why);
        spool.save(t);
    }

    // Asks the runtime how a running attempt is; false when it has ended (then it needs no more watching).
    bool poll_one(Attempt& t, std::int64_t now) {
        auto st = runtime.poll(t.container);
        if (!st && st.error().code == ErrorCode::not_found) {
            // Removed behind the worker's back (`podman rm -f`, an engine reset): a worker
            // fault for this attempt, reported once; the slot is free again.
            end_as_fault(t, "the job's " + runtime.name() + " container disappeared while it ran (" +
                                st.error().message + ")");
            spool.save(t);
            return false;
        }
        if (!st) {
            if (!t.poll_failing_since_ms) {
                t.poll_failing_since_ms = now;
                spdlog::warn("attempt {}: cannot tell how the job is: {}", t.id().value(), st.error().message);
            } else if (now - *t.poll_failing_since_ms > opt.engine_unanswered_max.count()) {
                end_as_fault(t, "the " + runtime.name() + " engine could not say how the job is for " +
                                    std::to_string(opt.engine_unanswered_max.count() / 1000) + " s: " + st.error().message);
                (void)runtime.signal(t.container, SIGKILL);
                spool.save(t);
                return false;
            }
        } else if (*st) {
            finish(t, **st);
            return false;
        } else if (t.poll_failing_since_ms) {
            spdlog::info("attempt {}: the {} engine answers again", t.id().value(), runtime.name());
            t.poll_failing_since_ms.reset();
        }
        return true;
    }

    void watch() {
        const auto now = now_ms();
        for (auto& [id, t] : tracked) {
            if (!t.running() || !poll_one(t, now)) {
                continue;
            }
            // The limits hold even while the engine does not answer.
            const std::int64_t max_rt_ms = t.a.spec.resources.max_runtime_s * 1000;
            if (t.stop_reason.empty() && max_rt_ms > 0 && now - t.started_ms > max_rt_ms) {
                request_stop(t, "exceeded max_runtime " + resources::format_duration_s(t.a.spec.resources.max_runtime_s),
                             Outcome::exited, opt.runtime_grace);
            }
            if (t.kill_at_ms && now >= *t.kill_at_ms && !t.killed) {
                t.killed = true;
                if (auto k = runtime.signal(t.container, SIGKILL); !k) {
                    spdlog::warn("attempt {}: SIGKILL: {}", id.value(), k.error().message);
                }
            }
        }
        refresh_active();
    }

    void finish(Attempt& t, const ExitStatus& st) {
        t.phase = AttemptPhase::ended;
        t.exit_code = st.exit_code;
        t.outcome = t.stop_outcome;
        if (!t.stop_reason.empty()) {
            t.reason = t.stop_reason + " (exit " + std::to_string(st.exit_code) + ")";
        } else if (st.oom_killed ||
                   (st.exit_code == 137 && t.a.spec.resources.memory_mib > 0 && runtime.capabilities().limits_memory)) {
            t.reason = "killed: out of memory (exit 137; memory limit " + std::to_string(t.a.spec.resources.memory_mib) +
                       " MiB)";
        } else {
            t.reason = "exited with status " + std::to_string(st.exit_code);
        }
        if (t.stop_reason.empty() && st.exit_code != 0 && t.a.gpu_index >= 0) {
            // A GPU job that failed may have failed with its GPU: ask the driver now rather than at
            // the next periodic check, so that the hardware's failure is not charged as the job's.
            check_gpu_health(true);
            for (const auto& u : gpu.unhealthy()) {
                if (u.index == t.a.gpu_index) {
                    t.outcome = Outcome::worker_fault;
                    t.reason = "GPU " + std::to_string(u.index) + " failed on the worker: " + u.reason + " (the job " +
                               t.reason + ")";
                }
            }
        }
        if (t.outcome != Outcome::exited) {
            t.outputs_done = true; // handed back: a later attempt produces the outputs
        }
        spdlog::info("attempt {}: {}", t.a.attempt.value(), t.reason);
        event_ended(t);
        spool.save(t);
    }

    // ---- delivering ----
    Delivery::Facts heartbeat_facts() const {
        Delivery::Facts f;
        for (const auto& d : deferred) {
            f.waiting.push_back(d.a.attempt);
        }
        for (const auto& u : gpu.unhealthy()) {
            f.unhealthy_gpus.push_back(u.index);
        }
        f.reclaimed_gpus = gpu.reclaimed();
        f.draining = draining.load();
        f.active = active.load();
        f.inventory = inventory();
        f.sharing = owner.state();
        f.sharing_changes_at_ms = owner.changes_at_ms();
        f.terms = owner.terms();
        f.gpu_memory_used_mib = gpu.memory_used_mib_of(f.inventory.gpus);
        return f;
    }

    void take_fatal() {
        if (delivery.fatal() && !fatal) {
            fatal = delivery.fatal();
            stopping = true;
        }
    }

    void deliver() {
        const auto done = delivery.deliver(tracked, [this] { return heartbeat_facts(); });
        take_fatal();
        for (auto id : done) {
            drop(id, tracked.at(id).fenced ? "dropped (no longer current)" : "delivered");
        }
    }

    // ---- poll thread ----
    void poll_loop() {
        auto plink = links(worker_token);
        std::set<AttemptId> handed;
        Backoff pb(opt.backoff_initial, opt.backoff_max, static_cast<std::uint64_t>(getpid()) * 7919u + 1);
        while (!stopping && !draining) {
            if (slots > 0 && active.load() >= slots) {
                sleep_for(opt.tick);
                continue;
            }
            auto r = plink->poll(opt.poll_wait);
            if (stopping || draining) {
                // Work that arrives now is not started; the coordinator re-sends it until started,
                // and loses it to another worker when our lease on it runs out.
                break;
            }
            if (!r) {
                if (r.error().code == ErrorCode::unavailable) {
                    sleep_for(pb.next_delay());
                } else {
                    spdlog::error("poll: {}", r.error().message);
                    sleep_for(opt.backoff_max);
                }
                continue;
            }
            pb.reset();
            // The coordinator re-sends an assignment until our start reaches it; do not spin on
            // one we have already handed over.
            bool fresh = false;
            for (const auto& a : *r) {
                fresh = handed.insert(a.attempt).second || fresh;
            }
            if (!r->empty()) {
                util::MutexLock lock(mu);
                for (auto& a : *r) {
                    inbox.push_back(std::move(a));
                }
                cv.notify_all();
            }
            if (!r->empty() && !fresh) {
                sleep_for(opt.tick * 5);
            }
        }
    }

    // ---- the owner's terms (worker/owner) ----
    void hand_back_running(const std::string& why) {
        for (auto& [id, t] : tracked) {
            request_stop(t, why, Outcome::owner_preempted, opt.stop_grace);
        }
    }

    void owner_step() {
        const auto before = owner.state();
        owner.refresh(active.load());
        if (owner.window_grace_over()) {
            hand_back_running("the owner's sharing window ended: handed back to the queue");
        }
        slots = std::max(0, owner.settings().max_jobs.value_or(opt.slots));
        if (owner.state() != before) {
            delivery.heartbeat_now(); // tell the coordinator at once
        }
        answer_requests();
    }

    void answer_requests() {
        const auto answered = desk.answer_all([this](const json& req) {
            return answer_owner_request(owner, req, facts(), active.load(),
                                        [this](const std::string& why) { hand_back_running(why); });
        });
        if (answered > 0) {
            delivery.heartbeat_now();
        }
    }

    WorkerFacts facts() const {
        const auto inv = inventory();
        const auto contact = delivery.last_contact_ms();
        return {worker_id, opt.coordinator_url,
                contact ? std::optional(wall.now_ms() - (now_ms() - *contact)) : std::nullopt,
                draining.load(), gpu.gpus(), running_jobs(tracked, now_ms()), inv.cpu_milli, inv.memory_mib,
                static_cast<int>(inv.slots)};
    }

    // ---- the agent thread ----
    Status prepare() {
        std::error_code ec;
        fs::create_directories(opt.work_dir, ec);
        if (ec) {
            return make_error(ErrorCode::io, "cannot create work dir " + opt.work_dir.string() + ": " + ec.message());
        }
        if (opt.cache_dir.empty()) {
            opt.cache_dir = opt.work_dir / "cache";
        }
        fs::create_directories(opt.cache_dir, ec);
        if (opt.name.empty()) {
            opt.name = host_name();
        }
        if (auto st = gpu.discover(); !st) {
            return st;
        }
        // A worker whose engine cannot run jobs must not join as active (every job would fail).
        return runtime.check();
    }

    std::vector<api::Assignment> wait_for_inbox() {
        std::vector<api::Assignment> fresh;
        util::MutexLock lock(mu);
        cv.wait_for(lock, opt.tick, [&]() REQUIRES(mu) { return !inbox.empty() || desk.pending() || stopping.load(); });
        fresh.swap(inbox);
        return fresh;
    }

    void take_inbox() {
        for (auto& a : wait_for_inbox()) {
            if (draining) {
                handback.push_back({a.attempt}); // never started here: give it straight back
            } else if (auto no = owner.refusal(a, gpu.gpus())) {
                spdlog::info("attempt {}: handed back unstarted: {}", a.attempt.value(), *no);
                handback.push_back({a.attempt, *no + ": handed back to the queue"});
            } else {
                take(std::move(a));
            }
        }
        if ((draining || !owner.taking_work()) && !deferred.empty()) {
            for (const auto& d : deferred) {
                handback.push_back({d.a.attempt, draining ? Delivery::HandBack().why : "the owner stopped sharing"});
            }
            deferred.clear();
            refresh_active();
        }
    }

    // One step of a drain; true when run() may return.
    bool drain_step() {
        const auto now = now_ms();
        if (hurry && (!drain_deadline_ms || *drain_deadline_ms > now)) {
            drain_deadline_ms = now;
            give_up_at_ms.reset();
            spdlog::warn("stopping {} running job(s) now and handing them back", active.load());
        }
        if (!drain_deadline_ms) {
            drain_deadline_ms = now + opt.drain_grace.count();
            delivery.heartbeat_now(); // tell the coordinator at once: no new work here
            spdlog::info("draining: no new work; {} running job(s) have {} s to finish", active.load(),
                         opt.drain_grace.count() / 1000);
        }
        if (now >= *drain_deadline_ms) {
            hand_back_running("the worker is shutting down: handed back to the queue");
        }
        if (tracked.empty() && handback.empty()) {
            return true;
        }
        if (active.load() == 0) {
            if (!give_up_at_ms) {
                give_up_at_ms = now + (hurry ? std::min<milliseconds>(opt.give_up_after_drain, k_hurried_give_up)
                                             : opt.give_up_after_drain)
                                          .count();
            } else if (now >= *give_up_at_ms) {
                spdlog::warn("drain: the coordinator did not take {} result(s); they stay spooled in {}", tracked.size(),
                             spool.dir().string());
                return true;
            }
        }
        return false;
    }

    Status run() {
        const auto wake = [this] { { util::MutexLock lock(mu); } cv.notify_all(); }; // not between check and wait
        if (auto st = prepare(); !st) {
            return st;
        }
        if (auto st = opt.control_socket ? desk.open(opt.work_dir, wake) : Status(); !st) {
            return st; // another worker runs on this work dir
        }
        if (auto st = establish_identity(); !st) {
            if (draining || stopping) {
                spdlog::warn("stopped before registering ({})", st.error().message);
                return {};
            }
            return st;
        }
        recover();
        event_offer();
        std::thread poller([this] { poll_loop(); });
        while (!stopping) {
            owner_step();
            take_inbox();
            start_deferred();
            delivery.hand_back(handback, tracked);
            take_fatal();
            watch();
            check_reclaim();
            watch_gpu_memory();
            check_gpu_health();
            deliver();
            if (draining && drain_step()) {
                break;
            }
        }
        stopping = true;
        cv.notify_all();
        poller.join();
        desk.close();
        if (fatal) {
            return *fatal;
        }
        return {};
    }
};

Agent::Agent(AgentOptions options, ContainerRuntime& runtime, GpuProbe& gpus, AgentDeps deps)
    : m_impl(std::make_unique<Impl>(std::move(options), runtime, gpus, *this, std::move(deps))) {}

Agent::~Agent() = default;

Status Agent::run() { return m_impl->run(); }

void Agent::drain() {
    m_impl->draining = true;
    { util::MutexLock lock(m_impl->mu); } // a waiter between its check and its wait must not miss this
    m_impl->cv.notify_all();
}

void Agent::drain_now() {
    m_impl->hurry = true;
    drain();
}

void Agent::reload() { m_impl->desk.post(json{{"op", "reload"}}, false); }

void Agent::stop() {
    m_impl->stopping = true;
    m_impl->cv.notify_all();
}

} // namespace gpupool::worker
