#include "worker/agent/agent.hpp"

#include "core/resources/quantity.hpp"
#include "core/util/files.hpp"
#include "worker/agent/archive.hpp"
#include "worker/gpu/memory_watchdog.hpp"

#include <spdlog/spdlog.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <csignal>
#include <cstring>
#include <ctime>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

namespace gpupool::worker {

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// ---- Backoff ------------------------------------------------------------------------------------

Backoff::Backoff(milliseconds initial, milliseconds max, std::uint64_t seed)
    : m_initial(initial), m_max(max), m_state(seed ? seed : 0x9e3779b97f4a7c15ULL) {}

milliseconds Backoff::next_delay() {
    ++m_failures;
    std::int64_t ceiling = m_initial.count();
    for (int i = 1; i < m_failures && ceiling < m_max.count(); ++i) {
        ceiling *= 2;
    }
    ceiling = std::min<std::int64_t>(ceiling, m_max.count());
    // xorshift64*: good enough for jitter, deterministic under a seed.
    m_state ^= m_state >> 12;
    m_state ^= m_state << 25;
    m_state ^= m_state >> 27;
    const std::uint64_t r = m_state * 0x2545F4914F6CDD1DULL;
    const std::int64_t half = ceiling / 2;
    const std::int64_t span = ceiling - half + 1;
    return milliseconds(half + static_cast<std::int64_t>(r % static_cast<std::uint64_t>(std::max<std::int64_t>(span, 1))));
}

void Backoff::reset() { m_failures = 0; }

// ---- helpers ------------------------------------------------------------------------------------

namespace {

constexpr std::size_t k_max_chunk = std::size_t{1} << 20; // bytes per log POST
constexpr std::int64_t k_eager_chunk = 64 * 1024;         // ship at once when this much is pending
constexpr std::chrono::milliseconds k_hurried_give_up{5'000}; // drain_now(): undelivered results stay spooled

// 0600 from the first byte (worker.json holds the worker's token), under an unpredictable temporary name.
Status write_json_atomic(const fs::path& path, const json& j) { return util::write_private_file(path, j.dump(2) + "\n"); }

Result<json> read_json(const fs::path& path) {
    std::ifstream in(path);
    if (!in) {
        return make_error(ErrorCode::not_found, "cannot read " + path.string());
    }
    try {
        return Result<json>(boost::system::in_place_value, json::parse(in));
    } catch (const json::exception& e) {
        return make_error(ErrorCode::invalid_input, path.string() + ": " + e.what());
    }
}

std::int64_t file_size_or_zero(const fs::path& p) {
    std::error_code ec;
    const auto n = fs::file_size(p, ec);
    return ec ? 0 : static_cast<std::int64_t>(n);
}

std::string read_range(const fs::path& p, std::int64_t offset, std::size_t max) {
    std::ifstream in(p, std::ios::binary);
    if (!in) {
        return {};
    }
    in.seekg(offset);
    std::string buf(max, '\0');
    in.read(buf.data(), static_cast<std::streamsize>(max));
    buf.resize(static_cast<std::size_t>(std::max<std::streamsize>(in.gcount(), 0)));
    return buf;
}

std::string host_name() {
    char buf[256] = {};
    if (gethostname(buf, sizeof buf - 1) != 0) {
        return "worker";
    }
    return buf;
}

std::int64_t total_memory_mib() {
    const long pages = sysconf(_SC_PHYS_PAGES);
    const long page = sysconf(_SC_PAGE_SIZE);
    if (pages <= 0 || page <= 0) {
        return 0;
    }
    return static_cast<std::int64_t>(pages) * page / (1024 * 1024);
}

std::string fraction_text(std::int64_t milli) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%lld.%03lld", static_cast<long long>(milli / 1000),
                  static_cast<long long>(milli % 1000));
    return buf;
}

std::string upper_env_name(const std::string& s) {
    std::string out;
    for (char c : s) {
        const auto u = static_cast<unsigned char>(c);
        out += std::isalnum(u) ? static_cast<char>(std::toupper(u)) : '_';
    }
    return out;
}

} // namespace

// ---- the agent ----------------------------------------------------------------------------------

struct Agent::Impl {
    enum class Phase { running, ended };

    struct Tracked {
        AssignmentMsg a;
        fs::path dir;
        std::string container;
        Phase phase = Phase::running;
        bool start_reported = false;
        std::int64_t shipped = 0;          // log bytes the coordinator has confirmed
        Clock::time_point started;          // local start (for max_runtime)
        Clock::time_point last_ship;
        std::optional<Clock::time_point> kill_at; // SIGKILL after a SIGTERM
        bool killed = false;
        std::string stop_reason;            // why we stopped it (empty: it ended by itself)
        Outcome stop_outcome = Outcome::exited;
        // Once ended:
        std::optional<int> exit_code;
        std::string reason;
        Outcome outcome = Outcome::exited;
        bool outputs_done = false;          // packed and uploaded (or nothing to upload)
        std::string outputs_error;
        bool fenced = false;                // 409: drop without delivering
        std::int64_t gpu_limit_mib = 0;     // a fractional GPU job's memory share (0: not watched)
        std::optional<Clock::time_point> poll_failing_since; // the engine cannot tell how the job is
    };

    AgentOptions opt;
    ContainerRuntime& runtime;
    GpuProbe& gpus_probe;
    Agent& self;
    std::vector<GpuInfo> gpus;
    MemoryEnforcement enforcement = MemoryEnforcement::none;
    Clock::time_point next_gpu_watch{};
    Clock::time_point next_gpu_health{};
    std::vector<UnhealthyGpu> unhealthy; // from the last health check; sent in every heartbeat

    WorkerApi api;      // agent thread
    std::string worker_token;
    std::int64_t worker_id = 0;
    // Unique on this machine: names and labels this worker's containers, so two pools' workers
    // (or a worker and `gpupool run`), each counting worker and attempt ids from 1, never take
    // each other's containers. "w<worker id>-<instance>", the instance random and kept in worker.json.
    std::string worker_label;

    std::map<std::int64_t, Tracked> tracked;
    std::vector<std::int64_t> handback; // unstarted assignments to give back (drain)
    std::set<std::int64_t> finished;    // attempts delivered or dropped: never taken again
    Backoff backoff;
    Clock::time_point offline_until{};
    Clock::time_point next_heartbeat{};
    struct Deferred {
        AssignmentMsg a;
        Clock::time_point since;
    };
    std::vector<Deferred> deferred; // assignments waiting for their GPU share (see start_deferred)
    bool inventory_sent = false; // the inventory went with a heartbeat since this start
    std::int64_t lease_ms = 30'000;

    // Shared with the poll thread.
    std::mutex mu;
    std::condition_variable cv;
    std::vector<AssignmentMsg> inbox;
    std::atomic<bool> draining{false};
    bool paused = false; // by the owner (<work_dir>/paused), as last told to the coordinator
    std::atomic<bool> hurry{false}; // drain_now(): stop the running jobs without waiting
    std::atomic<bool> stopping{false};
    std::atomic<int> active{0};
    std::optional<Clock::time_point> drain_deadline;
    std::optional<Clock::time_point> give_up_at;
    std::optional<Error> fatal; // why run() must end with an error

    Impl(AgentOptions o, ContainerRuntime& rt, GpuProbe& probe, Agent& owner)
        : opt(std::move(o)), runtime(rt), gpus_probe(probe), self(owner), api(opt.coordinator_url, opt.token, opt.ca_cert),
          backoff(opt.backoff_initial, opt.backoff_max,
                  static_cast<std::uint64_t>(Clock::now().time_since_epoch().count()) ^ static_cast<std::uint64_t>(getpid())) {}

    std::string identity() const { return opt.identity_key.empty() ? opt.coordinator_url : opt.identity_key; }

    fs::path attempts_dir() const { return opt.work_dir / "attempts"; }

    // ---- identity ----
    static std::string new_instance_id() {
        std::random_device rd;
        const std::uint64_t bits = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
        char hex[17];
        std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(bits));
        return hex;
    }

    static bool is_instance_id(const std::string& s) {
        return s.size() == 16 && std::all_of(s.begin(), s.end(), [](char c) {
                   return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
               });
    }

    Status establish_identity() {
        const fs::path idf = opt.work_dir / "worker.json";
        std::string instance;
        if (auto stored = read_stored_identity(opt.work_dir); stored && stored->coordinator == identity()) {
            worker_id = stored->worker_id;
            worker_token = stored->token;
            instance = stored->instance;
        }
        bool rewrite = false;
        if (!is_instance_id(instance)) {
            // A new worker, or a worker.json from before instances existed (its containers, named
            // the old way, are not recognised: attempts running across that upgrade are reported lost).
            instance = new_instance_id();
            rewrite = true;
        }
        if (worker_id == 0 || worker_token.empty()) {
            json inv = inventory();
            for (;;) {
                auto reg = api.register_worker(opt.name, inv);
                if (reg) {
                    worker_id = reg->worker_id;
                    worker_token = reg->token;
                    break;
                }
                if (reg.error().code != ErrorCode::unavailable || stopping || draining) {
                    return make_error(reg.error().code, "cannot register with " + opt.coordinator_url + ": " +
                                                            reg.error().message);
                }
                const auto d = backoff.next_delay();
                spdlog::warn("coordinator unreachable ({}); retrying registration in {} ms", reg.error().message, d.count());
                sleep_for(d);
            }
            backoff.reset();
            rewrite = true;
            spdlog::info("registered with {} as worker {}", opt.coordinator_url, worker_id);
        }
        if (rewrite) {
            if (auto st = write_json_atomic(idf, {{"coordinator", identity()},
                                                  {"worker_id", worker_id},
                                                  {"token", worker_token},
                                                  {"instance", instance}});
                !st) {
                return st;
            }
        }
        api.set_token(worker_token);
        worker_label = "w" + std::to_string(worker_id) + "-" + instance;
        self.m_worker_id = worker_id;
        return {};
    }

    json inventory() const {
        json g = json::array();
        for (const auto& gpu : gpus) {
            g.push_back({{"index", gpu.index},
                         {"model", gpu.model},
                         {"memory_mib", gpu.memory_mib},
                         {"uuid", gpu.uuid},
                         {"memory_enforcement", to_string(enforcement)}});
        }
        const auto cores = static_cast<std::int64_t>(std::max(1u, std::thread::hardware_concurrency()));
        return {{"cpu_milli", opt.cpu_milli > 0 ? opt.cpu_milli : cores * 1000},
                {"memory_mib", opt.memory_mib > 0 ? opt.memory_mib : total_memory_mib()},
                {"gpus", g},
                {"slots", std::max(0, opt.slots)},
                {"runtime", runtime.name()}};
    }

    // Backoff waits end early on stop and on drain (a SIGTERM must not wait out a retry delay).
    void sleep_for(milliseconds d) {
        std::unique_lock lock(mu);
        cv.wait_for(lock, d, [&] { return stopping.load() || draining.load(); });
    }

    // ---- spool ----
    json state_json(const Tracked& t) const {
        json j{{"container", t.container},
               {"phase", t.phase == Phase::running ? "running" : "ended"},
               {"start_reported", t.start_reported},
               {"shipped", t.shipped},
               {"outputs_done", t.outputs_done},
               {"reason", t.reason},
               {"outcome", to_string(t.outcome)},
               {"stop_reason", t.stop_reason},
               {"stop_outcome", to_string(t.stop_outcome)},
               {"outputs_error", t.outputs_error}};
        if (t.exit_code) {
            j["exit_code"] = *t.exit_code;
        }
        return j;
    }

    void save(const Tracked& t) {
        if (auto st = write_json_atomic(t.dir / "state.json", state_json(t)); !st) {
            spdlog::error("spool: {}", st.error().message);
        }
    }

    static Outcome outcome_from(const std::string& s) {
        if (s == "worker_fault") {
            return Outcome::worker_fault;
        }
        if (s == "owner_preempted") {
            return Outcome::owner_preempted;
        }
        return Outcome::exited;
    }

    void drop(std::int64_t id, const std::string& why) {
        auto it = tracked.find(id);
        if (it == tracked.end()) {
            return;
        }
        if (!it->second.container.empty()) {
            if (auto st = runtime.remove(it->second.container); !st) {
                spdlog::warn("attempt {}: removing {}: {}", id, it->second.container, st.error().message);
            }
        }
        std::error_code ec;
        fs::remove_all(it->second.dir, ec);
        finished.insert(id);
        spdlog::info("attempt {}: {}", id, why);
        tracked.erase(it);
        refresh_active();
    }

    // Restores attempts a previous run left behind.
    void recover() {
        std::error_code ec;
        fs::create_directories(attempts_dir(), ec);
        std::map<std::string, FoundContainer> found;
        if (auto list = runtime.list(worker_label)) {
            for (auto& c : *list) {
                // Only containers whose labels are exactly this worker's (never another pool's).
                auto label = c.labels.find("gpupool.worker");
                if (label != c.labels.end() && label->second == worker_label) {
                    found[c.name] = c;
                }
            }
        } else {
            spdlog::warn("cannot list {} containers: {}", runtime.name(), list.error().message);
        }
        for (const auto& entry : fs::directory_iterator(attempts_dir(), ec)) {
            auto a = read_json(entry.path() / "assignment.json");
            auto s = read_json(entry.path() / "state.json");
            if (!a || !s) {
                fs::remove_all(entry.path(), ec);
                continue;
            }
            auto msg = parse_assignment(*a);
            if (!msg) {
                fs::remove_all(entry.path(), ec);
                continue;
            }
            Tracked t;
            t.a = *msg;
            t.dir = entry.path();
            t.container = s->value("container", "");
            t.start_reported = s->value("start_reported", false);
            t.shipped = s->value("shipped", std::int64_t{0});
            t.outputs_done = s->value("outputs_done", false);
            t.reason = s->value("reason", "");
            t.outcome = outcome_from(s->value("outcome", "exited"));
            t.stop_reason = s->value("stop_reason", "");
            t.stop_outcome = outcome_from(s->value("stop_outcome", "exited"));
            t.outputs_error = s->value("outputs_error", "");
            if (s->contains("exit_code") && (*s)["exit_code"].is_number_integer()) {
                t.exit_code = (*s)["exit_code"].get<int>();
            }
            t.gpu_limit_mib = gpu_limit(container_spec(t));
            t.started = Clock::now(); // max_runtime restarts from here: conservative for the job
            t.last_ship = Clock::now();
            if (s->value("phase", "running") == "ended") {
                t.phase = Phase::ended;
            } else if (auto f = found.find(t.container);
                       f != found.end() && f->second.labels["gpupool.attempt"] == std::to_string(t.a.attempt)) {
                if (auto st = runtime.reattach(t.container, t.dir / "log"); st) {
                    spdlog::info("attempt {}: re-attached to {}", t.a.attempt, t.container);
                    t.phase = Phase::running;
                } else {
                    end_as_fault(t, "the worker restarted and could not re-attach: " + st.error().message);
                }
            } else {
                end_as_fault(t, "the worker restarted and the job's " + runtime.name() +
                                    " container was gone (it cannot be re-attached)");
            }
            found.erase(t.container);
            const auto id = t.a.attempt;
            save(t);
            tracked.emplace(id, std::move(t));
        }
        for (const auto& [name, c] : found) {
            spdlog::warn("removing container {} left by an earlier run (no spool for it)", name);
            (void)runtime.remove(name);
        }
        refresh_active();
    }

    // ---- what the owner sees ----
    void event(const std::string& line) const {
        if (opt.on_event) {
            opt.on_event(line);
        }
    }

    static std::string job_label(const AssignmentMsg& a) {
        return "job " + std::to_string(a.job) + " `" + a.spec.name + "` (team " +
               (a.team_name.empty() ? std::to_string(a.team) : a.team_name) + ")";
    }

    static std::string share_of(const AssignmentMsg& a) {
        std::string gpu = "no GPU";
        if (a.gpu_index >= 0) {
            gpu = (a.gpu_milli >= 1000 ? std::string("GPU ") : resources::format_milli(a.gpu_milli) + " of GPU ") +
                  std::to_string(a.gpu_index);
        }
        return gpu + ", " + resources::format_milli(a.spec.resources.cpu_milli) + " CPU, " +
               resources::format_memory_mib(a.spec.resources.memory_mib) + " memory";
    }

    void event_ended(const Tracked& t) const {
        const auto ran = std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - t.started).count();
        event(job_label(t.a) + " ended after " + resources::format_duration_s(std::max<std::int64_t>(ran, 0)) + ": " +
              (t.outcome == Outcome::worker_fault ? "worker fault: " : "") + t.reason);
    }

    void event_offer() const {
        const json inv = inventory();
        std::string line = "sharing with " + opt.coordinator_url + " as worker " + std::to_string(worker_id) + ": " +
                           resources::format_milli(inv["cpu_milli"].get<std::int64_t>()) + " CPUs, " +
                           resources::format_memory_mib(inv["memory_mib"].get<std::int64_t>()) + " memory, ";
        if (gpus.empty()) {
            line += "no NVIDIA driver found: CPU-only jobs";
        }
        for (std::size_t i = 0; i < gpus.size(); ++i) {
            line += (i == 0 ? "" : "; ") + std::string("GPU ") + std::to_string(gpus[i].index) + " " + gpus[i].name +
                    " (" + resources::format_memory_mib(gpus[i].memory_mib) + ")";
        }
        event(line + "; jobs run with " + runtime.name());
    }

    void end_as_fault(Tracked& t, const std::string& why) {
        t.phase = Phase::ended;
        t.exit_code.reset();
        t.reason = why;
        t.outcome = Outcome::worker_fault;
        t.outputs_done = true; // nothing to trust in a half-run's outputs
        spdlog::warn("attempt {}: {}", t.a.attempt, why);
        event_ended(t);
    }

    void refresh_active() {
        active = static_cast<int>(std::count_if(tracked.begin(), tracked.end(),
                                                [](const auto& kv) { return kv.second.phase == Phase::running; }) +
                                  deferred.size());
    }

    // ---- waiting for a GPU share ----
    // The coordinator hands a preempted job's share to the preemptor at once, but the victim here
    // learns it must stop only from the next heartbeat and then has its grace period: starting the
    // preemptor meanwhile would put two jobs' memory on one GPU. So an assignment starts only when
    // the jobs still running on its GPU leave room for its share; until then it waits (its lease
    // renewed by the heartbeats, which are sent at once to learn what must stop), for at most
    // gpu_wait_max.
    bool gpu_share_free(const AssignmentMsg& a) const {
        if (a.gpu_index < 0 || a.gpu_milli <= 0) {
            return true;
        }
        std::int64_t used = 0;
        for (const auto& [id, t] : tracked) {
            if (t.phase == Phase::running && t.a.gpu_index == a.gpu_index) {
                used += t.a.gpu_milli;
            }
        }
        return used + a.gpu_milli <= resources::k_milli_per_gpu;
    }

    void start_deferred() {
        const auto now = Clock::now();
        for (auto it = deferred.begin(); it != deferred.end();) {
            const bool free = gpu_share_free(it->a);
            if (!free && now - it->since < opt.gpu_wait_max) {
                ++it;
                continue;
            }
            if (!free) {
                spdlog::warn("attempt {}: GPU {} still looks full after {} s; starting it anyway", it->a.attempt,
                             it->a.gpu_index, opt.gpu_wait_max.count() / 1000);
            }
            AssignmentMsg a = std::move(it->a);
            it = deferred.erase(it);
            take(std::move(a), true);
            refresh_active();
        }
    }

    // ---- starting ----
    ContainerSpec container_spec(const Tracked& t) const {
        const bool process = runtime.name() == "process";
        const auto& spec = t.a.spec;
        ContainerSpec c;
        c.name = "gpupool-" + worker_label + "-a" + std::to_string(t.a.attempt);
        c.image = spec.image;
        c.argv = spec.argv();
        c.log_path = t.dir / "log";
        c.workdir = t.dir / "work";
        c.cpu_milli = spec.resources.cpu_milli;
        c.memory_mib = spec.resources.memory_mib;
        c.labels = {{"gpupool.worker", worker_label},
                    {"gpupool.job", std::to_string(t.a.job)},
                    {"gpupool.attempt", std::to_string(t.a.attempt)}};
        const fs::path work = process ? t.dir / "work" : fs::path("/work");
        const fs::path outputs = process ? t.dir / "outputs" : fs::path("/outputs");
        const fs::path team_cache = team_cache_dir(t);
        const fs::path cache = process ? team_cache : fs::path("/cache");
        c.mounts = {{t.dir / "work", "/work", true}, {t.dir / "outputs", "/outputs", false}, {team_cache, "/cache", false}};
        for (const auto& [k, v] : spec.env) {
            c.env[k] = v;
        }
        c.env["GPUPOOL_JOB_ID"] = std::to_string(t.a.job);
        c.env["GPUPOOL_ATTEMPT"] = std::to_string(t.a.attempt_number);
        c.env["GPUPOOL_ATTEMPT_ID"] = std::to_string(t.a.attempt);
        c.env["GPUPOOL_JOB_NAME"] = spec.name;
        c.env["GPUPOOL_WORK_DIR"] = work.string();
        c.env["GPUPOOL_OUTPUT_DIR"] = outputs.string();
        c.env["GPUPOOL_CACHE_DIR"] = cache.string();
        c.env["HF_HOME"] = (cache / "huggingface").string();
        if (!process) {
            c.env["HOME"] = "/tmp";
        }
        for (const auto& [k, v] : spec.params) {
            c.env["GPUPOOL_PARAM_" + upper_env_name(k)] = v;
        }
        std::int64_t gpu_mem = 0;
        std::int64_t milli = 0;
        if (t.a.gpu_index >= 0) {
            c.gpu_index = t.a.gpu_index;
            milli = t.a.gpu_milli;
            const auto g = std::find_if(gpus.begin(), gpus.end(), [&](const GpuInfo& x) { return x.index == t.a.gpu_index; });
            const std::int64_t total = g != gpus.end() ? g->memory_mib : 0;
            gpu_mem = spec.resources.gpu_memory_mib > 0 ? spec.resources.gpu_memory_mib
                                                        : total * milli / resources::k_milli_per_gpu;
            if (milli == 0 && total > 0) {
                milli = resources::gpu_milli_for_memory(gpu_mem, total);
            }
            // Inside a container the one visible GPU is device 0; a bare process sees them all.
            c.env["CUDA_VISIBLE_DEVICES"] = process ? std::to_string(t.a.gpu_index) : "0";
            c.env["NVIDIA_VISIBLE_DEVICES"] = std::to_string(t.a.gpu_index);
            if (milli < 1000 && gpu_mem > 0) {
                // Honoured when the host runs the MPS control daemon (docs/architecture.md).
                c.env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] = "0=" + std::to_string(gpu_mem) + "M";
            }
        } else {
            c.env["CUDA_VISIBLE_DEVICES"] = "";
        }
        c.env["GPUPOOL_GPU_MEMORY_MB"] = std::to_string(gpu_mem);
        c.env["GPUPOOL_GPU_FRACTION"] = fraction_text(milli);
        if (process && !c.env.count("PATH")) {
            c.env["PATH"] = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
        }
        return c;
    }

    // Each team writes only its own cache: one team cannot plant files (model weights, code) that
    // another team's jobs then load.
    fs::path team_cache_dir(const Tracked& t) const { return opt.cache_dir / "teams" / std::to_string(t.a.team); }

    Status prepare_dirs(Tracked& t) {
        std::error_code ec;
        fs::create_directories(t.dir / "work", ec);
        fs::create_directories(t.dir / "outputs", ec);
        fs::create_directories(team_cache_dir(t) / "huggingface", ec);
        if (ec) {
            return make_error(ErrorCode::io, "cannot create " + t.dir.string() + ": " + ec.message());
        }
        const auto& in = t.a.spec.inputs;
        if (!in.archive.empty()) {
            // Shipped through the coordinator; kept per digest, so a sweep downloads it once.
            const fs::path cached = opt.work_dir / "inputs" / (in.archive + ".tar");
            std::string bytes;
            if (fs::exists(cached, ec)) {
                std::ifstream f(cached, std::ios::binary);
                bytes.assign(std::istreambuf_iterator<char>(f), {});
            } else {
                auto got = api.inputs(t.a.attempt);
                if (!got) {
                    return make_error(got.error().code == ErrorCode::invalid_input ? ErrorCode::io : got.error().code,
                                      "fetching the job's inputs: " + got.error().message);
                }
                bytes = std::move(*got);
                fs::create_directories(cached.parent_path(), ec);
                // 0600: another user of this machine has no business reading a team's inputs.
                if (auto st = util::write_private_file(cached, bytes); !st) {
                    spdlog::warn("cannot cache the inputs {}: {}", in.archive, st.error().message);
                }
            }
            auto unpacked = unpack_archive(bytes, t.dir / "work");
            if (!unpacked) {
                return make_error(ErrorCode::io, "unpacking the job's inputs: " + unpacked.error().message);
            }
            for (const auto& s : unpacked->skipped) {
                spdlog::warn("attempt {}: inputs: skipped {}", t.a.attempt, s);
            }
        }
        // Without an archive, inputs can only come from this machine's disk (shared file systems).
        for (std::size_t i = 0; in.archive.empty() && i < in.resolved.size(); ++i) {
            const fs::path src = in.resolved[i];
            if (!fs::exists(src, ec)) {
                return make_error(ErrorCode::invalid_input,
                                  "input `" + in.paths[i] + "` is not on this worker (" + src.string() +
                                      ") and the job carries no inputs archive",
                                  "inputs");
            }
            const fs::path dst = t.dir / "work" / src.filename();
            fs::copy(src, dst, fs::copy_options::recursive | fs::copy_options::overwrite_existing, ec);
            if (ec) {
                return make_error(ErrorCode::io, "copying input " + src.string() + ": " + ec.message());
            }
        }
        // Containers run as an unprivileged user: let it write its outputs.
        ::chmod((t.dir / "outputs").c_str(), 0777);
        ::chmod(team_cache_dir(t).c_str(), 0777);
        ::chmod((team_cache_dir(t) / "huggingface").c_str(), 0777);
        ::chmod((t.dir / "work").c_str(), 0755);
        return {};
    }

    void take(AssignmentMsg a, bool waited = false) {
        if (tracked.count(a.attempt) || finished.count(a.attempt)) {
            return; // re-sent until our start reaches the coordinator, or already done with here
        }
        if (!waited && !gpu_share_free(a)) {
            if (std::none_of(deferred.begin(), deferred.end(), [&](const Deferred& d) { return d.a.attempt == a.attempt; })) {
                spdlog::info("attempt {}: waiting for GPU {} to be freed by the jobs still stopping on it", a.attempt,
                             a.gpu_index);
                deferred.push_back({std::move(a), Clock::now()});
                next_heartbeat = Clock::now(); // learn now which of ours must stop
                refresh_active();
            }
            return;
        }
        Tracked t;
        t.a = std::move(a);
        t.dir = attempts_dir() / std::to_string(t.a.attempt);
        t.started = Clock::now();
        t.last_ship = Clock::now();
        std::error_code ec;
        fs::create_directories(t.dir, ec);
        if (auto st = write_json_atomic(t.dir / "assignment.json", t.a.raw); !st) {
            spdlog::error("attempt {}: {}", t.a.attempt, st.error().message);
        }
        const ContainerSpec spec = container_spec(t);
        t.container = spec.name;
        t.gpu_limit_mib = gpu_limit(spec);
        auto ready = prepare_dirs(t);
        Status started = ready ? runtime.start(spec) : Status(ready.error());
        if (!started) {
            const auto& e = started.error();
            t.container.clear();
            if (e.code == ErrorCode::invalid_input) {
                // The job's own problem (its inputs): it fails like a job, with the reason.
                t.phase = Phase::ended;
                t.exit_code = 1;
                t.reason = e.message;
                t.outcome = Outcome::exited;
                t.outputs_done = true;
                event_ended(t);
            } else {
                end_as_fault(t, "could not start on " + runtime.name() + ": " + e.message);
            }
            append_note(t, "gpupool-worker: " + t.reason + "\n");
        } else {
            spdlog::info("attempt {} (job {} `{}`): started as {}", t.a.attempt, t.a.job, t.a.spec.name, t.container);
            event(job_label(t.a) + " started: " + share_of(t.a));
        }
        save(t);
        const auto id = t.a.attempt;
        tracked.emplace(id, std::move(t));
        refresh_active();
    }

    // A line of our own in the job's log (start failures, outputs over the cap).
    static void append_note(const Tracked& t, const std::string& text) {
        std::ofstream out(t.dir / "log", std::ios::app | std::ios::binary);
        out << text;
    }

    static std::int64_t gpu_limit(const ContainerSpec& c) {
        if (!c.gpu_index || c.env.at("GPUPOOL_GPU_FRACTION") == "1.000") {
            return 0;
        }
        try {
            return std::stoll(c.env.at("GPUPOOL_GPU_MEMORY_MB"));
        } catch (const std::exception&) {
            return 0;
        }
    }

    // The attempt a process says it belongs to (its environment), if it says.
    static std::optional<std::int64_t> attempt_of_pid(std::int64_t pid) {
        std::ifstream in("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
        std::string var;
        const std::string key = "GPUPOOL_ATTEMPT_ID=";
        while (std::getline(in, var, '\0')) {
            if (var.rfind(key, 0) == 0) {
                try {
                    return std::stoll(var.substr(key.size()));
                } catch (const std::exception&) {
                    return std::nullopt;
                }
            }
        }
        return std::nullopt;
    }

    // Where the driver cannot cap a fractional job's GPU memory (no MPS), stop a job over its share.
    void watch_gpu_memory() {
        const auto now = Clock::now();
        if (enforcement != MemoryEnforcement::watchdog || now < next_gpu_watch) {
            return;
        }
        next_gpu_watch = now + opt.gpu_watch;
        std::vector<WatchedAttempt> watched;
        for (const auto& [id, t] : tracked) {
            if (t.phase == Phase::running && t.gpu_limit_mib > 0 && t.stop_reason.empty()) {
                watched.push_back({id, t.a.gpu_index, t.gpu_limit_mib});
            }
        }
        if (watched.empty()) {
            return;
        }
        auto procs = gpus_probe.processes();
        if (!procs) {
            spdlog::warn("GPU memory watchdog: {}", procs.error().message);
            return;
        }
        std::vector<GpuUse> uses;
        for (const auto& p : *procs) {
            const auto g = std::find_if(gpus.begin(), gpus.end(), [&](const GpuInfo& x) { return x.uuid == p.gpu_uuid; });
            if (g != gpus.end()) {
                uses.push_back({p.pid, g->index, p.used_mib, attempt_of_pid(p.pid)});
            }
        }
        const auto verdict = check_gpu_memory(watched, uses);
        for (const auto& u : verdict.unattributed) {
            spdlog::warn("GPU {}: process {} holds {} MiB and names no attempt of this worker", u.gpu_index, u.pid,
                         u.used_mib);
        }
        for (const auto& o : verdict.over) {
            auto& t = tracked.at(o.attempt);
            request_stop(t,
                         "exceeded its GPU memory share: " + std::to_string(o.used_mib) + " MiB in use, limit " +
                             std::to_string(o.limit_mib) + " MiB",
                         Outcome::exited, opt.stop_grace);
        }
    }

    // A GPU that fails (gone from the driver, uncorrectable ECC errors, a driver that stopped
    // answering) takes no new work, and the jobs on it go back to the queue as a worker fault: the
    // researcher does not pay for the hardware's failure.
    void check_gpu_health() {
        const auto now = Clock::now();
        if (gpus.empty() || now < next_gpu_health) {
            return;
        }
        next_gpu_health = now + opt.gpu_health;
        auto verdict = assess_gpu_health(gpus, gpus_probe.status());
        if (verdict == unhealthy) {
            return;
        }
        for (const auto& u : verdict) {
            const bool was = std::any_of(unhealthy.begin(), unhealthy.end(), [&](const auto& o) { return o.index == u.index; });
            if (!was) {
                spdlog::warn("GPU {} is unhealthy: {}; it takes no new work and its jobs go back to the queue", u.index,
                             u.reason);
            }
            for (auto& [id, t] : tracked) {
                if (t.a.gpu_index == u.index) {
                    request_stop(t, "GPU " + std::to_string(u.index) + " failed on the worker: " + u.reason,
                                 Outcome::worker_fault, opt.stop_grace);
                }
            }
        }
        for (const auto& o : unhealthy) {
            if (std::none_of(verdict.begin(), verdict.end(), [&](const auto& u) { return u.index == o.index; })) {
                spdlog::info("GPU {} is healthy again", o.index);
            }
        }
        unhealthy = std::move(verdict);
        next_heartbeat = now; // tell the coordinator at once
    }

    // ---- watching ----
    void request_stop(Tracked& t, const std::string& why, Outcome outcome, milliseconds grace) {
        if (t.phase != Phase::running || !t.stop_reason.empty()) {
            return;
        }
        t.stop_reason = why;
        t.stop_outcome = outcome;
        t.kill_at = Clock::now() + grace;
        if (auto st = runtime.signal(t.container, SIGTERM); !st) {
            spdlog::warn("attempt {}: SIGTERM: {}", t.a.attempt, st.error().message);
        }
        spdlog::info("attempt {}: stopping ({})", t.a.attempt, why);
        save(t);
    }

    void watch() {
        const auto now = Clock::now();
        for (auto& [id, t] : tracked) {
            if (t.phase != Phase::running) {
                continue;
            }
            auto st = runtime.poll(t.container);
            if (!st && st.error().code == ErrorCode::not_found) {
                // Removed behind the worker's back (`podman rm -f`, an engine reset): a worker
                // fault for this attempt, reported once; the slot is free again.
                end_as_fault(t, "the job's " + runtime.name() + " container disappeared while it ran (" +
                                    st.error().message + ")");
                save(t);
                continue;
            }
            if (!st) {
                if (!t.poll_failing_since) {
                    t.poll_failing_since = now;
                    spdlog::warn("attempt {}: cannot tell how the job is: {}", id, st.error().message);
                } else if (now - *t.poll_failing_since > opt.engine_unanswered_max) {
                    end_as_fault(t, "the " + runtime.name() + " engine could not say how the job is for " +
                                        std::to_string(std::chrono::duration_cast<std::chrono::seconds>(
                                                           opt.engine_unanswered_max)
                                                           .count()) +
                                        " s: " + st.error().message);
                    (void)runtime.signal(t.container, SIGKILL);
                    save(t);
                    continue;
                }
            } else if (*st) {
                finish(t, **st);
                continue;
            } else if (t.poll_failing_since) {
                spdlog::info("attempt {}: the {} engine answers again", id, runtime.name());
                t.poll_failing_since.reset();
            }
            // The limits hold even while the engine does not answer.
            const auto max_rt = std::chrono::seconds(t.a.spec.resources.max_runtime_s);
            if (t.stop_reason.empty() && max_rt.count() > 0 && now - t.started > max_rt) {
                request_stop(t, "exceeded max_runtime " + resources::format_duration_s(t.a.spec.resources.max_runtime_s),
                             Outcome::exited, opt.runtime_grace);
            }
            if (t.kill_at && now >= *t.kill_at && !t.killed) {
                t.killed = true;
                if (auto k = runtime.signal(t.container, SIGKILL); !k) {
                    spdlog::warn("attempt {}: SIGKILL: {}", id, k.error().message);
                }
            }
        }
        refresh_active();
    }

    void finish(Tracked& t, const ExitStatus& st) {
        t.phase = Phase::ended;
        t.exit_code = st.exit_code;
        t.outcome = t.stop_outcome;
        if (!t.stop_reason.empty()) {
            t.reason = t.stop_reason + " (exit " + std::to_string(st.exit_code) + ")";
        } else if (st.oom_killed || (st.exit_code == 137 && t.a.spec.resources.memory_mib > 0 && runtime.name() != "process")) {
            t.reason = "killed: out of memory (exit 137; memory limit " + std::to_string(t.a.spec.resources.memory_mib) +
                       " MiB)";
        } else {
            t.reason = "exited with status " + std::to_string(st.exit_code);
        }
        if (t.stop_reason.empty() && st.exit_code != 0 && t.a.gpu_index >= 0) {
            // A GPU job that failed may have failed with its GPU: ask the driver now rather than at
            // the next periodic check, so that the hardware's failure is not charged as the job's.
            next_gpu_health = {};
            check_gpu_health();
            for (const auto& u : unhealthy) {
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
        spdlog::info("attempt {}: {}", t.a.attempt, t.reason);
        event_ended(t);
        save(t);
    }

    // ---- delivering (network) ----
    bool online() const { return Clock::now() >= offline_until; }

    // Classifies a failed call. Returns false when the link is down (stop using the network).
    bool handle(std::int64_t id, const Error& e, const char* what) {
        if (net::is_tls_verification_failure(e)) {
            fatal = e;
            stopping = true;
            return false;
        }
        if (e.code == ErrorCode::unavailable) {
            const auto d = backoff.next_delay();
            offline_until = Clock::now() + d;
            spdlog::warn("coordinator unreachable during {} ({}); retrying in {} ms", what, e.message, d.count());
            return false;
        }
        if (e.code == ErrorCode::conflict && id != 0) {
            auto it = tracked.find(id);
            if (it != tracked.end()) {
                it->second.fenced = true;
                if (it->second.phase == Phase::running) {
                    request_stop(it->second, "the coordinator no longer knows this attempt", Outcome::exited, opt.stop_grace);
                }
            }
            spdlog::info("attempt {}: {} refused, the attempt is no longer current: {}", id, what, e.message);
            return true;
        }
        spdlog::error("{} for attempt {}: {}", what, id, e.message);
        if (id != 0) {
            auto it = tracked.find(id);
            if (it != tracked.end() && it->second.phase == Phase::ended) {
                it->second.fenced = true; // a request the coordinator will never take: give up on it
            }
        }
        return true;
    }

    void delivered() { backoff.reset(); }

    void heartbeat_if_due() {
        const auto now = Clock::now();
        if (now < next_heartbeat || !online()) {
            return;
        }
        std::vector<std::int64_t> running;
        for (const auto& [id, t] : tracked) {
            if (!t.fenced) {
                running.push_back(id);
            }
        }
        for (const auto& d : deferred) {
            running.push_back(d.a.attempt); // keeps its lease while it waits for its GPU share
        }
        // The first heartbeat after a start carries the inventory: the machine may have changed
        // since it registered (other GPUs, --cpus-milli, --memory-mib, --slots).
        std::vector<std::int64_t> bad_gpus;
        for (const auto& u : unhealthy) {
            bad_gpus.push_back(u.index);
        }
        const bool paused_now = paused_since(opt.work_dir).has_value();
        if (paused_now != paused) {
            paused = paused_now;
            event(paused ? "paused by the owner: no new jobs (" + std::to_string(active.load()) +
                               " running go on); `gpupool worker resume` shares again"
                         : "sharing again: the owner resumed");
        }
        auto hb = api.heartbeat(running, bad_gpus, draining.load(), inventory_sent ? json() : inventory(), paused);
        if (!hb && net::is_tls_verification_failure(hb.error())) {
            fatal = hb.error(); // a wrong CA stays wrong: stop rather than retry forever
            stopping = true;
            return;
        }
        if (!hb && !inventory_sent && hb.error().code == ErrorCode::invalid_input) {
            spdlog::error("the coordinator refused this worker's inventory ({}); it keeps the one from registration",
                          hb.error().message);
            inventory_sent = true;
            return; // the next pass sends a plain heartbeat
        }
        if (!hb) {
            const auto code = hb.error().code;
            if (code == ErrorCode::unauthorized || code == ErrorCode::forbidden) {
                // Banned, or a pool that no longer knows us: nothing here will work again.
                fatal = make_error(code, "the coordinator refused this worker (" + hb.error().message +
                                             "); if the pool was reset, delete " +
                                             (opt.work_dir / "worker.json").string() + " to register again");
                stopping = true;
                return;
            }
            handle(0, hb.error(), "heartbeat");
            return;
        }
        delivered();
        inventory_sent = true;
        if (hb->lease_ms > 0) {
            lease_ms = hb->lease_ms;
        }
        const auto interval = std::min<milliseconds>(opt.heartbeat, milliseconds(std::max<std::int64_t>(lease_ms / 3, 100)));
        next_heartbeat = now + interval;
        for (auto id : hb->stop) {
            if (std::erase_if(deferred, [&](const Deferred& d) { return d.a.attempt == id; }) > 0) {
                spdlog::info("attempt {}: cancelled while it waited for its GPU share", id);
                refresh_active();
                continue;
            }
            auto it = tracked.find(id);
            if (it == tracked.end()) {
                continue;
            }
            it->second.fenced = true;
            if (it->second.phase == Phase::running) {
                request_stop(it->second, "stopped by the coordinator (cancelled, preempted or lost)", Outcome::exited,
                             opt.stop_grace);
            }
        }
    }

    // Returns false if the link went down.
    bool ship_logs(Tracked& t, bool flush) {
        const fs::path log = t.dir / "log";
        for (;;) {
            const std::int64_t size = file_size_or_zero(log);
            if (size <= t.shipped) {
                return true;
            }
            const auto pending = size - t.shipped;
            if (!flush && pending < k_eager_chunk && Clock::now() - t.last_ship < opt.log_flush) {
                return true;
            }
            const std::string chunk = read_range(log, t.shipped, std::min<std::size_t>(k_max_chunk, static_cast<std::size_t>(pending)));
            if (chunk.empty()) {
                return true;
            }
            auto r = api.append_log(t.a.attempt, t.shipped, chunk);
            if (!r) {
                return handle(t.a.attempt, r.error(), "log upload");
            }
            delivered();
            t.shipped = std::max(*r, t.shipped + static_cast<std::int64_t>(chunk.size()));
            t.last_ship = Clock::now();
            save(t);
        }
    }

    bool upload_outputs(Tracked& t) {
        if (t.outputs_done) {
            return true;
        }
        const fs::path tar = t.dir / "outputs.tar"; // packed once, kept until uploaded (across restarts)
        const std::int64_t cap = t.a.spec.outputs.max_size_mib * 1024 * 1024;
        std::error_code ec;
        if (!fs::is_regular_file(fs::symlink_status(tar, ec))) {
            // Packed under an unpredictable name (created O_EXCL, 0600), then renamed into place.
            auto tmp = util::TempFile::create(t.dir, ".outputs-", ".tar");
            auto packed = tmp ? pack_outputs(t.dir / "outputs", t.a.spec.outputs.paths, cap, tmp->path())
                              : Result<PackedOutputs>(tmp.error());
            if (packed) {
                if (auto st = tmp->rename_to(tar); !st) {
                    packed = st.error();
                }
            }
            if (!packed) {
                // Over the cap (or unreadable): the job fails with the reason, and its log says so.
                t.outputs_error = packed.error().message;
                t.outputs_done = true;
                t.exit_code = (t.exit_code && *t.exit_code != 0) ? *t.exit_code : 1;
                t.reason = "outputs not uploaded: " + packed.error().message;
                append_note(t, "gpupool-worker: " + t.reason + "\n");
                save(t);
                return true;
            }
            for (const auto& s : packed->skipped) {
                spdlog::warn("attempt {}: outputs: skipped {}", t.a.attempt, s);
                append_note(t, "gpupool-worker: outputs: skipped " + s + "\n");
            }
        }
        std::ifstream in(tar, std::ios::binary);
        std::stringstream ss;
        ss << in.rdbuf();
        auto st = api.upload_outputs(t.a.attempt, ss.str());
        if (!st) {
            return handle(t.a.attempt, st.error(), "outputs upload");
        }
        delivered();
        t.outputs_done = true;
        save(t);
        fs::remove(tar, ec);
        return true;
    }

    void deliver() {
        if (!online()) {
            return;
        }
        heartbeat_if_due();
        std::vector<std::int64_t> done;
        for (auto& [id, t] : tracked) {
            if (!online()) {
                return;
            }
            if (t.fenced) {
                if (t.phase == Phase::ended) {
                    done.push_back(id);
                }
                continue;
            }
            if (!t.start_reported && !t.container.empty()) {
                auto st = api.start(id);
                if (!st) {
                    if (!handle(id, st.error(), "start")) {
                        return;
                    }
                    continue;
                }
                delivered();
                t.start_reported = true;
                save(t);
            }
            const bool ended = t.phase == Phase::ended;
            if (!ship_logs(t, ended)) {
                return;
            }
            if (!ended || t.fenced) {
                continue;
            }
            if (!upload_outputs(t)) {
                return;
            }
            if (t.fenced) {
                continue;
            }
            // A final look: our own notes may have been appended after the last chunk.
            if (!ship_logs(t, true)) {
                return;
            }
            auto st = api.complete(id, t.exit_code, t.reason, t.outcome);
            if (!st) {
                if (!handle(id, st.error(), "complete")) {
                    return;
                }
                continue;
            }
            delivered();
            done.push_back(id);
        }
        for (auto id : done) {
            drop(id, tracked.at(id).fenced ? "dropped (no longer current)" : "delivered");
        }
    }

    // Assignments that arrived while draining: complete them unstarted so the job queues again now
    // rather than when its lease lapses.
    void hand_back() {
        while (!handback.empty() && online()) {
            const auto id = handback.back();
            if (tracked.count(id)) {
                handback.pop_back();
                continue;
            }
            auto st = api.complete(id, std::nullopt, "the worker is shutting down: handed back to the queue",
                                   Outcome::owner_preempted);
            if (!st && !handle(0, st.error(), "hand back")) {
                return;
            }
            handback.pop_back();
        }
    }

    // ---- poll thread ----
    void poll_loop() {
        WorkerApi papi(opt.coordinator_url, worker_token, opt.ca_cert);
        std::set<std::int64_t> handed;
        Backoff pb(opt.backoff_initial, opt.backoff_max, static_cast<std::uint64_t>(getpid()) * 7919u + 1);
        while (!stopping && !draining) {
            if (opt.slots > 0 && active.load() >= opt.slots) {
                sleep_for(opt.tick);
                continue;
            }
            auto r = papi.poll(opt.poll_wait);
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
                std::lock_guard lock(mu);
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

    Status run() {
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
        auto g = gpus_probe.list();
        if (!g) {
            return g.error();
        }
        gpus = *g;
        enforcement = gpus.empty() ? MemoryEnforcement::none : gpus_probe.memory_enforcement();
        // A worker whose engine cannot run jobs must not join as active (every job would fail).
        if (auto st = runtime.check(); !st) {
            return st;
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
            std::vector<AssignmentMsg> fresh;
            {
                std::unique_lock lock(mu);
                cv.wait_for(lock, opt.tick, [&] { return !inbox.empty() || stopping.load(); });
                fresh.swap(inbox);
            }
            for (auto& a : fresh) {
                if (draining) {
                    handback.push_back(a.attempt); // never started here: give it straight back
                    continue;
                }
                take(std::move(a));
            }
            if (draining && !deferred.empty()) {
                for (const auto& d : deferred) {
                    handback.push_back(d.a.attempt);
                }
                deferred.clear();
                refresh_active();
            }
            start_deferred();
            hand_back();
            watch();
            watch_gpu_memory();
            check_gpu_health();
            deliver();
            if (draining) {
                const auto now = Clock::now();
                if (hurry && (!drain_deadline || *drain_deadline > now)) {
                    drain_deadline = now;
                    give_up_at.reset();
                    spdlog::warn("stopping {} running job(s) now and handing them back", active.load());
                }
                if (!drain_deadline) {
                    drain_deadline = now + opt.drain_grace;
                    next_heartbeat = now; // tell the coordinator at once: no new work here
                    spdlog::info("draining: no new work; {} running job(s) have {} s to finish", active.load(),
                                 opt.drain_grace.count() / 1000);
                }
                if (now >= *drain_deadline) {
                    for (auto& [id, t] : tracked) {
                        request_stop(t, "the worker is shutting down: handed back to the queue", Outcome::owner_preempted,
                                     opt.stop_grace);
                    }
                }
                if (tracked.empty() && handback.empty()) {
                    break;
                }
                if (active.load() == 0) {
                    if (!give_up_at) {
                        give_up_at = now + (hurry ? std::min<milliseconds>(opt.give_up_after_drain, k_hurried_give_up)
                                                  : opt.give_up_after_drain);
                    } else if (now >= *give_up_at) {
                        spdlog::warn("drain: the coordinator did not take {} result(s); they stay spooled in {}",
                                     tracked.size(), attempts_dir().string());
                        break;
                    }
                }
            }
        }
        stopping = true;
        cv.notify_all();
        poller.join();
        if (fatal) {
            return *fatal;
        }
        return {};
    }
};

std::optional<StoredIdentity> read_stored_identity(const fs::path& work_dir) {
    auto j = read_json(work_dir / "worker.json");
    if (!j || !j->is_object()) {
        return std::nullopt;
    }
    try {
        StoredIdentity id{j->value("coordinator", ""), j->value("worker_id", std::int64_t{0}), j->value("token", ""),
                          j->value("instance", "")};
        if (id.coordinator.empty() || id.worker_id <= 0 || id.token.empty()) {
            return std::nullopt;
        }
        return id;
    } catch (const json::exception&) {
        return std::nullopt; // a field of the wrong type: not an identity
    }
}

namespace {
const char* const k_pause_file = "paused";
} // namespace

Status pause_sharing(const fs::path& work_dir, const std::string& why) {
    std::error_code ec;
    fs::create_directories(work_dir, ec);
    const auto now = std::chrono::system_clock::now();
    const std::time_t t = std::chrono::system_clock::to_time_t(now);
    std::tm utc{};
    gmtime_r(&t, &utc);
    char when[32];
    std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", &utc);
    return util::write_private_file(work_dir / k_pause_file, std::string(when) + (why.empty() ? "" : ": " + why) + "\n");
}

Status resume_sharing(const fs::path& work_dir) {
    std::error_code ec;
    fs::remove(work_dir / k_pause_file, ec);
    if (ec) {
        return make_error(ErrorCode::io, "cannot remove " + (work_dir / k_pause_file).string() + ": " + ec.message());
    }
    return {};
}

std::optional<std::string> paused_since(const fs::path& work_dir) {
    std::error_code ec;
    if (!fs::exists(work_dir / k_pause_file, ec)) {
        return std::nullopt;
    }
    std::ifstream in(work_dir / k_pause_file);
    std::string line;
    std::getline(in, line);
    return line.substr(0, 200);
}

Agent::Agent(AgentOptions options, ContainerRuntime& runtime, GpuProbe& gpus)
    : m_impl(std::make_unique<Impl>(std::move(options), runtime, gpus, *this)) {}

Agent::~Agent() = default;

Status Agent::run() { return m_impl->run(); }

void Agent::drain() {
    m_impl->draining = true;
    { std::lock_guard lock(m_impl->mu); } // a waiter between its check and its wait must not miss this
    m_impl->cv.notify_all();
}

void Agent::drain_now() {
    m_impl->hurry = true;
    drain();
}

void Agent::stop() {
    m_impl->stopping = true;
    m_impl->cv.notify_all();
}

} // namespace gpupool::worker
