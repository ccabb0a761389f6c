#include "worker/agent/agent.hpp"

#include "core/resources/quantity.hpp"
#include "core/util/thread_safety.hpp"
#include "worker/agent/agent_setup.hpp"
#include "worker/agent/delivery.hpp"
#include "worker/agent/gpu_watch.hpp"
#include "worker/agent/image_prefetch.hpp"
#include "worker/agent/job_container.hpp"
#include "worker/agent/model_prefetch.hpp"
#include "worker/agent/offer.hpp"
#include "worker/agent/poll_thread.hpp"
#include "worker/agent/waiting_room.hpp"
#include "worker/agent/spool.hpp"
#include "worker/agent/steady_clock.hpp"
#include "worker/gpu/mps_daemon.hpp"
#include "worker/owner/owner_desk.hpp"

#include <spdlog/spdlog.h>

#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
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
constexpr milliseconds k_leave_wait{2'000};       // a clean exit waits at most this for the coordinator


} // namespace

// The agent's own state: the attempts it holds and their lifecycle (take, start, watch, finish,
// drop), the drain, and the threads. The spool, the deliveries and the GPUs are its parts.
struct Agent::Impl {
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

    std::unique_ptr<HubCache> models;     // the model-weight cache (<cache_dir>/models)
    std::unique_ptr<ModelPrefetch> prefetch;
    std::unique_ptr<ImagePrefetch> images; // each job's image, made present before it starts
    std::unique_ptr<MpsControl> mps;      // the worker's own MPS daemon (--mps)
    Attempts tracked;
    std::vector<Delivery::HandBack> handback; // unstarted assignments to give back (drain, the owner's terms)
    std::set<AttemptId> finished;    // attempts delivered or dropped: never taken again
    WaitingRoom waiting; // taken, not started: waiting for model weights or a GPU share
    std::optional<std::int64_t> drain_deadline_ms;
    std::optional<std::int64_t> give_up_at_ms;
    std::optional<Error> fatal; // why run() must end with an error

    // Shared with the poll thread and with drain()/stop() callers (poll_thread.hpp).
    AgentSignals sig;
    std::atomic<int>& slots = sig.slots;
    std::atomic<bool>& draining = sig.draining;
    std::atomic<bool>& hurry = sig.hurry;
    std::atomic<bool>& stopping = sig.stopping;
    std::atomic<int>& active = sig.active;

    ~Impl() { images.reset(); } // its thread wakes this agent: it goes first

    Impl(AgentOptions o, ContainerRuntime& rt, GpuProbe& probe, Agent& outer, AgentDeps deps)
        : opt(std::move(o)), runtime(rt), self(outer), clock(deps.clock ? *deps.clock : steady),
          wall(deps.wall_clock ? *deps.wall_clock : system),
          links(deps.links ? std::move(deps.links) : http_links(opt.coordinator_url, opt.ca_cert)),
          link(links(opt.token)), spool(opt.work_dir),
          gpu(probe, clock, opt.gpu_watch, opt.gpu_health, {opt.reclaim_grace.count(), opt.reclaim_quiet.count()},
              opt.proc_root, opt.idle_watch),
          delivery({opt.work_dir, opt.heartbeat, opt.log_flush}, *link, clock,
                   Backoff(opt.backoff_initial, opt.backoff_max, backoff_seed()), hooks()),
          owner({opt.work_dir, opt.config_file, opt.share_flags, opt.share, opt.drain_grace,
                 [this](const std::string& line) { event(line); }},
                wall),
          waiting(opt.gpu_wait_max) {}

    Delivery::Hooks hooks() {
        return {[this](Attempt& t, const std::string& why) {
                    request_stop(t, why, Outcome::exited, stop_grace_of(t, opt.stop_grace));
                },
                [this](AttemptId id) { return cancel_waiting(id); }, [this](const std::string& line) { event(line); }};
    }

    std::string identity() const { return opt.identity_key.empty() ? opt.coordinator_url : opt.identity_key; }
    std::int64_t now_ms() const { return clock.now_ms(); }

    // ---- identity ----
    Status establish_identity() {
        auto id = worker::establish_identity(opt.work_dir, identity(), [this] {
            return register_until_answered(*link, {opt.name, inventory(), owner.terms()}, opt, identity(), sig);
        });
        if (!id) {
            return id.error();
        }
        worker_id = id->worker_id;
        worker_token = id->token;
        link->set_token(worker_token);
        worker_label = "w" + std::to_string(worker_id) + "-" + id->instance;
        self.m_worker_id = worker_id;
        return {};
    }

    OfferInputs offer() const {
        return {owner.offered_gpus(gpu.gpus()), gpu.enforcement(), runtime.name(), models.get()};
    }
    api::Inventory inventory() const {
        return offer_inventory(offer(), owner.settings(), {opt.cpu_milli, opt.memory_mib, opt.slots});
    }

    // Wakes the agent thread and the poll thread: something to look at now (`job_exited`: the
    // runtime saw a job end).
    void wake(bool job_exited = false) { sig.wake(job_exited); }
    void sleep_for(milliseconds d) { sig.sleep_for(d); }

    // ---- what the owner sees ----
    void event(const std::string& line) const {
        if (opt.on_event) {
            opt.on_event(line);
        }
    }

    void event_ended(const Attempt& t) const {
        const auto ran = (now_ms() - t.started_ms) / 1000;
        event(job_label(t.a) + " ended after " + resources::format_duration_s(std::max<std::int64_t>(ran, 0)) + ": " +
              (t.outcome == Outcome::worker_fault        ? "worker fault: "
               : t.outcome == Outcome::image_unavailable ? "image unavailable: "
                                                         : "") +
              t.reason);
    }

    void event_offer() const { event(announce_offer(offer(), inventory(), opt.coordinator_url, worker_id)); }

    // ---- the attempts ----
    void end_as_fault(Attempt& t, const std::string& why) {
        end_without_exit(t, Outcome::worker_fault, why);
        spdlog::warn("attempt {}: {}", t.a.attempt.value(), why);
        event_ended(t);
    }

    void refresh_active() {
        const int now = static_cast<int>(std::count_if(tracked.begin(), tracked.end(),
                                                       [](const auto& kv) { return kv.second.running(); }) +
                                         waiting.size());
        if (active.exchange(now) > now) {
            wake(); // a slot freed: the poll thread asks for work at once
        }
    }

    void drop(AttemptId id, const std::string& why) {
        auto it = tracked.find(id);
        if (it == tracked.end()) {
            return;
        }
        // The folder is recycled only when nothing of the job runs any more (its container removed).
        const Status gone = it->second.container.empty() ? Status{} : runtime.remove(it->second.container);
        if (!gone) {
            spdlog::warn("attempt {}: removing {}: {}", id.value(), it->second.container, gone.error().message);
        }
        spool.remove(it->second, gone.has_value());
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
        ContainerContext ctx{worker_label, opt.cache_dir, runtime.capabilities(), owner.jobs_view(gpu.gpus())};
        if (models) {
            ctx.model_cache = models->root();
            ctx.models_ready = std::all_of(t.a.spec.cache_models.begin(), t.a.spec.cache_models.end(), [&](const auto& m) {
                auto ref = parse_model_ref(m);
                return ref && models->has(*ref);
            });
        }
        ctx.mps_pipe = mps ? std::optional(mps_dirs(opt.work_dir).pipe) : std::nullopt;
        ctx.mps_compute = opt.mps_compute;
        return container_spec_for(t, ctx);
    }

    void start_waiting() {
        for (auto& r : waiting.ready(now_ms(), tracked, prefetch.get())) {
            if (r.image_unavailable) {
                end_unstarted(std::move(r.a), *r.image_unavailable);
            } else {
                take(std::move(r.a), true, r.note);
            }
        }
        refresh_active();
    }

    bool cancel_waiting(AttemptId id) {
        const bool was = waiting.cancel(id, prefetch.get());
        refresh_active();
        return was;
    }

    // ---- starting ----
    void take(api::Assignment a, bool waited = false, const std::string& note = {}) {
        if (tracked.count(a.attempt) || finished.count(a.attempt)) {
            return; // re-sent until our start reaches the coordinator, or already done with here
        }
        if (a.gpu_index >= 0 && gpu.reclaimed(a.gpu_index)) {
            // Placed before the coordinator heard: its owner uses that GPU.
            handback.push_back({a.attempt, "GPU " + std::to_string(a.gpu_index) + " reclaimed by its owner: handed back to the queue"});
            return;
        }
        if (!waited && waiting.holds(a.attempt)) {
            return;
        }
        // Its image and its weights come in the waiting room: neither billed nor timed as its runtime.
        const bool pull = !waited && images && images->want(a.attempt, a.spec.image);
        const bool fetch = !waited && prefetch && prefetch->want(a.attempt, a.spec.cache_models);
        if (pull || fetch) {
            if (pull) {
                waiting.wait_for_image(std::move(a), now_ms(), fetch);
            } else {
                waiting.wait_for_models(std::move(a), now_ms());
            }
            refresh_active();
            return;
        }
        if (!waited && !gpu_share_free(a, tracked)) {
            waiting.wait_for_gpu(std::move(a), now_ms());
            delivery.heartbeat_now(); // learn now which of ours must stop
            refresh_active();
            return;
        }
        Attempt t = spool.create(std::move(a), now_ms());
        if (!note.empty()) {
            Spool::append_note(t, "gpupool-worker: " + note + "\n");
        }
        const ContainerSpec spec = container_spec(t);
        t.container = spec.name;
        t.gpu_limit_mib = gpu_limit_mib(spec);
        auto ready = prepare_attempt_dirs(t, opt.work_dir, opt.cache_dir, runtime.capabilities().isolates, *link);
        Status started = ready ? runtime.start(spec) : Status(ready.error());
        if (!started) {
            fail_start(t, started.error());
        } else {
            spdlog::info("attempt {} (job {} `{}`): started as {}", t.a.attempt.value(), t.a.job.value(), t.a.spec.name, t.container);
            event(job_label(t.a) + " started: " + share_of(t.a));
        }
        t.unsaved = true;
        const auto id = t.id();
        tracked.emplace(id, std::move(t));
        refresh_active();
    }

    // Its image cannot be had (ImagePrefetch): the job's own error, ended here without a start (so
    // never billed), reported as image_unavailable with the engine's words, in its log too.
    void end_unstarted(api::Assignment a, const std::string& why) {
        Attempt t = spool.create(std::move(a), now_ms());
        end_without_exit(t, Outcome::image_unavailable, why);
        Spool::append_note(t, "gpupool-worker: image unavailable: " + why + "\n");
        event_ended(t);
        t.unsaved = true;
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
    // The memory watchdog and the idle guard (GpuWatch::judge); the models jobs use stay in the cache.
    void watch_gpus() {
        std::vector<GpuJob> jobs;
        std::set<std::string> pinned;
        for (const auto& [id, t] : tracked) {
            if (t.running() && t.a.gpu_index >= 0 && t.stop_reason.empty()) {
                jobs.push_back({id.value(), t.a.gpu_index, t.gpu_limit_mib, t.a.idle_timeout_s * 1000});
            }
            pinned.insert(t.a.spec.cache_models.begin(), t.a.spec.cache_models.end());
        }
        waiting.models(pinned);
        if (prefetch) {
            prefetch->set_pinned(std::move(pinned));
        }
        const GpuJudgement j = gpu.judge(jobs);
        for (const auto& [attempt, line] : j.notes) {
            Spool::append_note(tracked.at(AttemptId(attempt)), "gpupool-worker: " + line + "\n");
        }
        for (const auto& [attempt, why] : j.stop) {
            request_stop(tracked.at(AttemptId(attempt)), why, Outcome::exited, opt.stop_grace);
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
        t.unsaved = true;
    }

    // Asks the runtime how a running attempt is; false when it has ended (then it needs no more watching).
    bool poll_one(Attempt& t, std::int64_t now) {
        auto st = runtime.poll(t.container);
        if (!st && st.error().code == ErrorCode::not_found) {
            // Removed behind the worker's back (`podman rm -f`, an engine reset): a worker
            // fault for this attempt, reported once; the slot is free again.
            end_as_fault(t, "the job's " + runtime.name() + " container disappeared while it ran (" +
                                st.error().message + ")");
            t.unsaved = true;
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
                t.unsaved = true;
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
        t.reason = exit_reason(t, st, runtime.capabilities().limits_memory);
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
        t.unsaved = true;
    }

    // ---- delivering ----
    Delivery::Facts heartbeat_facts() const {
        Delivery::Facts f;
        f.waiting = waiting.ids();
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
        if (prefetch) {
            f.fetching = prefetch->progress();
        }
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

    // ---- poll thread (poll_thread.hpp) ----
    void poll_loop() {
        auto plink = links(worker_token);
        poll_for_assignments(*plink, sig, opt, clock);
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
                static_cast<int>(inv.slots), to_string(gpu.enforcement())};
    }

    // ---- the agent thread ----
    Status prepare() {
        if (auto st = prepare_agent_dirs(opt); !st) {
            return st;
        }
        if (auto st = gpu.discover(); !st) {
            return st;
        }
        models = std::make_unique<HubCache>(opt.cache_dir / "models", opt.model_cache_max_bytes);
        prefetch = std::make_unique<ModelPrefetch>(*models, hub_options(opt));
        images = std::make_unique<ImagePrefetch>(runtime, [this] { wake(true); }); // a pull ended: look now
        waiting.set_images(images.get());
        // A worker whose engine cannot run jobs must not join as active (every job would fail).
        if (auto st = runtime.check(); !st) {
            return st;
        }
        return opt.mps ? start_mps() : Status();
    }

    // `--mps`: the worker's own MPS control daemon for the GPUs it shares (mps_daemon.hpp).
    Status start_mps() {
        std::vector<std::string> uuids;
        for (const auto& g : owner.offered_gpus(gpu.gpus())) {
            uuids.push_back(g.uuid);
        }
        auto started = start_worker_mps(uuids, runtime.capabilities().shares_host_ipc, runtime.name(), opt.work_dir);
        if (!started) {
            return started.error();
        }
        mps = std::move(*started);
        gpu.set_mps(true);
        spdlog::info("MPS control daemon running for {} GPU(s); fractional jobs are its clients", uuids.size());
        return {};
    }

    std::vector<api::Assignment> wait_for_inbox() {
        std::vector<api::Assignment> fresh;
        util::MutexLock lock(sig.mu);
        sig.cv.wait_for(lock, opt.tick, [&]() REQUIRES(sig.mu) {
            return !sig.inbox.empty() || sig.exited || desk.pending() || stopping.load();
        });
        sig.exited = false;
        fresh.swap(sig.inbox);
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
        if ((draining || !owner.taking_work()) && !waiting.empty()) {
            for (AttemptId id : waiting.take_all(prefetch.get())) {
                handback.push_back({id, draining ? Delivery::HandBack().why : "the owner stopped sharing"});
            }
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

    // A clean exit: the coordinator marks this worker offline at once and puts what it assigned here
    // and was not started back in the queue, without using up an attempt.
    void leave() {
        if (fatal) {
            return; // refused (banned, a pool that forgot us, a wrong CA): nothing to tell it
        }
        auto back = link->leave(k_leave_wait);
        if (!back) {
            spdlog::warn("could not tell the coordinator that this worker leaves ({}); it stops placing work here "
                         "once the worker timeout passes",
                         back.error().message);
            return;
        }
        spdlog::info("left the pool; {} assignment(s) not started here went back to the queue", back->size());
    }

    Status run() {
        if (auto st = prepare(); !st) {
            return st;
        }
        if (auto st = opt.control_socket ? desk.open(opt.work_dir, [this] { wake(); }) : Status(); !st) {
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
        runtime.on_exit([this] { wake(true); });
        std::thread poller([this] { poll_loop(); });
        while (!stopping) {
            owner_step();
            take_inbox();
            start_waiting();
            delivery.hand_back(handback, tracked);
            take_fatal();
            watch();
            check_reclaim();
            watch_gpus();
            check_gpu_health();
            deliver();
            spool.save_unsaved(tracked);
            if (draining && drain_step()) {
                break;
            }
        }
        spool.save_unsaved(tracked);
        stopping = true;
        sig.cv.notify_all();
        leave(); // before the join: the coordinator answers the poll thread's parked poll at once
        poller.join();
        runtime.on_exit(nullptr);
        desk.close();
        prefetch.reset(); // stops a download in flight (it resumes next time)
        images.reset();   // waits for a pull in flight
        if (mps) {
            if (auto st = mps->stop(); !st) {
                spdlog::warn("stopping the MPS control daemon: {}", st.error().message);
            }
        }
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
    { util::MutexLock lock(m_impl->sig.mu); } // a waiter between its check and its wait must not miss this
    m_impl->sig.cv.notify_all();
}

void Agent::drain_now() {
    m_impl->hurry = true;
    drain();
}

void Agent::reload() { m_impl->desk.post(json{{"op", "reload"}}, false); }

void Agent::stop() {
    m_impl->stopping = true;
    m_impl->sig.cv.notify_all();
}

} // namespace gpupool::worker
