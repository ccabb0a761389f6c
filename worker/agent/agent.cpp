#include "worker/agent/agent.hpp"

#include "core/resources/quantity.hpp"
#include "core/util/thread_safety.hpp"
#include "worker/agent/agent_setup.hpp"
#include "worker/agent/delivery.hpp"
#include "worker/agent/drain.hpp"
#include "worker/agent/forge.hpp"
#include "worker/agent/gpu_watch.hpp"
#include "worker/agent/image_prefetch.hpp"
#include "worker/agent/job_container.hpp"
#include "worker/agent/job_control.hpp"
#include "worker/agent/model_prefetch.hpp"
#include "worker/agent/offer.hpp"
#include "worker/agent/poll_thread.hpp"
#include "worker/agent/spool.hpp"
#include "worker/agent/steady_clock.hpp"
#include "worker/agent/waiting_room.hpp"
#include "worker/gpu/mps_daemon.hpp"
#include "worker/owner/owner_desk.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>
#include <thread>
#include <vector>

namespace gpupool::worker {

namespace fs = std::filesystem;
using nlohmann::json;
using std::chrono::milliseconds;

namespace {

constexpr milliseconds k_leave_wait{2'000}; // a clean exit waits at most this for the coordinator

} // namespace

// The agent's own state: what it takes (the inbox, the waiting room, the owner's terms), its identity
// and the threads; it steps its parts in one loop. The attempts are the AttemptTable's, their jobs
// JobControl's; the spool, the deliveries, the GPUs and the drain are parts of their own.
struct Agent::Impl {
    AgentOptions opt;
    ContainerRuntime& runtime;
    Agent& self;
    SteadyClock steady;
    const util::Clock& clock;
    util::SystemClock system;
    const util::Clock& wall; // Unix ms: the owner's windows and timed pauses
    LinkFactory links;
    std::unique_ptr<CoordinatorLink> link; // the agent thread's
    Spool spool;
    AttemptTable attempts; // started here (or recovered) and not yet delivered; the hand-backs
    JobControl jobs;       // starts, watches, stops and drops them
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

    std::unique_ptr<HubCache> models; // the model-weight cache (<cache_dir>/models)
    std::unique_ptr<ModelPrefetch> prefetch;
    std::unique_ptr<ImagePrefetch> images; // each job's image, made present before it starts
    std::unique_ptr<MpsControl> mps;       // the worker's own MPS daemon (--mps)
    WaitingRoom waiting;                   // taken, not started: waiting for model weights or a GPU share
    Drain drain;                           // when draining: when to stop the running jobs, when to return
    std::optional<Error> fatal;            // why run() must end with an error
    std::optional<TestForge> test_forge;   // TEST ONLY: GPUPOOL_TEST_FORGE (forge.hpp)

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
          jobs({opt.runtime_grace, opt.engine_unanswered_max}, runtime, spool, attempts, clock,
               {[this](const std::string& line) { event(line); }, [this](std::int64_t i) { return gpu_failed(i); },
                [this] { return wall.now_ms(); }, [this](Attempt& t) { forge_if_drawn(t); }}),
          gpu(probe, clock, opt.gpu_watch, opt.gpu_health, {opt.reclaim_grace.count(), opt.reclaim_quiet.count()},
              opt.proc_root, opt.idle_watch),
          delivery({opt.work_dir, opt.heartbeat, opt.log_flush}, *link, clock,
                   Backoff(opt.backoff_initial, opt.backoff_max, backoff_seed()), hooks()),
          owner({opt.work_dir, opt.config_file, opt.share_flags, opt.share, opt.drain_grace,
                 [this](const std::string& line) { event(line); }},
                wall),
          waiting(opt.gpu_wait_max), drain(opt.drain_grace, opt.give_up_after_drain) {}

    Delivery::Hooks hooks() {
        return {[this](Attempt& t, const std::string& why) {
                    jobs.stop(t.id(), why, Outcome::exited, stop_grace_of(t, opt.stop_grace));
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

    // ---- what the owner sees ----
    void event(const std::string& line) const {
        if (opt.on_event) {
            opt.on_event(line);
        }
    }

    void event_offer() const { event(announce_offer(offer(), inventory(), opt.coordinator_url, worker_id)); }

    // ---- the attempts ----
    void refresh_active() {
        const int now = attempts.running() + static_cast<int>(waiting.size());
        if (active.exchange(now) > now) {
            wake(); // a slot freed: the poll thread asks for work at once
        }
    }

    // Restores the attempts a previous run left behind.
    void recover() {
        for (auto& r : spool.recover(runtime, worker_label, now_ms())) {
            r.attempt.gpu_limit_mib = gpu_limit_mib(container_spec(r.attempt));
            const auto id = attempts.add(std::move(r.attempt)).id();
            if (r.lost) {
                jobs.end_as_fault(id, *r.lost);
            }
            spool.save(attempts.at(id));
        }
        refresh_active();
    }

    ContainerSpec container_spec(const Attempt& t) const {
        ContainerContext ctx{worker_label, opt.cache_dir, runtime.capabilities(), owner.jobs_view(gpu.gpus())};
        if (models) {
            ctx.model_cache = models->root();
            ctx.models_ready =
                std::all_of(t.a.spec.cache_models.begin(), t.a.spec.cache_models.end(), [&](const auto& m) {
                    auto ref = parse_model_ref(m);
                    return ref && models->has(*ref);
                });
        }
        ctx.mps_pipe = mps ? std::optional(mps_dirs(opt.work_dir).pipe) : std::nullopt;
        ctx.mps_compute = opt.mps_compute;
        return container_spec_for(t, ctx);
    }

    // What the run report of `t`, started as `spec`, says besides the attempt (job_container.hpp).
    RunFacts run_facts(const Attempt& t, const ContainerSpec& spec) const {
        RunFacts f{runtime.name(), gpu.gpus(), gpu.driver(), gpu.enforcement(), mps != nullptr, {}, GPUPOOL_VERSION};
        // The commits are the job's only when it reads the cache (HF_HOME there, offline): every model complete.
        std::map<std::string, std::string> commits;
        for (const auto& m : t.a.spec.cache_models) {
            auto ref = parse_model_ref(m);
            auto commit = ref && models ? models->commit_of(*ref) : std::nullopt;
            if (!commit) {
                return f;
            }
            commits[m] = *commit;
        }
        const auto home = spec.env.find("HF_HOME");
        const auto cache = spec.env.find("GPUPOOL_MODEL_CACHE");
        if (home != spec.env.end() && cache != spec.env.end() && home->second == cache->second) {
            f.model_commits = std::move(commits); // the worker set both (container_spec_for), after the job's env
        }
        return f;
    }

    void start_waiting() {
        for (auto& r : waiting.ready(now_ms(), attempts, prefetch.get())) {
            if (r.image_unavailable) {
                jobs.end_unstarted(spool.create(std::move(r.a), now_ms()), *r.image_unavailable);
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
        if (attempts.knows(a.attempt)) {
            return; // re-sent until our start reaches the coordinator, or already done with here
        }
        if (a.gpu_index >= 0 && gpu.reclaimed(a.gpu_index)) {
            // Placed before the coordinator heard: its owner uses that GPU.
            attempts.hand_back(a.attempt, "GPU " + std::to_string(a.gpu_index) +
                                              " reclaimed by its owner: handed back to the queue");
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
        if (!waited && !gpu_share_free(a, attempts)) {
            waiting.wait_for_gpu(std::move(a), now_ms());
            delivery.heartbeat_now(); // learn now which of ours must stop
            refresh_active();
            return;
        }
        Status spooled;
        Attempt t = spool.create(std::move(a), now_ms(), &spooled);
        if (!note.empty()) {
            Spool::append_note(t, "gpupool-worker: " + note + "\n");
        }
        const ContainerSpec spec = container_spec(t);
        // Not started when the spool cannot hold it: it ends as a worker fault (queued again
        // elsewhere, uncharged), not as a run the worker could neither deliver nor find again.
        const Status ready =
            spooled
                ? prepare_attempt_dirs(t, opt.work_dir, opt.cache_dir, runtime.capabilities().isolates, *link)
                : Status(make_error(ErrorCode::io, "the worker's spool cannot hold it: " + spooled.error().message));
        const AttemptId id = t.id();
        api::RunReport report = run_report_for(t, spec, run_facts(t, spec));
        jobs.start(std::move(t), spec, ready, std::move(report));
        // On record before its start is reported: a restart finds its container by name, not by luck.
        spool.save(attempts.at(id));
        attempts.at(id).unsaved = false;
        refresh_active();
    }

    // ---- GPUs ----
    // The memory watchdog and the idle guard (GpuWatch::judge); the models jobs use stay in the cache.
    void watch_gpus() {
        std::set<std::string> pinned;
        attempts.models(pinned);
        waiting.models(pinned);
        if (prefetch) {
            prefetch->set_pinned(std::move(pinned));
        }
        const GpuJudgement j = gpu.judge(watched_gpu_jobs(attempts));
        for (const auto& [attempt, line] : j.notes) {
            Spool::append_note(attempts.at(AttemptId(attempt)), "gpupool-worker: " + line + "\n");
        }
        for (const auto& [attempt, why] : j.stop) {
            jobs.stop(AttemptId(attempt), why, Outcome::exited, opt.stop_grace);
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
            for (const auto& [id, t] : attempts) {
                if (t.a.gpu_index == u.index) {
                    jobs.stop(id, "GPU " + std::to_string(u.index) + " failed on the worker: " + u.reason,
                              Outcome::worker_fault, opt.stop_grace);
                }
            }
        }
        delivery.heartbeat_now(); // tell the coordinator at once
    }

    // JobControl asks when a GPU job failed: whether its GPU failed under it (asked now).
    std::optional<std::string> gpu_failed(std::int64_t index) {
        check_gpu_health(true);
        return gpu.failure(index);
    }

    // The owner's own use of a GPU (reclaim.hpp): no new work there; its jobs get reclaim_grace, then
    // go back to the queue unpaid.
    void check_reclaim() {
        const ReclaimStep step = gpu.reclaim(gpu_job_marks(attempts, runtime));
        for (const auto& c : step.changes) {
            event(describe(c, gpu.reclaim_policy()));
        }
        for (auto id : step.term) {
            const auto gpu_index = attempts.at(AttemptId(id)).a.gpu_index;
            jobs.stop(AttemptId(id), "GPU " + std::to_string(gpu_index) + " reclaimed by its owner",
                      Outcome::owner_preempted, opt.reclaim_grace);
        }
        for (auto id : step.kill) {
            attempts.kill_now(AttemptId(id), now_ms()); // watch() kills it now
        }
        if (!step.changes.empty()) {
            // The worker as a whole is `reclaimed` once every GPU it offers is; until then the others share.
            const auto offered = owner.offered_gpus(gpu.gpus());
            owner.set_reclaimed(!offered.empty() &&
                                    std::all_of(offered.begin(), offered.end(),
                                                [&](const GpuInfo& g) { return gpu.reclaimed(g.index); }),
                                active.load());
            delivery.heartbeat_now(); // tell the coordinator at once
        }
    }

    // ---- delivering ----
    Delivery::Facts heartbeat_facts() const {
        Delivery::Facts f;
        f.waiting = waiting.ids();
        f.unhealthy_gpus = gpu.unhealthy_indexes();
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
        const auto done = delivery.deliver(attempts, [this] { return heartbeat_facts(); });
        take_fatal();
        for (auto id : done) {
            jobs.drop(id, attempts.at(id).fenced ? "dropped (no longer current)" : "delivered");
        }
        refresh_active();
    }

    // ---- the owner's terms (worker/owner) ----
    void hand_back_running(const std::string& why) { jobs.stop_all(why, Outcome::owner_preempted, opt.stop_grace); }

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
        return {worker_id,
                opt.coordinator_url,
                contact ? std::optional(wall.now_ms() - (now_ms() - *contact)) : std::nullopt,
                draining.load(),
                gpu.gpus(),
                attempts.running_jobs(now_ms()),
                inv.cpu_milli,
                inv.memory_mib,
                static_cast<int>(inv.slots),
                to_string(gpu.enforcement())};
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
        if (opt.mps) { // the worker's own MPS control daemon for the GPUs it shares (mps_daemon.hpp)
            auto started = gpu.start_mps(owner.offered_gpus(gpu.gpus()), runtime.capabilities().shares_host_ipc,
                                         runtime.name(), opt.work_dir);
            if (!started) {
                return started.error();
            }
            mps = std::move(*started);
        }
        return {};
    }

    void take_inbox() {
        for (auto& a : sig.take_inbox(opt.tick, [this] { return desk.pending(); })) {
            if (draining) {
                attempts.hand_back(a.attempt); // never started here: give it straight back
            } else if (auto no = owner.refusal(a, gpu.gpus())) {
                spdlog::info("attempt {}: handed back unstarted: {}", a.attempt.value(), *no);
                attempts.hand_back(a.attempt, *no + ": handed back to the queue");
            } else {
                take(std::move(a));
            }
        }
        if ((draining || !owner.taking_work()) && !waiting.empty()) {
            for (AttemptId id : waiting.take_all(prefetch.get())) {
                attempts.hand_back(id, draining ? HandBack().why : "the owner stopped sharing");
            }
            refresh_active();
        }
    }

    // One step of a drain (drain.hpp); true when run() may return.
    bool drain_step() {
        const auto s = drain.step(now_ms(), hurry, active.load(), attempts.empty() && attempts.hand_backs().empty());
        if (s.hurried) {
            spdlog::warn("stopping {} running job(s) now and handing them back", active.load());
        }
        if (s.started) {
            delivery.heartbeat_now(); // tell the coordinator at once: no new work here
            spdlog::info("draining: no new work; {} running job(s) have {} s to finish", active.load(),
                         opt.drain_grace.count() / 1000);
        }
        if (s.stop_running) {
            hand_back_running("the worker is shutting down: handed back to the queue");
        }
        if (s.gave_up) {
            spdlog::warn("drain: the coordinator did not take {} result(s); they stay spooled in {}", attempts.size(),
                         spool.dir().string());
        }
        return s.done;
    }

    // TEST ONLY (forge.hpp): with GPUPOOL_TEST_FORGE set, one draw per job that exited 0 decides
    // whether its outputs are overwritten before they are packed.
    void forge_if_drawn(Attempt& t) {
        if (test_forge && test_forge->draw()) {
            const int n = forge_outputs(t.dir / "outputs");
            spdlog::warn("attempt {} (job {}): FORGED {} output file(s) ({})", t.id().value(), t.a.job.value(), n,
                         k_test_forge_env);
        }
    }

    Status run() {
        auto forge = test_forge_from_env();
        if (!forge) {
            return forge.error();
        }
        test_forge = std::move(*forge);
        if (test_forge) {
            spdlog::warn("{} is set: this worker FORGES {} of its results: a test of spot checks, never for a real "
                         "pool",
                         k_test_forge_env, test_forge->rate_text());
        }
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
        std::thread poller([this] { // the poll thread (poll_thread.hpp), on a link of its own
            auto plink = links(worker_token);
            poll_for_assignments(*plink, sig, opt, clock);
        });
        while (!stopping) {
            owner_step();
            take_inbox();
            start_waiting();
            delivery.hand_back(attempts);
            take_fatal();
            jobs.watch();
            refresh_active();
            check_reclaim();
            watch_gpus();
            check_gpu_health();
            deliver();
            spool.save_unsaved(attempts);
            if (draining && drain_step()) {
                break;
            }
        }
        spool.save_unsaved(attempts);
        stopping = true;
        sig.cv.notify_all();
        if (!fatal) {                        // refused (banned, a pool that forgot us, a wrong CA): nothing to tell it
            leave_pool(*link, k_leave_wait); // before the join: the coordinator answers the parked poll at once
        }
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

Status Agent::run() {
    return m_impl->run();
}

void Agent::drain() {
    m_impl->draining = true;
    { util::MutexLock lock(m_impl->sig.mu); } // a waiter between its check and its wait must not miss this
    m_impl->sig.cv.notify_all();
}

void Agent::drain_now() {
    m_impl->hurry = true;
    drain();
}

void Agent::reload() {
    m_impl->desk.post(json{{"op", "reload"}}, false);
}

void Agent::stop() {
    m_impl->stopping = true;
    m_impl->sig.cv.notify_all();
}

} // namespace gpupool::worker
